"""A small, readable RadixTree in the spirit of SGLang's unified radix cache, over the real pools.

The tree stores *indices*, never KV bytes (article section 4). Each node is keyed by a
page-aligned run of token ids and carries one ``ComponentData`` per component:

* ``FULL``  - ``value``: device token slots of the node's tokens (from the paged
  ``token_to_kv_pool_allocator``); ``host_value``: HiCache host slots (page_first, page_size tokens).
* ``MAMBA`` - ``value``: one device mamba slot holding the KDA state *after* the node's last token
  (a checkpoint); ``host_value``: one MambaPoolHost slot. Only nodes that end on the checkpoint
  grid carry one.

Rules modelled (names from ``unified_cache/components``):

* ``match_prefix`` walks while the FULL component is valid (on device, or backed up on host).
  ``best_match_node`` is the deepest node where FULL *and* MAMBA are valid: the request reuses the
  prefix up to there. ``full_kv_hit_length`` counts the whole FULL walk. When FULL reaches deeper
  than the nearest MAMBA checkpoint, ``mamba_branching_seqlen`` = the last checkpoint-grid-aligned
  position inside the FULL hit (if it lies beyond the MAMBA boundary): KDA is recomputed from the
  shallower state up to there and a new state is tracked at that point (article section 5.6,
  ``components/mamba.py`` ``finalize_match_result_in_tree_core``).
* Locks: ``inc_lock_ref`` locks FULL on the node and every ancestor, MAMBA on the node only (a
  match consumes only best_match_node's state). Locked values are never evicted.
* ``evict``: FULL by LRU over device leaves (leaves first; a node whose children still hold device
  KV is not a leaf). Evicting FULL frees the node's MAMBA slot too. A node with a host copy stays
  in the tree as "evicted"; one without is deleted. MAMBA alone can be evicted from any unlocked
  node, LRU, leaving its FULL KV in place.
* ``backup`` (write-through) copies real bytes device -> host for the node and its ancestors and
  sets ``host_value``; ``load_back`` allocates fresh device slots and copies host -> device: FULL
  for every evicted node on the path, MAMBA only for ``best_match_node``.

Simplified on purpose: transfers are synchronous (no write-back policy, no async H2D/D2H, no
host_lock_ref held across a scheduler step); the per-request working slots (the 5 per request of
extra_buffer) belong to requests, not to the tree, and are not modelled here; ``prefill`` stands
in for a request's whole life (match, load back, compute, insert). Deleting a device-evicted node
without a host copy also drops its evicted descendants' host copies, which nothing can reach.
"""
from __future__ import annotations

import array
import enum
import hashlib
import heapq
import itertools
import math
import zlib
from dataclasses import dataclass, field
from typing import Any, Iterator, Optional

import torch

from .memory_pool import DevicePools

FLA_CHUNK_SIZE = 64  # sglang.kernels.ops.attention.fla.chunk_delta_h.CHUNK_SIZE


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
_clock = itertools.count(1)


class TreeNode:
    def __init__(self, key: tuple[int, ...] = (), parent: Optional["TreeNode"] = None):
        self.id = next(_ids)
        self.key = key
        self.parent = parent
        self.children: dict[tuple[int, ...], TreeNode] = {}
        self.component_data = {FULL: ComponentData(), MAMBA: ComponentData()}
        self.last_access_time = next(_clock)

    @property
    def evicted(self) -> bool:
        return self.component_data[FULL].value is None

    @property
    def backuped(self) -> bool:
        return self.component_data[FULL].host_value is not None

    def touch(self) -> None:
        self.last_access_time = next(_clock)

    def __repr__(self) -> str:
        f, m = self.component_data[FULL], self.component_data[MAMBA]
        return (f"TreeNode(id={self.id}, len={len(self.key)}, dev={f.value is not None}, "
                f"host={f.host_value is not None}, mamba={m.value is not None}/{m.host_value is not None})")


@dataclass
class MatchResult:
    device_indices: torch.Tensor        # FULL device slots of the device-resident reusable prefix
    device_prefix_len: int              # reusable now (FULL + MAMBA on device)
    host_hit_length: int                # reusable after load_back (beyond device_prefix_len)
    full_kv_hit_length: int             # FULL hit, device or host, ignoring MAMBA
    best_match_node: TreeNode           # deepest node with FULL and MAMBA valid (device or host)
    last_device_node: TreeNode          # deepest node with FULL and MAMBA on device
    last_full_node: TreeNode            # end of the FULL walk
    mamba_branching_seqlen: Optional[int]


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
                 mamba_track_interval: Optional[int] = None):
        self.pools = pools
        self.host = host
        self.page_size = pools.geometry.page_size
        # mamba_cache_chunk_size = max(FLA chunk, page_size); the checkpoint grid is its lcm with
        # the page the tree allocates on (runtime_context.mamba_checkpoint_grid).
        chunk = max(FLA_CHUNK_SIZE, self.page_size)
        self.mamba_checkpoint_grid = math.lcm(chunk, self.page_size)
        self.mamba_track_interval = mamba_track_interval or self.mamba_checkpoint_grid
        if self.mamba_track_interval % self.mamba_checkpoint_grid:
            raise ValueError(f"mamba_track_interval {self.mamba_track_interval} must be a multiple of "
                             f"the checkpoint grid {self.mamba_checkpoint_grid}")
        self.root = TreeNode()
        self.root.component_data[FULL].value = torch.empty(0, dtype=torch.int64)
        self.root.component_data[FULL].lock_ref = 1
        self.root.component_data[MAMBA].lock_ref = 1

    # ------------------------------------------------------------------ helpers
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

    def _split(self, child: TreeNode, at: int) -> TreeNode:
        """Split child at ``at`` tokens (page aligned); return the new upper node."""
        assert 0 < at < len(child.key) and at % self.page_size == 0
        parent = child.parent
        upper = TreeNode(child.key[:at], parent)
        upper.last_access_time = child.last_access_time
        f, uf = child.component_data[FULL], upper.component_data[FULL]
        if f.value is not None:
            uf.value, f.value = f.value[:at].clone(), f.value[at:].clone()
        if f.host_value is not None:
            uf.host_value, f.host_value = f.host_value[:at].clone(), f.host_value[at:].clone()
        uf.lock_ref, uf.host_lock_ref = f.lock_ref, f.host_lock_ref  # FULL locks cover the path
        uf.metadata = dict(f.metadata)
        # the MAMBA checkpoint belongs to the end of the old key, i.e. stays on the lower node
        del parent.children[child.key[: self.page_size]]
        child.key = child.key[at:]
        child.parent = upper
        upper.children[child.key[: self.page_size]] = child
        parent.children[upper.key[: self.page_size]] = upper
        return upper

    def _mamba_valid(self, node: TreeNode, device_only: bool) -> bool:
        m = node.component_data[MAMBA]
        return m.value is not None or (not device_only and m.host_value is not None)

    # ------------------------------------------------------------------ match
    def match_prefix(self, tokens, *, touch: bool = True) -> MatchResult:
        key = self.page_aligned(tokens)
        node, off = self.root, 0
        values: list[torch.Tensor] = []
        full_hit = 0
        best = best_dev = self.root
        best_dev_len = 0
        dev_ok = True  # every FULL on the path so far is on device
        last = self.root
        while off < len(key):
            child = node.children.get(key[off: off + self.page_size])
            if child is None:
                break
            if child.evicted and not child.backuped:
                break
            n = _prefix_pages(child.key, key, off, self.page_size)
            if n < len(child.key):
                child = self._split(child, n)
            full_hit += n
            off += n
            node = last = child
            if child.evicted:
                dev_ok = False
            else:
                values.append(child.component_data[FULL].value)
            if self._mamba_valid(child, device_only=False):
                best = child
            if dev_ok and self._mamba_valid(child, device_only=True):
                best_dev, best_dev_len = child, len(values)
        dev_len = sum(len(v) for v in values[:best_dev_len])
        best_depth = self.depth_of(best)
        grid = self.mamba_checkpoint_grid
        aligned = full_hit // grid * grid
        branching = aligned if aligned > best_depth else None
        if touch:
            for n in self.path_to_root(last):
                n.touch()
        idx = torch.cat(values[:best_dev_len]) if best_dev_len else torch.empty(0, dtype=torch.int64)
        return MatchResult(idx, dev_len, best_depth - dev_len, full_hit, best, best_dev, last, branching)

    # ------------------------------------------------------------------ insert
    def insert(self, tokens, kv_indices: torch.Tensor,
               mamba_states: Optional[dict[int, int]] = None, prefix_len: int = 0) -> dict[str, int]:
        """Insert a page-aligned sequence whose KV sits in ``kv_indices`` (one slot per token).

        ``prefix_len``: the leading tokens whose slots the request took from the tree (they are the
        tree's own slots). Beyond it, slots of tokens the tree already holds on device are
        duplicates and go back to the allocator (SGLang's cache_finished_req does the same); an
        evicted, host-backed node on the path takes the fresh slots instead.
        ``mamba_states`` maps a sequence length (a multiple of the checkpoint grid) to the device
        mamba slot holding the KDA state after that many tokens; a checkpoint the tree already has
        frees the offered slot. Returns counts of what was reused, added and freed.
        """
        key = tuple(tokens)
        if len(key) % self.page_size or len(kv_indices) != len(key):
            raise ValueError("insert needs a page-aligned key and one kv index per token")
        mamba_states = dict(mamba_states or {})
        for s in mamba_states:
            if s % self.mamba_checkpoint_grid or not 0 < s <= len(key):
                raise ValueError(f"mamba checkpoint at {s} is not on the grid {self.mamba_checkpoint_grid}")
        stats = {"reused_tokens": 0, "new_tokens": 0, "freed_dup_tokens": 0,
                 "new_mamba": 0, "freed_dup_mamba": 0}
        alloc = self.pools.token_to_kv_pool_allocator
        node, off = self.root, 0
        while off < len(key):
            child = node.children.get(key[off: off + self.page_size])
            if child is None:
                new = TreeNode(key[off:], node)
                new.component_data[FULL].value = kv_indices[off:].clone()
                new.component_data[FULL].metadata.update(indexer_on_device=True, loaded_back=False)
                node.children[new.key[: self.page_size]] = new
                stats["new_tokens"] += len(new.key)
                break
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
                own = max(0, min(prefix_len - off, n))
                if own and not torch.equal(f.value[:own], kv_indices[off: off + own]):
                    raise ValueError("prefix_len slots are not the tree's own slots")
                if n > own:
                    alloc.free(kv_indices[off + own: off + n])
                    stats["freed_dup_tokens"] += n - own
                stats["reused_tokens"] += n
            child.touch()
            node, off = child, off + n
        for s in sorted(mamba_states):
            slot = mamba_states[s]
            target = self._node_ending_at(key, s)
            m = target.component_data[MAMBA]
            if m.value is None:
                m.value = torch.tensor([slot], dtype=torch.int64)
                stats["new_mamba"] += 1
            else:
                self.pools.mamba_allocator.free(torch.tensor([slot]))
                stats["freed_dup_mamba"] += 1
            target.touch()
        return stats

    def _node_ending_at(self, key: tuple[int, ...], length: int) -> TreeNode:
        node, off = self.root, 0
        while off < length:
            child = node.children[key[off: off + self.page_size]]
            if off + len(child.key) > length:
                child = self._split(child, length - off)
            node, off = child, off + len(child.key)
        return node

    # ------------------------------------------------------------------ locks
    def inc_lock_ref(self, node: TreeNode) -> "LockHandle":
        """Lock FULL on node and every ancestor, MAMBA on node only (if it has a device state).

        Returns the handle ``dec_lock_ref`` needs: it remembers whether MAMBA was locked, so a
        state that appears later is never unlocked by mistake (SGLang's ``to_dec_params``).
        """
        for n in self.path_to_root(node):
            n.component_data[FULL].lock_ref += 1
        mamba = node is not self.root and node.component_data[MAMBA].value is not None
        if mamba:
            node.component_data[MAMBA].lock_ref += 1
        return LockHandle(node, mamba)

    def dec_lock_ref(self, lock: "LockHandle") -> None:
        for n in self.path_to_root(lock.node):
            assert n.component_data[FULL].lock_ref > 0, "unbalanced dec_lock_ref"
            n.component_data[FULL].lock_ref -= 1
        if lock.mamba_locked:
            assert lock.node.component_data[MAMBA].lock_ref > 0, "unbalanced MAMBA dec_lock_ref"
            lock.node.component_data[MAMBA].lock_ref -= 1

    # ------------------------------------------------------------------ eviction
    def _is_device_leaf(self, n: TreeNode) -> bool:
        return (n is not self.root and not n.evicted
                and all(c.evicted for c in n.children.values()))

    def _free_mamba_device(self, n: TreeNode) -> int:
        m = n.component_data[MAMBA]
        if m.value is None:
            return 0
        assert m.lock_ref == 0, "evicting a locked MAMBA value"
        self.pools.mamba_allocator.free(m.value)
        m.value = None
        return 1

    def _delete_subtree(self, n: TreeNode, res: EvictResult) -> None:
        """Remove n (device-evicted) and its evicted descendants, freeing their host copies."""
        for c in list(n.children.values()):
            self._delete_subtree(c, res)
        f, m = n.component_data[FULL], n.component_data[MAMBA]
        assert f.value is None and m.value is None and f.lock_ref == 0, "deleting a live node"
        assert f.host_lock_ref == 0 and m.host_lock_ref == 0, "deleting a host-locked node"
        if f.host_value is not None and self.host is not None:
            self.host.free_kv(f.host_value)
            res.host_tokens += len(f.host_value)
        if m.host_value is not None and self.host is not None:
            self.host.free_mamba(int(m.host_value[0]))
            res.host_mamba_slots += 1
        f.host_value = m.host_value = None
        del n.parent.children[n.key[: self.page_size]]
        res.evicted_nodes.append(n.id)

    def evict(self, num_tokens: int = 0, mamba_num: int = 0) -> EvictResult:
        """Free at least ``num_tokens`` device token slots and ``mamba_num`` mamba slots, LRU."""
        res = EvictResult()
        alloc = self.pools.token_to_kv_pool_allocator
        heap = [(n.last_access_time, n.id, n) for n in self.nodes()
                if self._is_device_leaf(n) and n.component_data[FULL].lock_ref == 0]
        heapq.heapify(heap)
        while res.full_tokens < num_tokens and heap:
            _, _, n = heapq.heappop(heap)
            if not self._is_device_leaf(n) or n.component_data[FULL].lock_ref:
                continue
            f = n.component_data[FULL]
            alloc.free(f.value)
            res.full_tokens += len(f.value)
            f.value = None
            f.metadata["indexer_on_device"] = False
            res.mamba_slots += self._free_mamba_device(n)
            parent = n.parent
            if not n.backuped:
                self._delete_subtree(n, res)
            if (self._is_device_leaf(parent) and parent.component_data[FULL].lock_ref == 0):
                heapq.heappush(heap, (parent.last_access_time, parent.id, parent))
        if res.mamba_slots < mamba_num:
            cands = sorted((n for n in self.nodes() if n is not self.root
                            and n.component_data[MAMBA].value is not None
                            and n.component_data[MAMBA].lock_ref == 0),
                           key=lambda n: n.last_access_time)
            for n in cands:
                if res.mamba_slots >= mamba_num:
                    break
                res.mamba_slots += self._free_mamba_device(n)
        return res

    def evict_host(self, num_tokens: int = 0, mamba_num: int = 0) -> EvictResult:
        """Drop host copies: evicted leaves first (LRU); then MAMBA host copies of any node."""
        res = EvictResult()
        if self.host is None:
            return res
        while res.host_tokens < num_tokens:
            cands = [n for n in self.nodes() if n is not self.root and n.evicted and not n.children
                     and n.component_data[FULL].host_lock_ref == 0
                     and n.component_data[MAMBA].host_lock_ref == 0]
            if not cands:
                break
            self._delete_subtree(min(cands, key=lambda n: n.last_access_time), res)
        if res.host_mamba_slots < mamba_num:
            cands = sorted((n for n in self.nodes() if n.component_data[MAMBA].host_value is not None
                            and n.component_data[MAMBA].host_lock_ref == 0),
                           key=lambda n: n.last_access_time)
            for n in cands:
                if res.host_mamba_slots >= mamba_num:
                    break
                self.host.free_mamba(int(n.component_data[MAMBA].host_value[0]))
                n.component_data[MAMBA].host_value = None
                res.host_mamba_slots += 1
        return res

    def _alloc_tokens(self, n: int, protect: Optional[TreeNode] = None) -> Optional[torch.Tensor]:
        alloc = self.pools.token_to_kv_pool_allocator
        out = alloc.alloc(n)
        if out is None:
            lock = self.inc_lock_ref(protect) if protect is not None else None
            self.evict(num_tokens=n - alloc.available_size())
            if lock is not None:
                self.dec_lock_ref(lock)
            out = alloc.alloc(n)
        return out

    def _alloc_mamba(self, protect: Optional[TreeNode] = None) -> Optional[int]:
        a = self.pools.mamba_allocator
        out = a.alloc(1)
        if out is None:
            lock = self.inc_lock_ref(protect) if protect is not None else None
            self.evict(mamba_num=1)
            if lock is not None:
                self.dec_lock_ref(lock)
            out = a.alloc(1)
        return None if out is None else int(out[0])

    # ------------------------------------------------------------------ HiCache
    def backup(self, node: TreeNode) -> Optional[int]:
        """Write-through: copy device bytes to host for node and its ancestors lacking a host copy.

        FULL rows go to MLATokenToKVPoolHost (and the INDEXER sidecar where the layout has one);
        MAMBA states to MambaPoolHost. Host space is made by evicting host copies (LRU) when
        needed. Returns host token slots written, or None when the host pool stays full.
        """
        if self.host is None:
            raise RuntimeError("no HostPoolGroup attached")
        written = 0
        self._protect_path_host(node, +1)
        try:
            for n in reversed(self.path_to_root(node)):
                f, m = n.component_data[FULL], n.component_data[MAMBA]
                if f.host_value is None and f.value is not None:
                    hidx = self.host.alloc_kv(len(f.value))
                    if hidx is None:
                        self.evict_host(num_tokens=len(f.value) - self.host.kv.allocator.available_size())
                        hidx = self.host.alloc_kv(len(f.value))
                    if hidx is None:
                        return None
                    self.host.backup_kv(hidx, f.value)
                    f.host_value = hidx
                    written += len(hidx)
                if m.host_value is None and m.value is not None:
                    hs = self.host.alloc_mamba()
                    if hs is None:
                        self.evict_host(mamba_num=1)
                        hs = self.host.alloc_mamba()
                    if hs is None:
                        return None
                    self.host.backup_mamba(hs, int(m.value[0]))
                    m.host_value = torch.tensor([hs], dtype=torch.int64)
        finally:
            self._protect_path_host(node, -1)
        return written

    def _protect_path_host(self, node: TreeNode, delta: int) -> None:
        for n in self.path_to_root(node):
            n.component_data[FULL].host_lock_ref += delta
            n.component_data[MAMBA].host_lock_ref += delta

    def load_back(self, tokens) -> Optional[LoadBackResult]:
        """Bring the host-backed part of a prefix back into freshly allocated device slots.

        FULL: every evicted node on the path to best_match_node (several pages may be stitched);
        MAMBA: only best_match_node's state (one slot). Returns None when device space cannot be
        made. ``not_restored`` names what the host never held (e.g. the indexer under the article
        layout): those bytes of the fresh slots are not the original ones.
        """
        if self.host is None:
            raise RuntimeError("no HostPoolGroup attached")
        r = self.match_prefix(tokens)
        best = r.best_match_node
        path = list(reversed(self.path_to_root(best)))
        todo = [n for n in path if n.evicted]
        need_mamba = best is not self.root and best.component_data[MAMBA].value is None
        if not todo and not need_mamba:
            return LoadBackResult([], 0, False, ())
        # device-resident part of the path (prefix-closed): lock it so eviction cannot reach it
        dev_anchor = self.root
        for n in path:
            if n.evicted:
                break
            dev_anchor = n
        self._protect_path_host(best, +1)
        lock = self.inc_lock_ref(dev_anchor)
        try:
            total = sum(len(n.key) for n in todo)
            dev = self._alloc_tokens(total) if total else torch.empty(0, dtype=torch.int64)
            if dev is None:
                return None
            slot = None
            if need_mamba:
                slot = self._alloc_mamba()
                if slot is None:
                    self.pools.token_to_kv_pool_allocator.free(dev)
                    return None
            off = 0
            for n in todo:
                f = n.component_data[FULL]
                d = dev[off: off + len(n.key)]
                off += len(n.key)
                self.host.load_back_kv(f.host_value, d)
                f.value = d
                f.metadata["indexer_on_device"] = self.host.indexer is not None
                f.metadata["loaded_back"] = True
                n.touch()
            if slot is not None:
                m = best.component_data[MAMBA]
                self.host.load_back_mamba(int(m.host_value[0]), slot)
                m.value = torch.tensor([slot], dtype=torch.int64)
            missing = tuple(x.what for x in self.host.not_on_host()
                            if not x.what.startswith(("compress tail", "req_to_token")))
            return LoadBackResult(todo, total, slot is not None, missing if todo else ())
        finally:
            self.dec_lock_ref(lock)
            self._protect_path_host(best, -1)

    # ------------------------------------------------------------------ accounting
    def device_tokens(self) -> int:
        return sum(len(n.component_data[FULL].value) for n in self.nodes()
                   if n is not self.root and n.component_data[FULL].value is not None)

    def check_invariants(self) -> None:
        """Every device/host slot is owned exactly once: by the tree or by a free list."""
        ps = self.page_size
        alloc = self.pools.token_to_kv_pool_allocator
        pages: list[int] = list(alloc.free_pages)
        mslots: list[int] = list(self.pools.mamba_allocator.free_slots)
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
        assert sorted(mslots) == list(range(1, self.pools.mamba_allocator.size + 1)), "mamba slots leaked"
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


def prefill(tree: RadixTree, content: SyntheticContent,
            tokens) -> Optional[tuple[TreeNode, MatchResult, dict[str, int]]]:
    """Model one request end to end: match, load back, compute the suffix, insert.

    The request reuses the prefix up to its best MAMBA match (loading host-backed parts back
    first), writes the bytes of every token past it into freshly allocated slots, and
    checkpoints its KDA state at ``mamba_branching_seqlen`` (when FULL hit deeper than MAMBA) and at
    the last ``mamba_track_interval`` multiple. Returns (deepest node, match, insert stats), or
    None when the device pools cannot make room.
    """
    key = tree.page_aligned(tokens)
    if not key:
        return None
    r = tree.match_prefix(key)
    if r.host_hit_length:
        if tree.load_back(key) is None:
            return None
        r = tree.match_prefix(key)
    reuse = r.device_prefix_len
    anchor = tree.inc_lock_ref(r.last_device_node)
    states: dict[int, int] = {}
    try:
        new = tree._alloc_tokens(len(key) - reuse, protect=None)
        if new is None:
            return None
        content.write_pages(key, reuse, new)
        iv = tree.mamba_track_interval
        points = set()
        last_track = len(key) // iv * iv
        if last_track > reuse:
            points.add(last_track)
        if r.mamba_branching_seqlen is not None and r.mamba_branching_seqlen > reuse:
            points.add(r.mamba_branching_seqlen)
        for s in sorted(points):
            slot = tree._alloc_mamba()
            if slot is None:
                break
            content.write_mamba(key, s, slot)
            states[s] = slot
        stats = tree.insert(key, torch.cat([r.device_indices, new]), states, prefix_len=reuse)
    finally:
        tree.dec_lock_ref(anchor)
    return tree._node_ending_at(key, len(key)), r, stats
