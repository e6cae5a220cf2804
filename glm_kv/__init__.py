"""glm-kv: the KV cache of GLM-5.3-Flash under SGLang, computable, measurable and checkable.

Four layers, each importing only those below it (``tests/test_layering.py`` enforces it):
``inputs`` (model config, profiles, launch commands, GPUs, resolution) -> ``ledgers`` (plain
arithmetic, no torch) -> ``tensors`` (pools, radix cache, host pools, measurement) -> ``book``
(runner, tables, charts, pitfalls); ``cli`` on top. ``errors`` and ``units`` are leaves.
"""
from __future__ import annotations

from importlib import import_module
from typing import Any

# name -> module that defines it. Imported on first use (PEP 562), so ``import glm_kv`` and the
# CLI's start pay only for what a command needs (issue 23: ``glm-kv plan --json`` start-up).
_EXPORTS = {
    "ProfileError": ".errors",
    "ModelConfig": ".inputs.model", "load_model": ".inputs.model",
    "DEFAULT_PROFILE": ".inputs.profile", "Profile": ".inputs.profile", "load_profile": ".inputs.profile",
    "shipped_profiles": ".inputs.profile",
    "Plan": ".ledgers.plan", "build_plan": ".ledgers.plan", "compute_plan": ".ledgers.plan",
    "load_plan": ".ledgers.plan",
}
__all__ = list(_EXPORTS)
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(import_module(_EXPORTS[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)
