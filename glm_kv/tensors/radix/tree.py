"""The RadixTree: structure, match, insert, locks, and the bookkeeping kept as it changes.

Rules, with SGLang's names (``mem_cache/unified_cache/unified_tree_core.py`` = UTC,
``components/mamba.py``, ``components/full.py``, ``unified_radix_cache.py`` = URC, 0.5.23 wheel).
``tests/sglang/test_radix_differential.py`` runs random operation sequences on this tree and on
SGLang's own cache and compares every observable after every operation.

* ``match_prefix`` walks FULL-present children, splitting the last partly matched node even for
  a read-only match. ``best_match_node`` is the deepest node where FULL *and* MAMBA are valid;
  ``device_prefix_len`` is its depth; ``full_kv_hit_length`` counts the whole FULL walk;
  ``mamba_branching_seqlen`` = the FULL hit floored to the checkpoint grid, if beyond the MAMBA
  boundary (``finalize_match_result_in_tree_core``).
* Two LRUs. FULL: ``last_access_time`` stamped from ``best_match_node`` up to the root on a match
  (ancestors a hair older), and on every node an insert walks. MAMBA: its own list
  (``lru_lists[MAMBA]``); a match moves **only best_match_node** to MRU (``refresh_lru``
  MATCH_END), a new state enters at MRU, an insert ending on an existing state refreshes it.
* Locks: ``inc_lock_ref`` locks FULL on the node and every ancestor, MAMBA on the node only
  (tombstones are counted too). A node with any lock is not a device leaf.
* ``--mamba-max-states-per-path`` (``mamba_max_states_per_path``, default -1 = unlimited): after
  an insert adds a state, the shallowest eligible states beyond the cap on that path are
  tombstoned (soft: tail, forks, locked states and device leaves are kept).
* ``--enable-int8-mamba-checkpoint``: tree states live in a separate checkpoint pool of
  ``int8_mamba_ckpt_size`` slots (default 2 x the active pool); mamba pressure on the tree is then
  pressure on that pool. Modelled as slot accounting (no int8 bytes); not with HiCache.

Bookkeeping, as SGLang's ``UnifiedTreeCore`` keeps it (``component_evictable_size_``,
``component_protected_size_``, ``evictable_device_leaves``, ``evictable_host_leaves``): every change
of a FULL / MAMBA value, a lock or a child goes through the ``_set_*`` / ``_lock_*`` helpers here,
which update the four sizes and both leaf sets in O(1) per touched node. So sizes are O(1) reads
and eviction never scans the tree (``eviction.py``). ``check_invariants`` recomputes all of it
from scratch and raises ``RadixTreeError`` on any difference.

Eviction lives in ``eviction.py``, HiCache in ``hicache.py``, the full check in ``invariants.py``.
"""
from __future__ import annotations

import itertools
import math
from typing import Any, Iterator, Optional

import torch

from ..model_pools import DevicePools
from ..pool_objects import MambaSlotAllocator
from .bookkeeping import Bookkeeping
from .errors import RadixTreeError
from .eviction import Eviction
from .hicache import HiCache
from .invariants import check_invariants
from .lru import LeafHeap, LRUList
from .nodes import FULL, MAMBA, LockHandle, MatchResult, TreeNode

FLA_CHUNK_SIZE = 64  # sglang.kernels.ops.attention.fla.chunk_delta_h.CHUNK_SIZE
_ANCESTOR_TIME_STEP = 0.00001  # UTC._match_post_processor: parents a hair older than children
_EMPTY = torch.empty(0, dtype=torch.int64)


def _prefix_pages(key: tuple[int, ...], other: tuple[int, ...], off: int, page: int) -> int:
    """Length of the common prefix of key and other[off:], in whole pages. O(len(key))."""
    n = min(len(key), len(other) - off)
    n -= n % page
    if key[:n] == other[off:off + n]:
        return n
    i = 0
    while i + page <= n and key[i:i + page] == other[off + i:off + i + page]:
        i += page
    return i


class RadixTree(Bookkeeping, Eviction, HiCache):
    """FULL + MAMBA radix tree over ``DevicePools`` (and optionally a ``HostPoolGroup``)."""

    def __init__(self, pools: DevicePools, host: Any = None,
                 mamba_track_interval: Optional[int] = None, *,
                 mamba_max_states_per_path: int = -1,
                 enable_int8_mamba_checkpoint: bool = False,
                 int8_mamba_ckpt_size: Optional[int] = None,
                 hicache_write_policy: Optional[str] = None):
        self.pools = pools
        self.host = host
        self.page_size = pools.geometry.page_size
        # mamba_cache_chunk_size = max(FLA chunk, page_size); the checkpoint grid is its lcm with
        # the page the tree allocates on (runtime_context.mamba_checkpoint_grid).
        self.mamba_cache_chunk_size = max(FLA_CHUNK_SIZE, self.page_size)
        self.mamba_checkpoint_grid = math.lcm(self.mamba_cache_chunk_size, self.page_size)
        self.mamba_track_interval = mamba_track_interval or self.mamba_checkpoint_grid
        if self.mamba_track_interval % self.mamba_checkpoint_grid:
            raise ValueError(f"mamba_track_interval {self.mamba_track_interval} must be a multiple of "
                             f"the checkpoint grid {self.mamba_checkpoint_grid}")
        # server_args: 0 and values below -1 are rejected (arg_groups/mamba_hook.py)
        if mamba_max_states_per_path == 0 or mamba_max_states_per_path < -1:
            raise ValueError(f"mamba_max_states_per_path must be -1 (unlimited) or >= 1, "
                             f"got {mamba_max_states_per_path}")
        self.mamba_max_states_per_path = mamba_max_states_per_path
        self.enable_int8_mamba_checkpoint = enable_int8_mamba_checkpoint
        if enable_int8_mamba_checkpoint and host is not None:
            raise ValueError("enable_int8_mamba_checkpoint cannot be combined with HiCache "
                             "(arg_groups/mamba_hook.py rejects it)")
        # MambaCheckpointPool: tree states live here when int8 checkpoints are on
        self.mamba_ckpt_allocator = (MambaSlotAllocator(int8_mamba_ckpt_size or 2 * pools.mamba_allocator.size)
                                     if enable_int8_mamba_checkpoint else None)
        # HiCache: None = backups only when ``backup`` is called (synchronous, no locks held);
        # "write_through" = SGLang's policy: every insert backs up what it touched, and a written
        # or loaded node stays locked until ``check_hicache_events``.
        if hicache_write_policy not in (None, "write_through"):
            raise ValueError(f"hicache_write_policy: only write_through is modelled, got {hicache_write_policy!r}")
        if hicache_write_policy and host is None:
            raise ValueError("hicache_write_policy needs a HostPoolGroup")
        self.write_through = hicache_write_policy == "write_through"
        self.write_through_threshold = 1  # URC: 1 for write_through (2 for write_through_selective)
        self.load_back_threshold = 10     # URC.load_back_threshold (tokens)
        self.ongoing_write_through: dict[int, tuple[list[TreeNode], LockHandle]] = {}
        self.ongoing_load_back: list[tuple[LockHandle, tuple[TreeNode, bool]]] = []
        self._time = 0.0
        self.root = self._new_node((), None)
        self.root.component_data[FULL].value = _EMPTY
        self.root.component_data[FULL].lock_ref = 1
        self.root.component_data[MAMBA].lock_ref = 1
        self.lru_lists = {MAMBA: LRUList(MAMBA, 0)}
        self.host_lru_lists = {MAMBA: LRUList(MAMBA, 1)}
        # UTC.evictable_device_leaves / evictable_host_leaves, each with its LRU order
        self.device_leaves = LeafHeap()
        self.host_leaves = LeafHeap()
        # UTC.component_evictable_size_ / component_protected_size_ (FULL in tokens, MAMBA in states)
        self._size = {"full_evictable": 0, "full_protected": 0, "mamba_evictable": 0, "mamba_protected": 0}
        # what every evict / evict_for_alloc freed on device (SGLang's EvictResult, summed)
        self.evicted = {"tokens": 0, "mamba": 0}

    # ------------------------------------------------------------------ helpers
    def _tick(self) -> float:
        """components/base.py get_and_increase_time_counter."""
        t = self._time
        self._time += 1.0
        return t

    def _new_node(self, key: tuple[int, ...], parent: Optional[TreeNode]) -> TreeNode:
        n = TreeNode(key, parent, self._tick())
        n.creation_time = self._tick()
        return n

    def _touch_node(self, node: TreeNode) -> None:
        node.last_access_time = self._tick()

    def touch(self, node: TreeNode) -> None:
        """Mark a node used now (FULL's LRU). O(1)."""
        self._touch_node(node)

    def page_aligned(self, tokens) -> tuple[int, ...]:
        tokens = tuple(tokens)
        return tokens[: len(tokens) // self.page_size * self.page_size]

    def nodes(self) -> Iterator[TreeNode]:
        """Every node, root first. O(nodes): for checks and views, never on an operation's path."""
        stack = [self.root]
        while stack:
            n = stack.pop()
            yield n
            stack.extend(n.children.values())

    def path_to_root(self, node: TreeNode) -> list[TreeNode]:
        """O(depth)."""
        out = []
        while node is not None and node is not self.root:
            out.append(node)
            node = node.parent
        return out

    def depth_of(self, node: TreeNode) -> int:
        """Tokens from the root to the end of ``node``. O(depth)."""
        return sum(len(n.key) for n in self.path_to_root(node))

    def key_of(self, node: TreeNode) -> tuple[int, ...]:
        return tuple(itertools.chain.from_iterable(n.key for n in reversed(self.path_to_root(node))))

    def path_device_indices(self, node: TreeNode) -> torch.Tensor:
        """FULL device slots from the root to ``node``. O(depth), one tensor call."""
        vals = [n.component_data[FULL].value for n in reversed(self.path_to_root(node))]
        return torch.cat(vals) if vals else _EMPTY

    @property
    def mamba_slot_allocator(self) -> MambaSlotAllocator:
        """Where tree states live: the active pool, or the int8 checkpoint pool."""
        return self.mamba_ckpt_allocator or self.pools.mamba_allocator

    # ------------------------------------------------------------------ split
    def _split(self, child: TreeNode, at: int) -> TreeNode:
        """UTC._split_node: split child at ``at`` tokens (page aligned); return the new upper node.

        FULL value, host value and locks are split / copied; the MAMBA state (device and host)
        stays on the lower node, the upper one is a MAMBA tombstone. Sizes do not change (both
        halves share the child's lock). O(len(child.key)) for the key and two tensor slices.
        """
        if not (0 < at < len(child.key) and at % self.page_size == 0):
            raise RadixTreeError(f"split of node {child.id} at {at}: not a page inside its key")
        parent = child.parent
        upper = self._new_node(child.key[:at], parent)
        f, uf = child.component_data[FULL], upper.component_data[FULL]
        uf.lock_ref, uf.host_lock_ref = f.lock_ref, f.host_lock_ref  # FULL locks cover the path
        if f.value is not None:
            uf.value, f.value = f.value[:at].clone(), f.value[at:].clone()
            upper.n_device_children = 1
        if f.host_value is not None:
            uf.host_value, f.host_value = f.host_value[:at].clone(), f.host_value[at:].clone()
        uf.metadata = dict(f.metadata)
        upper.hit_count = child.hit_count
        ack = child.write_through_pending_id
        if ack is not None:  # UpdatePendingBackupOnNodeSplit: the ack publishes both halves
            upper.write_through_pending_id = ack
            nodes, lock = self.ongoing_write_through[ack]
            self.ongoing_write_through[ack] = ([x for n in nodes for x in ((upper, n) if n is child else (n,))], lock)
        del parent.children[child.key[: self.page_size]]
        child.key = child.key[at:]
        child.parent = upper
        upper.children[child.key[: self.page_size]] = child
        parent.children[upper.key[: self.page_size]] = upper
        child.last_access_time = self._tick()
        self._refresh_leaf(upper)
        self._refresh_leaf(child)
        return upper

    def _mamba_valid(self, node: TreeNode, device_only: bool) -> bool:
        m = node.component_data[MAMBA]
        return m.value is not None or (not device_only and m.host_value is not None)

    def _full_valid(self, node: TreeNode, device_only: bool) -> bool:
        return not node.evicted or (not device_only and node.backuped)

    # ------------------------------------------------------------------ match
    def match_prefix(self, tokens, *, touch: bool = True) -> MatchResult:
        """UTC._match_prefix_helper + _match_post_processor + each component's finalize.

        ``touch=False`` leaves both LRUs alone (not SGLang: its match always refreshes them).
        O(len(tokens) + depth): one dict lookup and one key compare per node walked, at most one
        split, one tensor call for the device indices.
        """
        key = self.page_aligned(tokens)
        ps = self.page_size
        hicache = self.host is not None
        node, off = self.root, 0
        values: list[torch.Tensor] = []
        full_hit = 0
        best = best_dev = self.root
        best_dev_len = 0
        dev_tokens = best_dev_tokens = 0
        while off < len(key):
            child = node.children.get(key[off: off + ps])
            if child is None:
                break
            if child.evicted and not child.backuped:
                break
            n = _prefix_pages(child.key, key, off, ps)
            full_hit += n
            partial = n < len(child.key)
            node = self._split(child, n) if partial else child
            if not node.evicted:
                values.append(node.component_data[FULL].value)
                dev_tokens += n
            matched = self._full_valid(node, not hicache) and self._mamba_valid(node, not hicache)
            if matched:
                best = node
            if self._full_valid(node, True) and self._mamba_valid(node, True) and (matched or hicache):
                best_dev, best_dev_len, best_dev_tokens = node, len(values), dev_tokens
            if partial:
                break
            off += n
        if touch:
            self._refresh_mamba_lru_on_match(best)
            t = self._tick()
            n = best
            while n is not None:
                n.last_access_time = t
                t -= _ANCESTOR_TIME_STEP
                n = n.parent
        dev_len = best_dev_tokens
        host_hit = 0
        n = best
        while n is not best_dev and n is not self.root:
            hv = n.component_data[FULL].host_value
            if hv is not None:
                host_hit += len(hv)
            n = n.parent
        grid = self.mamba_checkpoint_grid
        aligned = full_hit // grid * grid
        branching = aligned if aligned > dev_len + host_hit else None
        m = best.component_data[MAMBA]
        mamba_host_hit = int(best is not self.root and m.value is None and m.host_value is not None)
        idx = torch.cat(values[:best_dev_len]) if best_dev_len else torch.empty(0, dtype=torch.int64)
        return MatchResult(idx, dev_len, host_hit, full_hit, best, best_dev, node, branching,
                           mamba_host_hit)

    def _refresh_mamba_lru_on_match(self, best: TreeNode) -> None:
        """MambaComponent.refresh_lru(MATCH_END): only the state the match uses becomes MRU,
        so a session's older states stay cold and are evicted first. O(1)."""
        if best is not self.root and best.component_data[MAMBA].value is not None:
            self.lru_lists[MAMBA].reset_node_mru(best)

    # ------------------------------------------------------------------ insert
    def insert(self, tokens, kv_indices: torch.Tensor, mamba_value: Optional[int] = None,
               prefix_len: int = 0, inserted_len: int = 0) -> dict[str, Any]:
        """UTC insert walk + MambaComponent.commit_insert_component_data.

        ``tokens``: a page-aligned key whose KV sits in ``kv_indices`` (one slot per token).
        ``prefix_len`` (SGLang's ``prev_prefix_len``): the leading tokens whose slots the request
        took from the tree. Beyond it, slots of tokens the tree already holds on device are
        duplicates and go back to the allocator; an evicted, host-backed node on the path takes
        the fresh slots instead. ``mamba_value``: the slot holding the KDA state after the whole
        key, attached to the insert's **last node only**; if that node already has a state the
        offered slot is freed (``mamba_exist``). Returns counts and the last node.
        O(len(tokens) + depth), a few tensor calls per node walked.
        """
        key = tuple(tokens)
        ps = self.page_size
        if len(key) % ps or len(kv_indices) != len(key):
            raise ValueError("insert needs a page-aligned key and one kv index per token")
        stats: dict[str, Any] = {"reused_tokens": 0, "new_tokens": 0, "freed_dup_tokens": 0,
                                 "new_mamba": 0, "freed_dup_mamba": 0, "mamba_exist": False}
        alloc = self.pools.token_to_kv_pool_allocator
        self._touch_node(self.root)
        node, off = self.root, 0
        is_new_leaf = False
        while off < len(key):
            child = node.children.get(key[off: off + ps])
            if child is None:
                new = self._new_node(key[off:], node)
                f = new.component_data[FULL]
                f.value = kv_indices[off:].clone()
                f.metadata.update(indexer_on_device=True, loaded_back=False)
                self._size["full_evictable"] += len(new.key)
                self._add_child(node, new)
                self._refresh_leaf(new)
                stats["new_tokens"] += len(new.key)
                node, off, is_new_leaf = new, len(key), True
                break
            self._touch_node(child)
            n = _prefix_pages(child.key, key, off, ps)
            if n < len(child.key):
                child = self._split(child, n)
            f = child.component_data[FULL]
            if f.value is None:  # evicted but backed up: take the freshly computed slots
                if off < prefix_len:
                    raise ValueError("prefix_len covers a node that is not on device")
                self._set_full_value(child, kv_indices[off: off + n].clone())
                f.metadata.update(indexer_on_device=True, loaded_back=False)
                stats["new_tokens"] += n
            else:
                dup_start = max(0, prefix_len - off)
                own = min(dup_start, n)
                if own and not torch.equal(f.value[:own], kv_indices[off: off + own]):
                    raise ValueError("prefix_len slots are not the tree's own slots")
                if dup_start < n:
                    alloc.free(kv_indices[off + dup_start: off + n])
                    stats["freed_dup_tokens"] += n - dup_start
                stats["reused_tokens"] += n
            if off + n > inserted_len and self._inc_hit_count_and_check(child):
                self.backup(child)
            node, off = child, off + n
        stats["prefix_len"] = len(key) - (stats["new_tokens"] if is_new_leaf else 0)
        stats["last_node"] = node
        if mamba_value is not None and node is not self.root:
            m = node.component_data[MAMBA]
            slot = torch.tensor([int(mamba_value)], dtype=torch.int64)
            if m.value is None:
                self._set_mamba_value(node, slot)
                self.lru_lists[MAMBA].insert_mru(node)
                self.host_lru_lists[MAMBA].remove_node(node)
                if not is_new_leaf:
                    self._touch_node(node)
                stats["new_mamba"] += 1
                self._evict_excess_path_states(node)
            else:
                self.lru_lists[MAMBA].reset_node_mru(node)
                self._touch_node(node)
                self.mamba_slot_allocator.free(slot)
                stats["freed_dup_mamba"] += 1
                stats["mamba_exist"] = True
        if self.write_through and node is not self.root:  # UTC._should_backup_after_insert
            if is_new_leaf:
                if len(key) > inserted_len and self._inc_hit_count_and_check(node):
                    self.backup(node)
            elif (node.backuped and node.write_through_pending_id is None
                  and node.component_data[MAMBA].value is not None
                  and node.component_data[MAMBA].host_value is None):
                self.backup(node)
        return stats

    def _evict_excess_path_states(self, tail: TreeNode) -> None:
        """MambaComponent._evict_excess_path_states (``--mamba-max-states-per-path``). O(depth)."""
        cap = self.mamba_max_states_per_path
        if cap < 0:
            return
        holders = [n for n in self.path_to_root(tail) if n.component_data[MAMBA].value is not None]
        excess = len(holders) - cap
        for n in reversed(holders):  # shallowest first
            if excess <= 0 or n is tail:
                break
            if n.component_data[MAMBA].lock_ref > 0 or len(n.children) != 1:
                continue
            if self._is_device_leaf(n):
                continue
            self._tombstone_mamba(n)
            excess -= 1

    def check_invariants(self) -> None:
        """Every slot owned exactly once, and every kept size and leaf set equal to a recount.
        O(nodes + pool size). Raises ``RadixTreeError``."""
        check_invariants(self)
