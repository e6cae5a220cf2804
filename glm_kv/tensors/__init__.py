"""Layer 3, tensors: real torch buffers shaped like SGLang's, and what runs on them.

budget (the allocation guard, a leaf) -> pool_objects (SGLang's pool objects, free lists and shape
rules, as its ``memory_pool.py``) -> model_pools (one geometry and one builder of every model's device
and host tensors, GLM-5.3-Flash's included) -> memory_pool_host (HiCache host pools, ``HostPoolGroup``)
-> radix (the RadixTree with FULL / MAMBA ``ComponentData``) and measure (allocated bytes vs the
ledgers). ``memory_pool`` re-exports pool_objects and model_pools' device names under their old path.

May import: ``glm_kv.errors``, ``glm_kv.units``, ``glm_kv.inputs``, ``glm_kv.ledgers``, torch.
"""
