"""Eviction: device leaves under token pressure, the MAMBA LRU under state pressure, host leaves.

* ``_evict`` (URC ``_evict_components``): FULL first, then MAMBA, each until its request is met
  (a cascade counts). Token pressure pops the LRU *device leaf* (FULL on device, unlocked, no
  child with device FULL) and evicts it whole: deleted with its state if it has no host copy
  (childless FULL-less ancestors go too), demoted to host-only if it has one. Mamba pressure
  walks the MAMBA LRU: a device leaf goes the same way - **FULL KV included** -, any other node
  (internal, or locked below) only loses its state, keeping its KV (a MAMBA tombstone).
* ``evict_for_alloc`` turns shortfalls into availability targets; ``_alloc_tokens`` /
  ``_alloc_mamba`` / ``ensure_mamba_capacity`` are the allocation paths that call it.
* Host eviction (``evict_host``): FULL host leaves by LRU, then MAMBA's host LRU.

Cost: the leaves come from the kept leaf sets (``lru.LeafHeap``), the states from the intrusive
MAMBA lists, so one eviction is O(k log L) for k nodes evicted out of L leaves (plus, like
SGLang's walk, the locked entries it skips) - never a scan of the tree.
"""
from __future__ import annotations

from typing import Optional

import torch

from .errors import RadixTreeError
from .nodes import FULL, MAMBA, ComponentType, EvictResult, TreeNode


class Eviction:
    """The eviction half of ``RadixTree`` (a base class of it)."""

    def _free_mamba_device(self, n: TreeNode, res: EvictResult) -> None:
        """Free a node's device state (it joins the host LRU if it has a host copy). O(1)."""
        m = n.component_data[MAMBA]
        if m.value is None:
            return
        if m.lock_ref:
            raise RadixTreeError(f"evicting the locked MAMBA state of node {n.id}")
        self.mamba_slot_allocator.free(m.value)
        self._clear_mamba_value(n)
        res.mamba_slots += 1
        self.lru_lists[MAMBA].remove_node(n)
        if m.host_value is not None:
            self.host_lru_lists[MAMBA].insert_mru(n)

    def _free_host(self, n: TreeNode, res: EvictResult) -> None:
        """Free every host copy of a node. O(1) + the host allocator's free."""
        f, m = n.component_data[FULL], n.component_data[MAMBA]
        if f.host_value is not None and self.host is not None:
            self.host.free_kv(f.host_value)
            res.host_tokens += len(n.key)
        if m.host_value is not None and self.host is not None:
            self.host.free_mamba(int(m.host_value[0]))
            res.host_mamba_slots += 1
        f.host_value = m.host_value = None
        self.host_lru_lists[MAMBA].remove_node(n)
        self._refresh_leaf(n)

    def _delete_tombstone_ancestors(self, cur: TreeNode, res: EvictResult) -> None:
        """UTC._iteratively_delete_tombstone_ancestors. O(nodes deleted + 1)."""
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
        """UTC.evict_device_leaf: demote a backed-up leaf, delete an unbacked one (state included).
        O(1) + the allocators' frees."""
        if not self._is_device_leaf(n):
            raise RadixTreeError(f"node {n.id} is not a device leaf")
        f = n.component_data[FULL]
        self.pools.token_to_kv_pool_allocator.free(f.value)
        res.full_tokens += len(n.key)
        self._free_mamba_device(n, res)
        self._clear_full_value(n)
        f.metadata["indexer_on_device"] = False
        if n.backuped:  # _demote
            return
        self._free_host(n, res)  # _delete_unbacked_device_leaf: every layer
        parent = n.parent
        self._remove(n, res)
        self._delete_tombstone_ancestors(parent, res)

    def _tombstone_mamba(self, n: TreeNode, res: Optional[EvictResult] = None) -> None:
        """Free only the node's device state; its FULL KV stays (a MAMBA tombstone). O(1)."""
        self._free_mamba_device(n, res or EvictResult())

    def _evict_mamba_victim(self, x: TreeNode, res: EvictResult) -> None:
        """MambaComponent._evict_device_next_node: a device leaf is handed to leaf eviction and
        goes whole, FULL KV included; any other node only loses its state. O(1)."""
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
        """URC._evict_components: FULL walk, then MAMBA walk, each until its request is met.
        O(k log L) for k leaves evicted of L, plus the states the MAMBA walk visits."""
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
                # FullComponent: device leaves by last_access_time; a parent that becomes a
                # leaf joins them (the kept set does that as the leaf goes)
                while done[ct]() < quota:
                    x = self.device_leaves.pop_lru()
                    if x is None:
                        break
                    self._evict_device_leaf(x, res)
                    if target_reached(ct):
                        break
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
        """FullComponent.drive_host_eviction: host leaves by LRU; returns host tokens freed.
        O(k log L) for k host leaves evicted of L."""
        res = res if res is not None else EvictResult()
        start = res.host_tokens
        while res.host_tokens - start < num_tokens:
            x = self.host_leaves.pop_lru()
            if x is None:
                break
            self._evict_host_leaf(x, res)
        return res.host_tokens - start

    def _evict_host_mamba(self, mamba_num: int, res: Optional[EvictResult] = None) -> int:
        """MambaComponent.drive_host_eviction: its host LRU from the cold end; a host leaf goes
        whole, any other node loses only its host state. Returns host states freed.
        O(states visited)."""
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
