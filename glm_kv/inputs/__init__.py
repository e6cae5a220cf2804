"""Layer 1, inputs: the model config, deployment profiles, launch commands, GPUs, and the one
resolution step that turns a profile into the server arguments SGLang runs with.

May import: ``glm_kv.errors``, ``glm_kv.units``. Nothing here does arithmetic on pools.
"""
