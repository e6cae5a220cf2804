"""Layer 3, tensors: real torch buffers shaped like SGLang's, and what runs on them.

budget (the allocation guard, a leaf) -> memory_pool (device pools and allocators, as SGLang's
``memory_pool.py``) -> memory_pool_host (HiCache host pools, ``HostPoolGroup``) -> radix
(the RadixTree with FULL / MAMBA ``ComponentData``) and measure (allocated bytes vs the ledgers).

May import: ``glm_kv.errors``, ``glm_kv.units``, ``glm_kv.inputs``, ``glm_kv.ledgers``, torch.
"""
