"""glm-kv: the KV cache of GLM-5.3-Flash under SGLang, computable, measurable and checkable.

model config -> deployment profile -> ledgers -> capacity. The pure ledgers need no torch;
the real-tensor pools (``glm_kv.pools``) and the RadixTree / HiCache models import it lazily.
"""
from .errors import ProfileError
from .model import ModelConfig, load_model
from .plan import Plan, build_plan, compute_plan
from .profile import DEFAULT_PROFILE, Profile, load_profile, shipped_profiles

__all__ = ["ProfileError", "ModelConfig", "load_model", "Plan", "build_plan", "compute_plan",
           "DEFAULT_PROFILE", "Profile", "load_profile", "shipped_profiles"]
__version__ = "0.1.0"
