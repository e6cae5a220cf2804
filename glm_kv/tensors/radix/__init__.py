"""A small, readable RadixTree that behaves as SGLang 0.5.23's UnifiedRadixCache (FULL + MAMBA).

The tree stores *indices*, never KV bytes (article section 4). Each node is keyed by a
page-aligned run of token ids and carries one ``ComponentData`` per component (``nodes.py``).
One module per job:

* ``nodes``       - ``TreeNode``, ``ComponentData``, ``MatchResult``, ``EvictResult``, ...
* ``lru``         - MAMBA's intrusive LRU lists and FULL's evictable-leaf heap.
* ``tree``        - ``RadixTree``: structure, match, insert (the rules, with SGLang's names).
* ``bookkeeping`` - sizes, leaf sets and locks, kept as the tree changes (as SGLang does).
* ``eviction``    - token pressure, mamba pressure, host eviction.
* ``hicache``     - backup, load-back, host locks.
* ``invariants``  - the recount tests call (``RadixTree.check_invariants``).
* ``requests``    - a request's lifecycle around the tree, as SGLang's scheduler drives it
  (``start_request`` / ``decode`` / ``finish_request``, ``prefill`` for a whole one).
* ``content``     - ``SyntheticContent``: deterministic bytes written and checked.
* ``replay``      - ``replay_requests``: a workload's hit rate.

``tests/sglang/test_radix_differential.py`` runs random operation sequences on this tree and on
SGLang's own cache and compares every observable after every operation.

Simplified on purpose: transfers are synchronous copies (no write-back policy, no storage tier,
no async H2D/D2H); a request's own working / ping-pong mamba slots are not modelled (the tree only
sees the state a request donates when it checkpoints), and a checkpoint that finds every state
locked is skipped where SGLang asserts.
"""
from __future__ import annotations

from .content import SyntheticContent
from .errors import ContentMismatch, RadixTreeError
from .lru import LeafHeap, LRUList
from .nodes import (
    FULL, MAMBA, ComponentData, ComponentType, EvictResult, LoadBackResult, LockHandle, MatchResult,
    TreeNode,
)
from .replay import WorkloadHits, replay_requests
from .requests import Req, decode, finish_request, load_back_for, prefill, start_request
from .tree import FLA_CHUNK_SIZE, RadixTree

__all__ = [
    "FLA_CHUNK_SIZE", "FULL", "MAMBA", "ComponentData", "ComponentType", "ContentMismatch", "EvictResult",
    "LRUList", "LeafHeap", "LoadBackResult", "LockHandle", "MatchResult", "RadixTree", "RadixTreeError",
    "Req", "SyntheticContent", "TreeNode", "WorkloadHits", "decode", "finish_request", "load_back_for",
    "prefill", "replay_requests", "start_request",
]
