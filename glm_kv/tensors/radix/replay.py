"""Workload replay: what a sequence of whole requests reuses from the tree (its hit rate)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from .content import SyntheticContent
from .requests import prefill
from .tree import RadixTree


@dataclass
class WorkloadHits:
    """What a sequence of requests reused from the tree (``replay_requests``)."""
    requests: int
    refused: int                # no device room even after eviction
    prompt_tokens: int
    reused_tokens: int          # sum of device_prefix_len: prefix served from the tree
    full_hit_tokens: int        # sum of full_kv_hit_length: KV present, with or without a state
    branching: int              # requests whose match set a mamba_branching_seqlen
    per_request: list[tuple[int, int, int, Optional[int]]]  # (prompt, reused, full hit, branching)

    @property
    def hit_rate(self) -> float:
        """Reused prompt tokens / prompt tokens (SGLang's cache hit rate, tokens)."""
        return self.reused_tokens / self.prompt_tokens if self.prompt_tokens else 0.0

    @property
    def full_hit_rate(self) -> float:
        """FULL KV hit / prompt tokens: what the rate would be if every KV hit had its state."""
        return self.full_hit_tokens / self.prompt_tokens if self.prompt_tokens else 0.0


def replay_requests(tree: RadixTree, content: Optional[SyntheticContent], prompts,
                    decode_tokens: int = 0) -> WorkloadHits:
    """Run ``prompts`` one after the other as whole requests (``prefill``, then ``decode_tokens``
    generated tokens each) and add up what each one reused."""
    out = WorkloadHits(0, 0, 0, 0, 0, 0, [])
    for i, p in enumerate(prompts):
        p = list(p)
        gen = [(i * 7919 + j * 31) % 50_000 + 100_000 for j in range(decode_tokens)]
        res = prefill(tree, content, p, gen)
        out.requests += 1
        if res is None:
            out.refused += 1
            continue
        m = res[1]
        out.prompt_tokens += len(p)
        out.reused_tokens += m.device_prefix_len
        out.full_hit_tokens += m.full_kv_hit_length
        out.branching += m.mamba_branching_seqlen is not None
        out.per_request.append((len(p), m.device_prefix_len, m.full_kv_hit_length, m.mamba_branching_seqlen))
    return out
