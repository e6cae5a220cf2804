"""A small, readable RadixTree that behaves as SGLang 0.5.23's UnifiedRadixCache (FULL + MAMBA).

The tree stores *indices*, never KV bytes (article section 4). Each node is keyed by a
page-aligned run of token ids and carries one ``ComponentData`` per component:

* ``FULL``  - ``value``: device token slots of the node's tokens (from the paged
  ``token_to_kv_pool_allocator``); ``host_value``: HiCache host slots (page_first, page_size tokens).
* ``MAMBA`` - ``value``: one device mamba slot holding the KDA state *after* the node's last token
  (a checkpoint); ``host_value``: one MambaPoolHost slot. A node without one is a MAMBA tombstone.

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
* Eviction (``_evict_components``): FULL first, then MAMBA, each until its request is met
  (a cascade counts). Token pressure pops the LRU *device leaf* (FULL on device, unlocked, no
  child with device FULL) and evicts it whole: deleted with its state if it has no host copy
  (childless FULL-less ancestors go too), demoted to host-only if it has one. Mamba pressure
  walks the MAMBA LRU: a device leaf goes the same way - **FULL KV included** -, any other node
  (internal, or locked below) only loses its state, keeping its KV (a MAMBA tombstone).
* Requests (``start_request`` / ``decode`` / ``finish_request``, ``prefill`` for a whole one):
  one tracked state per extend - at the extend's last grid point, or at ``mamba_branching_seqlen``
  when that lies inside the extend (it *replaces* the end state) -, decode tracks at every
  ``mamba_track_interval`` multiple, and the insert is cut at the last tracked length
  (``mamba_last_track_seqlen``): KV past it is freed with the request, not cached.
* ``--mamba-max-states-per-path`` (``mamba_max_states_per_path``, default -1 = unlimited): after
  an insert adds a state, the shallowest eligible states beyond the cap on that path are
  tombstoned (soft: tail, forks, locked states and device leaves are kept).
* ``--enable-int8-mamba-checkpoint``: tree states live in a separate checkpoint pool of
  ``int8_mamba_ckpt_size`` slots (default 2 x the active pool); mamba pressure on the tree is then
  pressure on that pool. Modelled as slot accounting (no int8 bytes); not with HiCache.
* HiCache: ``backup`` copies real bytes device -> host for a node and its unbacked ancestors
  (host space by host eviction: FULL host leaves by LRU, MAMBA by its host LRU); ``load_back``
  allocates fresh device slots (evict_for_alloc) and copies host -> device: FULL for every evicted
  node up from ``best_match_node``, MAMBA only for ``best_match_node``. With
  ``hicache_write_policy="write_through"`` every insert backs up what it touched, and written or
  loaded nodes stay locked until ``check_hicache_events`` (one scheduler tick), as in SGLang;
  without it (the default) backups happen only when ``backup`` is called and hold no lock.
* ``replay_requests``: a workload's hit rate (reused prompt tokens / prompt tokens).

Simplified on purpose: transfers are synchronous copies (no write-back policy, no storage tier,
no async H2D/D2H); a request's own working / ping-pong mamba slots are not modelled (the tree only
sees the state a request donates when it checkpoints), and a checkpoint that finds every state
locked is skipped where SGLang asserts.
"""
from __future__ import annotations

import array
import enum
import hashlib
import itertools
import math
import zlib
from dataclasses import dataclass, field
from typing import Any, Iterator, Optional

import torch

from .memory_pool import DevicePools, MambaSlotAllocator

FLA_CHUNK_SIZE = 64  # sglang.kernels.ops.attention.fla.chunk_delta_h.CHUNK_SIZE
_ANCESTOR_TIME_STEP = 0.00001  # UTC._match_post_processor: parents a hair older than children


class ComponentType(str, enum.Enum):
    FULL = "full"
    MAMBA = "mamba"


@dataclass
class ComponentData:
    value: Optional[torch.Tensor] = None        # device indices
    lock_ref: int = 0
    metadata: dict[str, Any] = field(default_factory=dict)
    host_value: Optional[torch.Tensor] = None   # host indices
    host_lock_ref: int = 0


FULL, MAMBA = ComponentType.FULL, ComponentType.MAMBA
_ids = itertools.count()


class TreeNode:
    def __init__(self, key: tuple[int, ...] = (), parent: Optional["TreeNode"] = None,
                 time: float = 0.0):
        self.id = next(_ids)
        self.key = key
        self.parent = parent
        self.children: dict[tuple[int, ...], TreeNode] = {}
        self.component_data = {FULL: ComponentData(), MAMBA: ComponentData()}
        self.last_access_time = time      # FULL's LRU key (UnifiedTreeNode.last_access_time)
        self.creation_time = time + 1
        self.hit_count = 0                # write-through fires at write_through_threshold
        self.write_through_pending_id: Optional[int] = None  # backed up, not yet acknowledged

    @property
    def evicted(self) -> bool:
        return self.component_data[FULL].value is None

    @property
    def backuped(self) -> bool:
        return self.component_data[FULL].host_value is not None

    def __lt__(self, other: "TreeNode") -> bool:  # UnifiedTreeNode.__lt__
        return self.last_access_time < other.last_access_time

    def __repr__(self) -> str:
        f, m = self.component_data[FULL], self.component_data[MAMBA]
        return (f"TreeNode(id={self.id}, len={len(self.key)}, dev={f.value is not None}, "
                f"host={f.host_value is not None}, mamba={m.value is not None}/{m.host_value is not None})")


class LRUList:
    """An auxiliary component's LRU (UTC ``UnifiedLRUList``): least recent first."""

    def __init__(self, component: ComponentType):
        self.component = component
        self.order: list[TreeNode] = []

    def in_list(self, node: Optional[TreeNode]) -> bool:
        return node is not None and any(n is node for n in self.order)

    def remove_node(self, node: TreeNode) -> None:
        self.order = [n for n in self.order if n is not node]

    def insert_mru(self, node: TreeNode) -> None:
        self.remove_node(node)
        self.order.append(node)

    reset_node_mru = insert_mru

    def get_prev_no_lock(self, node: Optional[TreeNode]) -> Optional[TreeNode]:
        """The next more recent node after ``node`` (None: from the LRU end) whose lock is 0."""
        i = 0 if node is None else next(k for k, n in enumerate(self.order) if n is node) + 1
        for n in self.order[i:]:
            if n.component_data[self.component].lock_ref == 0:
                return n
        return None

    def get_prev_no_host_lock(self, node: Optional[TreeNode]) -> Optional[TreeNode]:
        i = 0 if node is None else next(k for k, n in enumerate(self.order) if n is node) + 1
        for n in self.order[i:]:
            if n.component_data[self.component].host_lock_ref == 0:
                return n
        return None

    def get_lru_no_lock(self) -> Optional[TreeNode]:
        return self.get_prev_no_lock(None)


@dataclass
class MatchResult:
    device_indices: torch.Tensor        # FULL device slots of the device-resident reusable prefix
    device_prefix_len: int              # reusable now (FULL + MAMBA on device)
    host_hit_length: int                # FULL host slots between last_device_node and best_match_node
    full_kv_hit_length: int             # FULL hit, device or host, ignoring MAMBA
    best_match_node: TreeNode           # deepest node with FULL and MAMBA valid (device or host)
    last_device_node: TreeNode          # deepest node with FULL and MAMBA on device
    last_full_node: TreeNode            # end of the FULL walk
    mamba_branching_seqlen: Optional[int]
    mamba_host_hit_length: int = 0      # 1 when best_match_node's state is on host only


@dataclass(frozen=True)
class LockHandle:
    node: TreeNode
    mamba_locked: bool


@dataclass
class EvictResult:
    full_tokens: int = 0
    mamba_slots: int = 0
    host_tokens: int = 0
    host_mamba_slots: int = 0
    evicted_nodes: list[int] = field(default_factory=list)


@dataclass
class LoadBackResult:
    nodes: list[TreeNode]
    tokens: int
    mamba_loaded: bool
    not_restored: tuple[str, ...]


def _prefix_pages(key: tuple[int, ...], other: tuple[int, ...], off: int, page: int) -> int:
    """Length of the common prefix of key and other[off:], in whole pages."""
    n = min(len(key), len(other) - off)
    i = 0
    while i + page <= n and key[i:i + page] == other[off + i:off + i + page]:
        i += page
    return i


class RadixTree:
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
        self.root.component_data[FULL].value = torch.empty(0, dtype=torch.int64)
        self.root.component_data[FULL].lock_ref = 1
        self.root.component_data[MAMBA].lock_ref = 1
        self.lru_lists = {MAMBA: LRUList(MAMBA)}
        self.host_lru_lists = {MAMBA: LRUList(MAMBA)}
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
        """Mark a node used now (FULL's LRU)."""
        self._touch_node(node)

    def page_aligned(self, tokens) -> tuple[int, ...]:
        tokens = tuple(tokens)
        return tokens[: len(tokens) // self.page_size * self.page_size]

    def nodes(self) -> Iterator[TreeNode]:
        stack = [self.root]
        while stack:
            n = stack.pop()
            yield n
            stack.extend(n.children.values())

    def path_to_root(self, node: TreeNode) -> list[TreeNode]:
        out = []
        while node is not None and node is not self.root:
            out.append(node)
            node = node.parent
        return out

    def depth_of(self, node: TreeNode) -> int:
        return sum(len(n.key) for n in self.path_to_root(node))

    def key_of(self, node: TreeNode) -> tuple[int, ...]:
        return tuple(itertools.chain.from_iterable(n.key for n in reversed(self.path_to_root(node))))

    def path_device_indices(self, node: TreeNode) -> torch.Tensor:
        vals = [n.component_data[FULL].value for n in reversed(self.path_to_root(node))]
        return torch.cat(vals) if vals else torch.empty(0, dtype=torch.int64)

    @property
    def mamba_slot_allocator(self) -> MambaSlotAllocator:
        """Where tree states live: the active pool, or the int8 checkpoint pool."""
        return self.mamba_ckpt_allocator or self.pools.mamba_allocator

    def _split(self, child: TreeNode, at: int) -> TreeNode:
        """UTC._split_node: split child at ``at`` tokens (page aligned); return the new upper node.

        FULL value, host value and locks are split / copied; the MAMBA state (device and host)
        stays on the lower node, the upper one is a MAMBA tombstone.
        """
        assert 0 < at < len(child.key) and at % self.page_size == 0
        parent = child.parent
        upper = self._new_node(child.key[:at], parent)
        f, uf = child.component_data[FULL], upper.component_data[FULL]
        uf.lock_ref, uf.host_lock_ref = f.lock_ref, f.host_lock_ref  # FULL locks cover the path
        if f.value is not None:
            uf.value, f.value = f.value[:at].clone(), f.value[at:].clone()
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
        """
        key = self.page_aligned(tokens)
        hicache = self.host is not None
        node, off = self.root, 0
        values: list[torch.Tensor] = []
        full_hit = 0
        best = best_dev = self.root
        best_dev_len = 0

        def update_best(n: TreeNode) -> None:
            nonlocal best, best_dev, best_dev_len
            matched = self._full_valid(n, not hicache) and self._mamba_valid(n, not hicache)
            if matched:
                best = n
            if self._full_valid(n, True) and self._mamba_valid(n, True) and (matched or hicache):
                best_dev, best_dev_len = n, len(values)

        while off < len(key):
            child = node.children.get(key[off: off + self.page_size])
            if child is None:
                break
            if child.evicted and not child.backuped:
                break
            n = _prefix_pages(child.key, key, off, self.page_size)
            full_hit += n
            if n < len(child.key):
                node = self._split(child, n)
                if not node.evicted:
                    values.append(node.component_data[FULL].value)
                update_best(node)
                break
            if not child.evicted:
                values.append(child.component_data[FULL].value)
            node = child
            update_best(node)
            off += n
        if touch:
            self._refresh_mamba_lru_on_match(best)
            t = self._tick()
            n = best
            while n is not None:
                n.last_access_time = t
                t -= _ANCESTOR_TIME_STEP
                n = n.parent
        dev_len = sum(len(v) for v in values[:best_dev_len])
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
        so a session's older states stay cold and are evicted first."""
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
        """
        key = tuple(tokens)
        if len(key) % self.page_size or len(kv_indices) != len(key):
            raise ValueError("insert needs a page-aligned key and one kv index per token")
        stats: dict[str, Any] = {"reused_tokens": 0, "new_tokens": 0, "freed_dup_tokens": 0,
                                 "new_mamba": 0, "freed_dup_mamba": 0, "mamba_exist": False}
        alloc = self.pools.token_to_kv_pool_allocator
        self._touch_node(self.root)
        node, off = self.root, 0
        is_new_leaf = False
        while off < len(key):
            child = node.children.get(key[off: off + self.page_size])
            if child is None:
                new = self._new_node(key[off:], node)
                new.component_data[FULL].value = kv_indices[off:].clone()
                new.component_data[FULL].metadata.update(indexer_on_device=True, loaded_back=False)
                node.children[new.key[: self.page_size]] = new
                stats["new_tokens"] += len(new.key)
                node, off, is_new_leaf = new, len(key), True
                break
            self._touch_node(child)
            n = _prefix_pages(child.key, key, off, self.page_size)
            if n < len(child.key):
                child = self._split(child, n)
            f = child.component_data[FULL]
            if f.value is None:  # evicted but backed up: take the freshly computed slots
                if off < prefix_len:
                    raise ValueError("prefix_len covers a node that is not on device")
                f.value = kv_indices[off: off + n].clone()
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
                m.value = slot
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
        """MambaComponent._evict_excess_path_states (``--mamba-max-states-per-path``)."""
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

    # ------------------------------------------------------------------ locks
    def inc_lock_ref(self, node: TreeNode) -> LockHandle:
        """Lock FULL on node and every ancestor, MAMBA on node only (a tombstone too)."""
        for n in self.path_to_root(node):
            n.component_data[FULL].lock_ref += 1
        locked = node is not self.root
        if locked:
            node.component_data[MAMBA].lock_ref += 1
        return LockHandle(node, locked)

    def dec_lock_ref(self, lock: LockHandle) -> None:
        for n in self.path_to_root(lock.node):
            assert n.component_data[FULL].lock_ref > 0, "unbalanced dec_lock_ref"
            n.component_data[FULL].lock_ref -= 1
        if lock.mamba_locked:
            assert lock.node.component_data[MAMBA].lock_ref > 0, "unbalanced MAMBA dec_lock_ref"
            lock.node.component_data[MAMBA].lock_ref -= 1

    # ------------------------------------------------------------------ sizes
    def full_evictable_size(self) -> int:
        return sum(len(n.component_data[FULL].value) for n in self.nodes() if n is not self.root
                   and n.component_data[FULL].value is not None and n.component_data[FULL].lock_ref == 0)

    def full_protected_size(self) -> int:
        return sum(len(n.component_data[FULL].value) for n in self.nodes() if n is not self.root
                   and n.component_data[FULL].value is not None and n.component_data[FULL].lock_ref > 0)

    def mamba_evictable_size(self) -> int:
        return sum(1 for n in self.nodes() if n is not self.root
                   and n.component_data[MAMBA].value is not None and n.component_data[MAMBA].lock_ref == 0)

    def mamba_protected_size(self) -> int:
        return sum(1 for n in self.nodes() if n is not self.root
                   and n.component_data[MAMBA].value is not None and n.component_data[MAMBA].lock_ref > 0)

    # ------------------------------------------------------------------ eviction
    def _is_device_leaf(self, n: TreeNode) -> bool:
        """UTC._is_device_leaf: FULL on device, no lock on any component, no child with device FULL."""
        if n is self.root or n.evicted:
            return False
        if any(cd.lock_ref > 0 for cd in n.component_data.values()):
            return False
        return all(c.evicted for c in n.children.values())

    def _is_host_leaf(self, n: TreeNode) -> bool:
        if n is self.root or not n.evicted or not n.backuped or n.children:
            return False
        return not any(cd.lock_ref > 0 or cd.host_lock_ref > 0 for cd in n.component_data.values())

    def _free_mamba_device(self, n: TreeNode, res: EvictResult) -> None:
        m = n.component_data[MAMBA]
        if m.value is None:
            return
        assert m.lock_ref == 0, "evicting a locked MAMBA value"
        self.mamba_slot_allocator.free(m.value)
        m.value = None
        res.mamba_slots += 1
        self.lru_lists[MAMBA].remove_node(n)
        if m.host_value is not None:
            self.host_lru_lists[MAMBA].insert_mru(n)

    def _free_host(self, n: TreeNode, res: EvictResult) -> None:
        f, m = n.component_data[FULL], n.component_data[MAMBA]
        if f.host_value is not None and self.host is not None:
            self.host.free_kv(f.host_value)
            res.host_tokens += len(f.host_value)
        if m.host_value is not None and self.host is not None:
            self.host.free_mamba(int(m.host_value[0]))
            res.host_mamba_slots += 1
        f.host_value = m.host_value = None
        self.host_lru_lists[MAMBA].remove_node(n)

    def _remove(self, n: TreeNode, res: EvictResult) -> None:
        del n.parent.children[n.key[: self.page_size]]
        res.evicted_nodes.append(n.id)

    def _delete_tombstone_ancestors(self, cur: TreeNode, res: EvictResult) -> None:
        """UTC._iteratively_delete_tombstone_ancestors."""
        while cur is not self.root and not cur.children:
            if any(cd.lock_ref > 0 or cd.host_lock_ref > 0 for cd in cur.component_data.values()):
                break
            if not cur.evicted:
                break
            self._free_mamba_device(cur, res)
            if cur.backuped:
                break
            self._free_host(cur, res)
            parent = cur.parent
            self._remove(cur, res)
            cur = parent

    def _evict_device_leaf(self, n: TreeNode, res: EvictResult) -> None:
        """UTC.evict_device_leaf: demote a backed-up leaf, delete an unbacked one (state included)."""
        assert self._is_device_leaf(n)
        f = n.component_data[FULL]
        self.pools.token_to_kv_pool_allocator.free(f.value)
        res.full_tokens += len(f.value)
        self._free_mamba_device(n, res)
        f.value = None
        f.metadata["indexer_on_device"] = False
        if n.backuped:  # _demote
            return
        self._free_host(n, res)  # _delete_unbacked_device_leaf: every layer
        parent = n.parent
        self._remove(n, res)
        self._delete_tombstone_ancestors(parent, res)

    def _tombstone_mamba(self, n: TreeNode, res: Optional[EvictResult] = None) -> None:
        """Free only the node's device state; its FULL KV stays (a MAMBA tombstone)."""
        self._free_mamba_device(n, res or EvictResult())

    def _evict_mamba_victim(self, x: TreeNode, res: EvictResult) -> None:
        """MambaComponent._evict_device_next_node: a device leaf is handed to leaf eviction and
        goes whole, FULL KV included; any other node only loses its state."""
        if self._is_device_leaf(x):
            self._evict_device_leaf(x, res)
        else:
            self._tombstone_mamba(x, res)

    def _available(self, ct: ComponentType) -> int:
        """URC._component_available_size: MAMBA is the active pool's, int8 checkpoints or not."""
        if ct is FULL:
            return self.pools.token_to_kv_pool_allocator.available_size()
        return self.pools.mamba_allocator.available_size()

    def _evict(self, num_tokens: int, mamba_num: int,
               targets: Optional[dict[ComponentType, int]] = None) -> EvictResult:
        """URC._evict_components: FULL walk, then MAMBA walk, each until its request is met."""
        res = EvictResult()
        done = {FULL: lambda: res.full_tokens, MAMBA: lambda: res.mamba_slots}

        def target_reached(ct: ComponentType) -> bool:
            return targets is not None and ct in targets and self._available(ct) >= targets[ct]

        for ct, request in ((FULL, num_tokens), (MAMBA, mamba_num)):
            to_target = ct is FULL and request > 0 and targets is not None and FULL in targets
            if target_reached(ct) or (not to_target and done[ct]() >= request):
                continue
            quota = max(request, done[ct]() + self.full_evictable_size()) if to_target else request
            if ct is FULL:
                # FullComponent: heap of device leaves by last_access_time; a parent that
                # becomes a leaf joins the heap
                heap = sorted(n for n in self.nodes() if self._is_device_leaf(n))
                while done[ct]() < quota and heap:
                    x = heap.pop(0)
                    if not self._is_device_leaf(x) or x.parent is None:
                        continue
                    parent = x.parent
                    self._evict_device_leaf(x, res)
                    if target_reached(ct):
                        break
                    if self._is_device_leaf(parent):
                        heap.append(parent)
                        heap.sort()
            else:
                # MambaComponent: walk its own LRU from the cold end; a device leaf is evicted
                # whole (FULL KV too), anything else is tombstoned
                lru = self.lru_lists[MAMBA]
                cursor = lru.get_lru_no_lock()
                while True:
                    if cursor is not None and not lru.in_list(cursor):
                        cursor = lru.get_lru_no_lock()
                    if done[ct]() >= quota or cursor is None:
                        break
                    x = cursor
                    cursor = lru.get_prev_no_lock(x)
                    self._evict_mamba_victim(x, res)
                    if target_reached(ct):
                        break
        self.evicted["tokens"] += res.full_tokens
        self.evicted["mamba"] += res.mamba_slots
        return res

    def evict(self, num_tokens: int = 0, mamba_num: int = 0) -> EvictResult:
        """URC.evict: free at least ``num_tokens`` device token slots and ``mamba_num`` states."""
        return self._evict(num_tokens, mamba_num)

    def evict_for_alloc(self, num_tokens: int = 0, mamba_num: int = 0) -> EvictResult:
        """URC.evict_for_alloc: shortfalls become availability targets (a cascade can meet them)."""
        targets = {}
        if num_tokens > 0:
            targets[FULL] = self._available(FULL) + num_tokens
        if mamba_num > 0:
            targets[MAMBA] = self._available(MAMBA) + mamba_num
        return self._evict(num_tokens, mamba_num, targets)

    def evict_host(self, num_tokens: int = 0, mamba_num: int = 0) -> EvictResult:
        """URC.evict_host for FULL (``num_tokens`` host token slots), then for MAMBA
        (``mamba_num`` host states). Returns everything freed on the host."""
        res = EvictResult()
        if self.host is None:
            return res
        self._evict_host_full(num_tokens, res)
        self._evict_host_mamba(mamba_num, res)
        return res

    def _evict_host_leaf(self, x: TreeNode, res: EvictResult) -> None:
        """UTC._evict_host_leaf: every host layer, delete, then childless FULL-less ancestors."""
        parent = x.parent
        self._free_host(x, res)
        self._remove(x, res)
        self._delete_tombstone_ancestors(parent, res)

    def _evict_host_full(self, num_tokens: int, res: Optional[EvictResult] = None) -> int:
        """FullComponent.drive_host_eviction: host leaves by LRU; returns host tokens freed."""
        res = res if res is not None else EvictResult()
        start = res.host_tokens
        heap = sorted(n for n in self.nodes() if self._is_host_leaf(n))
        while res.host_tokens - start < num_tokens and heap:
            x = heap.pop(0)
            if not self._is_host_leaf(x):
                continue
            parent = x.parent
            self._evict_host_leaf(x, res)
            if self._is_host_leaf(parent):
                heap.append(parent)
                heap.sort()
        return res.host_tokens - start

    def _evict_host_mamba(self, mamba_num: int, res: Optional[EvictResult] = None) -> int:
        """MambaComponent.drive_host_eviction: its host LRU from the cold end; a host leaf goes
        whole, any other node loses only its host state. Returns host states freed."""
        res = res if res is not None else EvictResult()
        start = res.host_mamba_slots
        lru = self.host_lru_lists[MAMBA]
        x = lru.get_prev_no_host_lock(None)
        while res.host_mamba_slots - start < mamba_num and x is not None and lru.in_list(x):
            nxt = lru.get_prev_no_host_lock(x)
            if self._is_host_leaf(x):
                self._evict_host_leaf(x, res)
            else:
                self.host.free_mamba(int(x.component_data[MAMBA].host_value[0]))
                x.component_data[MAMBA].host_value = None
                lru.remove_node(x)
                res.host_mamba_slots += 1
            x = nxt
        return res.host_mamba_slots - start

    def _alloc_tokens(self, n: int, protect: Optional[TreeNode] = None) -> Optional[torch.Tensor]:
        """Page-rounded allocation; on a shortfall evict_for_alloc (allocator.evict_to_free_tokens)."""
        alloc = self.pools.token_to_kv_pool_allocator
        n = -(-n // self.page_size) * self.page_size
        if n == 0:
            return torch.empty(0, dtype=torch.int64)
        if alloc.available_size() < n:
            lock = self.inc_lock_ref(protect) if protect is not None else None
            self.evict_for_alloc(num_tokens=n - alloc.available_size())
            if lock is not None:
                self.dec_lock_ref(lock)
        return alloc.alloc(n)

    def _alloc_mamba(self, protect: Optional[TreeNode] = None) -> Optional[int]:
        """MambaComponent._alloc_mamba_slot: one tree state slot, evict_for_alloc(mamba_num=1) if
        none is free (int8 checkpoints: a checkpoint-pool slot, plain evict on failure)."""
        a = self.mamba_slot_allocator
        out = a.alloc(1)
        if out is None:
            lock = self.inc_lock_ref(protect) if protect is not None else None
            if self.mamba_ckpt_allocator is not None:
                self.evict(mamba_num=1)
            else:
                self.evict_for_alloc(mamba_num=1)
            if lock is not None:
                self.dec_lock_ref(lock)
            out = a.alloc(1)
        return None if out is None else int(out[0])

    def ensure_mamba_capacity(self, needed: int) -> bool:
        """allocation.py ensure_mamba_capacity: evict_for_alloc(mamba_num=shortfall)."""
        avail = self.pools.mamba_allocator.available_size()
        if avail < needed:
            self.evict_for_alloc(mamba_num=needed - avail)
        return self.pools.mamba_allocator.available_size() >= needed

    # ------------------------------------------------------------------ HiCache
    def _inc_hit_count_and_check(self, node: TreeNode) -> bool:
        """UTC._inc_hit_count_and_check: write-through fires once a node is hit enough."""
        if node.evicted or not self.write_through:
            return False
        node.hit_count += 1
        return not node.backuped and node.hit_count >= self.write_through_threshold

    def backup(self, node: TreeNode) -> Optional[int]:
        """Write-through of ``node`` and its ancestors that lack a host copy, top-down
        (UTC._build_backup_kv_action + URC._execute_and_commit_kv_backup).

        Per node: FULL rows go to MLATokenToKVPoolHost (and the INDEXER sidecar where the layout
        has one), a device state without a host copy to MambaPoolHost. Host space is made by
        host eviction (FULL: LRU host leaves; MAMBA: its host LRU). Stops at the first node that
        cannot get host space. Returns host token slots written, or None when it stopped. Under
        ``hicache_write_policy='write_through'`` each written node stays locked until
        ``check_hicache_events`` acknowledges it, as in SGLang.
        """
        if self.host is None:
            raise RuntimeError("no HostPoolGroup attached")
        chain = [node]
        a = node.parent
        while a is not None and a is not self.root and not a.backuped:
            chain.append(a)
            a = a.parent
        written = 0
        for n in reversed(chain):
            f, m = n.component_data[FULL], n.component_data[MAMBA]
            assert f.value is not None, "backing up a node that is not on device"
            dev = f.value[:0] if n.backuped else f.value
            need_mamba = m.value is not None and m.host_value is None
            if len(dev) == 0 and not need_mamba:
                continue
            avail = self.host.kv.allocator.available_size()
            if avail < len(dev) and self._evict_host_full(len(dev) - avail) < len(dev) - avail:
                return None
            hidx = self.host.alloc_kv(len(dev)) if len(dev) else torch.empty(0, dtype=torch.int64)
            if hidx is None:
                return None
            hs = None
            if need_mamba:
                hs = self.host.alloc_mamba()
                if hs is None:
                    self._evict_host_mamba(1)
                    hs = self.host.alloc_mamba()
                if hs is None:
                    if len(hidx):
                        self.host.free_kv(hidx)
                    return None
            if len(dev):
                self.host.backup_kv(hidx, dev)
                f.host_value = hidx
                written += len(hidx)
            if hs is not None:
                self.host.backup_mamba(hs, int(m.value[0]))
                m.host_value = torch.tensor([hs], dtype=torch.int64)
            if self.write_through:  # locked until the write is acknowledged
                n.write_through_pending_id = n.id
                self.ongoing_write_through[n.id] = ([n], self.inc_lock_ref(n))
        return written

    def check_hicache_events(self) -> None:
        """One scheduler tick (URC.check_hicache_events): acknowledge every finished
        write-through and load-back, releasing the locks they held."""
        for nodes, lock in self.ongoing_write_through.values():
            for n in nodes:
                n.write_through_pending_id = None
            self.dec_lock_ref(lock)
        self.ongoing_write_through.clear()
        for lock, host_lock in self.ongoing_load_back:
            self.dec_lock_ref(lock)
            self._release_host_lock(host_lock)
        self.ongoing_load_back.clear()

    def _acquire_host_lock(self, node: TreeNode) -> tuple[TreeNode, bool]:
        """inc_host_lock_ref: FULL host lock on the node if it has a host copy; MAMBA always
        (a host-only state leaves the host LRU while locked)."""
        f, m = node.component_data[FULL], node.component_data[MAMBA]
        full = f.host_value is not None
        if full:
            f.host_lock_ref += 1
        if node is not self.root:
            if m.host_lock_ref == 0 and m.host_value is not None:
                self.host_lru_lists[MAMBA].remove_node(node)
            m.host_lock_ref += 1
        return node, full

    def _release_host_lock(self, handle: tuple[TreeNode, bool]) -> None:
        node, full = handle
        if full:
            node.component_data[FULL].host_lock_ref -= 1
        if node is not self.root:
            m = node.component_data[MAMBA]
            m.host_lock_ref -= 1
            if m.host_lock_ref == 0 and m.value is None and m.host_value is not None:
                if not self.host_lru_lists[MAMBA].in_list(node):
                    self.host_lru_lists[MAMBA].insert_mru(node)

    def load_back(self, tokens) -> Optional[LoadBackResult]:
        """Bring the host-backed part of a prefix back into freshly allocated device slots
        (URC.load_back of the match's best_match_node).

        FULL: every evicted node from best_match_node up (several pages may be stitched);
        MAMBA: only best_match_node's state (one slot). Device space is made by evict_for_alloc.
        Returns None when it cannot be made. ``not_restored`` names what the host never held
        (e.g. the indexer under the article layout): those bytes of the fresh slots are not the
        original ones.
        """
        if self.host is None:
            raise RuntimeError("no HostPoolGroup attached")
        return self.load_back_node(self.match_prefix(tokens).best_match_node)

    def load_back_node(self, best: TreeNode) -> Optional[LoadBackResult]:
        """``load_back`` of a matched node (what the scheduler passes: best_match_node)."""
        host_lock = self._acquire_host_lock(best)
        lock = self.inc_lock_ref(best)

        def give_up(result):
            self.dec_lock_ref(lock)
            self._release_host_lock(host_lock)
            return result

        todo, cur = [], best
        while cur is not self.root and cur.evicted:
            todo.append(cur)
            cur = cur.parent
        todo.reverse()
        m = best.component_data[MAMBA]
        need_mamba = best is not self.root and m.value is None and m.host_value is not None
        total = sum(len(n.key) for n in todo)
        if total < max(1, self.load_back_threshold) and not need_mamba:
            return give_up(LoadBackResult([], 0, False, ()))
        alloc = self.pools.token_to_kv_pool_allocator
        if alloc.available_size() < total:
            self.evict_for_alloc(num_tokens=total - alloc.available_size())
            if alloc.available_size() < total:
                return give_up(None)
        dev = alloc.alloc(total) if total else torch.empty(0, dtype=torch.int64)
        if dev is None:
            return give_up(None)
        slot = None
        if need_mamba:
            a = self.mamba_slot_allocator
            out = a.alloc(1)
            if out is None:  # _evict_mamba_for_device_alloc
                self.evict_for_alloc(mamba_num=1 - a.available_size())
                out = a.alloc(1)
            if out is None:
                if total:
                    alloc.free(dev)
                return give_up(None)
            slot = int(out[0])
        self.dec_lock_ref(lock)
        off = 0
        for n in todo:
            f = n.component_data[FULL]
            d = dev[off: off + len(n.key)]
            off += len(n.key)
            self.host.load_back_kv(f.host_value, d)
            f.value = d
            f.metadata["indexer_on_device"] = self.host.indexer is not None
            f.metadata["loaded_back"] = True
        if slot is not None:
            self.host.load_back_mamba(int(m.host_value[0]), slot)
            m.value = torch.tensor([slot], dtype=torch.int64)
            self.host_lru_lists[MAMBA].remove_node(best)
            self.lru_lists[MAMBA].insert_mru(best)
        if self.write_through:  # locked until the load is acknowledged
            self.ongoing_load_back.append((self.inc_lock_ref(best), host_lock))
        else:
            self._release_host_lock(host_lock)
        missing = tuple(x.what for x in self.host.not_on_host()
                        if not x.what.startswith(("compress tail", "req_to_token")))
        return LoadBackResult(todo, total, slot is not None, missing if todo else ())

    # ------------------------------------------------------------------ accounting
    def device_tokens(self) -> int:
        return sum(len(n.component_data[FULL].value) for n in self.nodes()
                   if n is not self.root and n.component_data[FULL].value is not None)

    def check_invariants(self) -> None:
        """Every device/host slot is owned exactly once: by the tree or by a free list."""
        ps = self.page_size
        alloc = self.pools.token_to_kv_pool_allocator
        pages: list[int] = list(alloc.free_pages)
        mslots: list[int] = list(self.mamba_slot_allocator.free_slots)
        hpages: list[int] = list(self.host.kv.allocator.free_pages) if self.host else []
        hm: list[int] = list(self.host.mamba.allocator.free_pages) if self.host else []
        for n in self.nodes():
            if n is self.root:
                continue
            f, m = n.component_data[FULL], n.component_data[MAMBA]
            assert len(n.key) % ps == 0 and len(n.key) > 0
            assert n.parent.children.get(n.key[:ps]) is n
            if f.value is not None:
                assert len(f.value) == len(n.key)
                assert n.parent is self.root or not n.parent.evicted, "device KV below an evicted node"
                pages += (f.value[::ps] // ps).tolist()
            if f.host_value is not None:
                hpages += (f.host_value[::ps] // ps).tolist()
            if m.value is not None:
                assert f.value is not None, "MAMBA state on device without its FULL KV"
                mslots += m.value.tolist()
            if m.host_value is not None:
                hm += m.host_value.tolist()
            if f.value is None:
                assert f.host_value is not None, "evicted node without a host copy"
        assert sorted(pages) == list(range(1, alloc.num_pages + 1)), "device token pages leaked or shared"
        assert sorted(mslots) == list(range(1, self.mamba_slot_allocator.size + 1)), "mamba slots leaked"
        if self.host:
            assert sorted(hpages) == list(range(self.host.kv.size // ps)), "host pages leaked or shared"
            assert sorted(hm) == list(range(self.host.mamba.size)), "host mamba slots leaked"


# ---------------------------------------------------------------------- synthetic content


def _digest(parts: list[torch.Tensor]) -> tuple[int, int]:
    """Checksum of the bytes of ``parts`` (CRC-32 chained over the parts, plus the byte count)."""
    crc, n = 0, 0
    for p in parts:
        a = p.detach().cpu().contiguous().view(torch.uint8).numpy()
        crc = zlib.crc32(a, crc)
        n += a.nbytes
    return crc, n


class SyntheticContent:
    """Deterministic bytes for a token prefix, standing in for what the model would write.

    The same prefix always produces the same KV rows, index pages and KDA state (as a real model
    would), so a page's bytes can be checked anywhere against a digest of what was written.
    """

    def __init__(self, pools: DevicePools, seed: int = 0):
        self.pools = pools
        self.g = pools.geometry
        self.seed = seed
        # page id -> checksums of (KV rows, their host-covered part, index pages) as written
        self.written: dict[bytes, tuple] = {}
        self.written_mamba: dict[bytes, tuple] = {}  # prefix id -> checksum of the KDA state

    def page_ids(self, tokens: tuple[int, ...]) -> list[bytes]:
        """One id per page: a hash of the whole prefix ending at that page."""
        ps, out = self.g.page_size, []
        h = hashlib.blake2b(str(self.seed).encode(), digest_size=16)
        for i in range(0, len(tokens) // ps * ps, ps):
            h.update(array.array("q", tokens[i:i + ps]).tobytes())
            out.append(h.copy().digest())
        return out

    def _rand(self, pid: bytes, salt: int, nbytes: int) -> torch.Tensor:
        gen = torch.Generator().manual_seed(int.from_bytes(pid[:7], "little") ^ salt)
        n64 = (nbytes + 7) // 8
        return torch.randint(-(2 ** 62), 2 ** 62, (n64,), generator=gen,
                             dtype=torch.int64).view(torch.uint8)[:nbytes]

    def page_bytes(self, pid: bytes) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        g, ps = self.g, self.g.page_size
        kv = self._rand(pid, 1, g.num_full_layers * ps * g.kv_row_bytes).view(g.num_full_layers, ps, -1)
        live = sum(1 for s in g.skip_topk_layers if not s)
        idx = self._rand(pid, 2, live * g.index_page_bytes).view(live, 1, -1)
        return list(kv.unbind(0)), list(idx.unbind(0))

    def mamba_bytes(self, pid: bytes) -> list[torch.Tensor]:
        out = []
        for i, t in enumerate(self.pools.mamba_pool.state_tensors()):
            nbytes = t[:, 0].numel() * t.element_size()
            out.append(self._rand(pid, 3 + i, nbytes))
        return out

    def write_pages(self, tokens: tuple[int, ...], start: int, indices: torch.Tensor) -> None:
        """Write the pages of tokens[start:start+len(indices)] into device slots ``indices``."""
        ps = self.g.page_size
        pids = self.page_ids(tokens)
        hw = self.g.host_kv_row_bytes
        for j in range(len(indices) // ps):
            pid = pids[start // ps + j]
            kv, idx = self.page_bytes(pid)
            slot = indices[j * ps:(j + 1) * ps]
            self.pools.write_token_rows(slot, kv)
            self.pools.write_index_pages(slot, idx)
            self.written[pid] = (_digest(kv), _digest([r[:, :hw] for r in kv]), _digest(idx))

    def write_mamba(self, tokens: tuple[int, ...], seqlen: int, slot: int) -> None:
        pid = self.page_ids(tokens[:seqlen])[-1]
        parts = self.mamba_bytes(pid)
        self.pools.write_mamba_slot(slot, parts)
        self.written_mamba[pid] = _digest(parts)

    # ---- checks: every byte that should be there equals what was written ----
    def check_device_node(self, tree: RadixTree, node: TreeNode) -> int:
        """Compare a device node's bytes with what was written; returns bytes compared.

        A node loaded back from host is compared on what the host holds: the first host-row
        bytes of each KV row (all of it unless the article's 512-wide host row meets a 528 device
        row), and its index pages only where the layout has an INDEXER host entry.
        """
        ps, f = self.g.page_size, node.component_data[FULL]
        key = tree.key_of(node)
        pids = self.page_ids(key)[-(len(node.key) // ps):]
        hw = self.g.host_kv_row_bytes
        loaded = f.metadata.get("loaded_back", False)
        compared = 0
        for j, pid in enumerate(pids):
            want_kv, want_host, want_idx = self.written[pid]
            slot = f.value[j * ps:(j + 1) * ps]
            kv = self.pools.read_token_rows(slot)
            if loaded and hw < kv[0].shape[1]:
                assert _digest([r[:, :hw] for r in kv]) == want_host, \
                    f"loaded-back KV of node {node.id} differs from what was written"
                compared += hw * ps * len(kv)
            else:
                assert _digest(kv) == want_kv, f"device KV of node {node.id} differs from what was written"
                compared += sum(r.numel() for r in kv)
            if f.metadata.get("indexer_on_device", True):
                idx = self.pools.read_index_pages(slot)
                assert _digest(idx) == want_idx, f"index pages of node {node.id} differ from what was written"
                compared += sum(r.numel() for r in idx)
        m = node.component_data[MAMBA]
        if m.value is not None:
            parts = self.pools.read_mamba_slot(int(m.value[0]))
            assert _digest(parts) == self.written_mamba[self.page_ids(key)[-1]], \
                f"mamba state of node {node.id} differs from what was written"
            compared += sum(p.numel() for p in parts)
        return compared

    def check_host_node(self, tree: RadixTree, node: TreeNode) -> int:
        """Compare a node's host copies with what was written, over what the host covers."""
        host, ps, f = tree.host, self.g.page_size, node.component_data[FULL]
        key = tree.key_of(node)
        compared = 0
        if f.host_value is not None:
            pids = self.page_ids(key)[-(len(node.key) // ps):]
            for j, pid in enumerate(pids):
                _, want_host, want_idx = self.written[pid]
                h = f.host_value[j * ps:(j + 1) * ps]
                rows = host.kv.read_rows(h)
                assert _digest(rows) == want_host, f"host KV of node {node.id} differs from what was written"
                compared += sum(r.numel() for r in rows)
                if host.indexer is not None:
                    pages = host.indexer.read_pages(h)
                    assert _digest(pages) == want_idx, f"host index pages of node {node.id} differ"
                    compared += sum(p.numel() for p in pages)
        m = node.component_data[MAMBA]
        if m.host_value is not None:
            parts = host.mamba.read_slot(int(m.host_value[0]))
            assert _digest(parts) == self.written_mamba[self.page_ids(key)[-1]], \
                f"host mamba state of node {node.id} differs from what was written"
            compared += sum(p.numel() for p in parts)
        return compared

    def check_tree(self, tree: RadixTree) -> int:
        """Check every device and host copy in the tree; returns bytes compared."""
        total = 0
        for n in tree.nodes():
            if n is tree.root:
                continue
            if not n.evicted:
                total += self.check_device_node(tree, n)
            total += self.check_host_node(tree, n)
        return total


# ---------------------------------------------------------------------- requests


@dataclass
class Req:
    """What the scheduler keeps for one request around the tree (SGLang's ``Req`` / ``req.kv``
    field names). ``kv`` is the request's req_to_token row: one device slot per position."""
    tokens: list[int]
    kv: torch.Tensor
    lock: LockHandle
    match: MatchResult
    prefix_len: int = 0
    cache_protected_len: int = 0
    cache_inserted_len: int = 0
    mamba_branching_seqlen: Optional[int] = None
    mamba_last_track_seqlen: Optional[int] = None
    mamba_prev_track_seqlen: Optional[int] = None
    committed: int = 0                                 # kv_committed_len
    last_node: Optional[TreeNode] = None
    stats: dict[str, Any] = field(default_factory=dict)  # summed insert stats of its checkpoints
    checkpoints_skipped: int = 0                       # no state slot could be made


def _add_stats(req: Req, stats: dict[str, Any]) -> None:
    for k, v in stats.items():
        if isinstance(v, bool) or not isinstance(v, int):
            req.stats[k] = v
        else:
            req.stats[k] = req.stats.get(k, 0) + v


def load_back_for(tree: RadixTree, tokens) -> int:
    """A host hit before prefill (scheduler init_load_back): load the best match back. Returns
    device tokens gained."""
    if tree.host is None:
        return 0
    r = tree.match_prefix(tokens)
    if not (r.host_hit_length > 0 or r.mamba_host_hit_length > 0 or r.best_match_node.evicted):
        return 0
    ok = tree.load_back_node(r.best_match_node)
    tree.check_hicache_events()  # the scheduler's next tick acknowledges the load
    if ok is None or not ok.nodes and not ok.mamba_loaded:
        return 0
    return tree.match_prefix(tokens).device_prefix_len - r.device_prefix_len


def start_request(tree: RadixTree, tokens, content: Optional["SyntheticContent"] = None) -> Optional[Req]:
    """Admit and prefill a request that goes on decoding; None when token slots cannot be made.

    Scheduler order: match (after a load-back of a host hit), lock the matched prefix, allocate
    the extend's KV (evicting under token pressure), track one KDA state for the extend
    (schedule_batch.py: the extend's last grid point, replaced by ``mamba_branching_seqlen`` when
    that lies inside the extend), then ``checkpoint_kv_cache``: insert the prompt up to that state.
    """
    tokens = list(tokens)
    load_back_for(tree, tokens)
    r = tree.match_prefix(tokens)
    prefix = r.device_prefix_len
    lock = tree.inc_lock_ref(r.last_device_node)
    new = tree._alloc_tokens(len(tokens) - prefix)
    if new is None:
        tree.dec_lock_ref(lock)
        return None
    req = Req(tokens=tokens, kv=torch.cat([tree.path_device_indices(r.last_device_node)[:prefix], new]),
              lock=lock, match=r, prefix_len=prefix, cache_protected_len=prefix,
              mamba_branching_seqlen=r.mamba_branching_seqlen, committed=len(tokens),
              last_node=r.last_device_node)
    _prefill_track(tree, req, prefix, len(tokens))
    _checkpoint(tree, req, up_to=len(tokens), finished=False, content=content)
    req.prefix_len = len(tokens)
    return req


def _prefill_track(tree: RadixTree, req: Req, extend_start: int, extend_end: int) -> None:
    """schedule_batch.py (non-DCP): one tracked state per extend."""
    extend_len = extend_end - extend_start
    grid = tree.mamba_checkpoint_grid
    if extend_len < grid:
        return
    aligned = extend_start + extend_len // grid * grid
    b = req.mamba_branching_seqlen
    if b is not None and extend_start < b < extend_end and (b - extend_start) % tree.mamba_cache_chunk_size == 0:
        aligned = b  # the branching point replaces the end-of-extend state
    req.mamba_last_track_seqlen = aligned


def decode(tree: RadixTree, req: Req, tokens) -> int:
    """Decode ``tokens`` one by one: a KV page when the row is full (evicting under token
    pressure), a tracked state at every ``mamba_track_interval`` multiple. Returns how many were
    decoded (fewer when no page could be made)."""
    done = 0
    for t in tokens:
        if req.committed >= len(req.kv):
            page = tree._alloc_tokens(1)
            if page is None:
                return done
            req.kv = torch.cat([req.kv, page])
        req.tokens.append(int(t))
        req.committed += 1
        done += 1
        if req.committed % tree.mamba_track_interval == 0:  # batch_result_processor.py
            req.mamba_prev_track_seqlen, req.mamba_last_track_seqlen = req.mamba_last_track_seqlen, req.committed
    return done


def finish_request(tree: RadixTree, req: Req, content: Optional["SyntheticContent"] = None) -> None:
    """release_kv_cache: insert up to the last tracked state, free the rest of the row, unlock."""
    _checkpoint(tree, req, up_to=req.committed, finished=True, content=content)
    if len(req.kv) > req.cache_protected_len:
        tree.pools.token_to_kv_pool_allocator.free(req.kv[req.cache_protected_len:])
    tree.dec_lock_ref(req.lock)


def _checkpoint(tree: RadixTree, req: Req, up_to: int, finished: bool,
                content: Optional["SyntheticContent"]) -> None:
    """URC.checkpoint_into_tree with MambaComponent.prepare_for_caching_req: the insert key is cut
    at the tracked length; the state goes on its last node; the request's lock moves there."""
    cache_len = req.mamba_last_track_seqlen or 0
    if finished and cache_len > up_to:  # _select_finished_checkpoint: the latest overshoots
        prev = req.mamba_prev_track_seqlen
        cache_len = prev if prev is not None and prev <= up_to else 0
    if not finished:
        req.mamba_last_track_seqlen = req.mamba_prev_track_seqlen = None
    eff = min(up_to, cache_len)
    if eff <= 0:
        return
    slot = tree._alloc_mamba()
    if slot is None:  # SGLang asserts "Can not alloc mamba cache": every state is locked
        req.checkpoints_skipped += 1
        return
    key = tree.page_aligned(req.tokens[:eff])
    n = len(key)
    cpl = req.cache_protected_len
    if content is not None:
        content.write_pages(key, cpl, req.kv[cpl:n])
        if tree.mamba_ckpt_allocator is None:
            content.write_mamba(key, n, slot)
    stats = tree.insert(key, req.kv[:n].clone(), slot, prefix_len=cpl, inserted_len=req.cache_inserted_len)
    req.cache_inserted_len = max(req.cache_inserted_len, n)
    node = stats["last_node"]
    req.kv[cpl:n] = tree.path_device_indices(node)[cpl:]
    tree.dec_lock_ref(req.lock)
    req.lock = tree.inc_lock_ref(node)
    req.cache_protected_len = n
    req.last_node = node
    _add_stats(req, stats)


def prefill(tree: RadixTree, content: Optional[SyntheticContent], tokens,
            decode_tokens=()) -> Optional[tuple[TreeNode, MatchResult, dict[str, Any]]]:
    """One whole request: ``start_request``, ``decode`` of ``decode_tokens``, ``finish_request``.

    Returns (deepest node it cached - or its match's node when it cached nothing -, the match,
    its summed insert stats), or None when the device pools cannot make room. After a
    branching prefill the request caches only up to ``mamba_branching_seqlen``.
    """
    req = start_request(tree, tokens, content)
    if req is None:
        return None
    if decode_tokens:
        decode(tree, req, decode_tokens)
    finish_request(tree, req, content)
    stats = {"reused_tokens": 0, "new_tokens": 0, "freed_dup_tokens": 0, "new_mamba": 0,
             "freed_dup_mamba": 0, **{k: v for k, v in req.stats.items() if k != "last_node"}}
    return req.last_node, req.match, stats


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
