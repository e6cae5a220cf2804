"""The two ways glm-kv's vLLM plan ends without a plan: a launch it does not derive, and vLLM's own refusal.

Their own module because both ``ledgers/vllm.py`` (the sizing) and ``ledgers/vllm_dcp.py`` (decode context
parallelism's rules, which ``vllm.py`` calls) raise them: neither imports the other for its exceptions.
"""
from __future__ import annotations


class NotModelled(Exception):
    """A launch outside what glm-kv derives of vLLM 0.33.0 (named), not a vLLM refusal."""


class VllmRefusal(Exception):
    """vLLM refuses to start: its stage, exception type and words."""

    def __init__(self, stage: str, type_: str, message: str):
        super().__init__(message)
        self.stage, self.type, self.message = stage, type_, message
