"""HiCache on the tree: backup (device -> host), load-back (host -> device), host locks.

* ``backup`` copies real bytes device -> host for a node and its unbacked ancestors (host space
  by host eviction: FULL host leaves by LRU, MAMBA by its host LRU).
* ``load_back`` allocates fresh device slots (``evict_for_alloc``) and copies host -> device: FULL
  for every evicted node up from ``best_match_node``, MAMBA only for ``best_match_node``.
* With ``hicache_write_policy="write_through"`` every insert backs up what it touched, and written
  or loaded nodes stay locked until ``check_hicache_events`` (one scheduler tick), as in SGLang;
  without it (the default) backups happen only when ``backup`` is called and hold no lock.

Simplified on purpose: transfers are synchronous copies (no write-back policy, no storage tier,
no async H2D/D2H).
"""
from __future__ import annotations

from typing import Optional

import torch

from .errors import RadixTreeError
from .nodes import FULL, MAMBA, LoadBackResult, TreeNode


class HiCache:
    """The host-tier half of ``RadixTree`` (a base class of it)."""

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
        ``check_hicache_events`` acknowledges it, as in SGLang. O(path written + bytes copied).
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
            if f.value is None:
                raise RadixTreeError(f"backing up node {n.id}, which is not on device")
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
                self._refresh_leaf(n)
            if hs is not None:
                self.host.backup_mamba(hs, int(m.value[0]))
                m.host_value = torch.tensor([hs], dtype=torch.int64)
            if self.write_through:  # locked until the write is acknowledged
                n.write_through_pending_id = n.id
                self.ongoing_write_through[n.id] = ([n], self.inc_lock_ref(n))
        return written

    def check_hicache_events(self) -> None:
        """One scheduler tick (URC.check_hicache_events): acknowledge every finished
        write-through and load-back, releasing the locks they held. O(pending)."""
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
        (a host-only state leaves the host LRU while locked). O(1)."""
        f, m = node.component_data[FULL], node.component_data[MAMBA]
        full = f.host_value is not None
        if full:
            f.host_lock_ref += 1
        if node is not self.root:
            if m.host_lock_ref == 0 and m.host_value is not None:
                self.host_lru_lists[MAMBA].remove_node(node)
            m.host_lock_ref += 1
        self._refresh_leaf(node)
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
        self._refresh_leaf(node)

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
        """``load_back`` of a matched node (what the scheduler passes: best_match_node).
        O(depth + bytes copied)."""
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
            self._set_full_value(n, d)
            f.metadata["indexer_on_device"] = self.host.indexer is not None
            f.metadata["loaded_back"] = True
        if slot is not None:
            self.host.load_back_mamba(int(m.host_value[0]), slot)
            self._set_mamba_value(best, torch.tensor([slot], dtype=torch.int64))
            self.host_lru_lists[MAMBA].remove_node(best)
            self.lru_lists[MAMBA].insert_mru(best)
        if self.write_through:  # locked until the load is acknowledged
            self.ongoing_load_back.append((self.inc_lock_ref(best), host_lock))
        else:
            self._release_host_lock(host_lock)
        missing = tuple(x.what for x in self.host.not_on_host()
                        if not x.what.startswith(("compress tail", "req_to_token")))
        return LoadBackResult(todo, total, slot is not None, missing if todo else ())
