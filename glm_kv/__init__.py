"""glm-kv: the KV cache of GLM-5.3-Flash under SGLang, computable, measurable and checkable.

Four layers, each importing only those below it (``tests/test_layering.py`` enforces it):
``inputs`` (model config, profiles, launch commands, GPUs, resolution) -> ``ledgers`` (plain
arithmetic, no torch) -> ``tensors`` (pools, radix cache, host pools, measurement) -> ``book``
(runner, tables, charts, pitfalls); ``cli`` on top. ``errors`` and ``units`` are leaves.
"""
from .errors import ProfileError
from .inputs.model import ModelConfig, load_model
from .inputs.profile import DEFAULT_PROFILE, Profile, load_profile, shipped_profiles
from .ledgers.plan import Plan, build_plan, compute_plan, load_plan

__all__ = ["ProfileError", "ModelConfig", "load_model", "Plan", "build_plan", "compute_plan", "load_plan",
           "DEFAULT_PROFILE", "Profile", "load_profile", "shipped_profiles"]
__version__ = "0.1.0"
