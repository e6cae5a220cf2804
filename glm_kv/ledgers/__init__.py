"""Layer 2, ledgers: plain arithmetic on resolved inputs (numpy at most, never torch).

token, request, tail, parallel: bytes per token / slot / request; memory: the rest for the pools;
capacity: the one sizing kernel (scalar and vectorised); host: HiCache's DRAM side; plan: all of
them for one profile (typed ``Plan``, JSON at the edge); sweep: many points at once; workload,
structure: views the book reads.

May import: ``glm_kv.errors``, ``glm_kv.units``, ``glm_kv.inputs``.
"""
