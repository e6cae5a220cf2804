"""What the tree keeps as it changes, so no operation has to scan it.

SGLang's ``UnifiedTreeCore`` keeps ``component_evictable_size_`` / ``component_protected_size_``
per component and the sets ``evictable_device_leaves`` / ``evictable_host_leaves``, updating them
wherever a value, a lock or a child changes (``_update_evictable_leaf_sets``,
``FullComponent.acquire_component_lock`` / ``release_component_lock``). Here every such change goes
through the helpers below, each O(1) per node it touches:

* sizes - FULL in tokens, MAMBA in states; a value counts as protected while its component's
  ``lock_ref`` is above 0 on that node, evictable otherwise (the root never counts);
* device leaf - FULL on device, no ``lock_ref`` on any component, no child with FULL on device
  (``TreeNode.n_device_children == 0``);
* host leaf - FULL only on host, no child, no ``lock_ref`` or ``host_lock_ref`` on any component.

``invariants.check_invariants`` recounts all of it from the tree and raises on a difference.
"""
from __future__ import annotations

from typing import Any

import torch

from .errors import RadixTreeError
from .nodes import FULL, MAMBA, LockHandle, TreeNode


class Bookkeeping:
    """Sizes, leaf sets and locks of a ``RadixTree`` (a base class of it)."""

    def _refresh_leaf(self, n: TreeNode) -> None:
        """UTC._update_evictable_leaf_sets: the device-leaf test (FULL on device, no lock on any
        component, no child with device FULL) and the host-leaf test, O(1) each."""
        if n is self.root:
            return
        f, m = n.component_data[FULL], n.component_data[MAMBA]
        unlocked = f.lock_ref == 0 and m.lock_ref == 0
        if f.value is not None:
            self.host_leaves.discard(n)
            if unlocked and n.n_device_children == 0:
                self.device_leaves.add(n)
            else:
                self.device_leaves.discard(n)
            return
        self.device_leaves.discard(n)
        if (unlocked and f.host_value is not None and not n.children
                and f.host_lock_ref == 0 and m.host_lock_ref == 0):
            self.host_leaves.add(n)
        else:
            self.host_leaves.discard(n)

    def _is_device_leaf(self, n: TreeNode) -> bool:
        """UTC._is_device_leaf, read from the kept set. O(1)."""
        return n in self.device_leaves

    def _is_host_leaf(self, n: TreeNode) -> bool:
        """UTC._is_host_leaf: FULL only on host, no child, no lock of either kind. O(1)."""
        return n in self.host_leaves

    def _set_full_value(self, n: TreeNode, value: torch.Tensor) -> None:
        """Give an evicted (or new) node its device slots. O(1)."""
        f = n.component_data[FULL]
        if f.value is not None:
            raise RadixTreeError(f"node {n.id} already holds FULL device slots")
        f.value = value
        self._size["full_protected" if f.lock_ref else "full_evictable"] += len(n.key)
        n.parent.n_device_children += 1
        self._refresh_leaf(n)
        self._refresh_leaf(n.parent)

    def _clear_full_value(self, n: TreeNode) -> None:
        """Drop a node's device slots (the caller frees them). O(1)."""
        f = n.component_data[FULL]
        f.value = None
        self._size["full_protected" if f.lock_ref else "full_evictable"] -= len(n.key)
        n.parent.n_device_children -= 1
        self._refresh_leaf(n)
        self._refresh_leaf(n.parent)

    def _set_mamba_value(self, n: TreeNode, value: torch.Tensor) -> None:
        m = n.component_data[MAMBA]
        m.value = value
        self._size["mamba_protected" if m.lock_ref else "mamba_evictable"] += 1

    def _clear_mamba_value(self, n: TreeNode) -> None:
        m = n.component_data[MAMBA]
        m.value = None
        self._size["mamba_protected" if m.lock_ref else "mamba_evictable"] -= 1

    def _add_child(self, parent: TreeNode, child: TreeNode) -> None:
        parent.children[child.key[: self.page_size]] = child
        if child.component_data[FULL].value is not None:
            parent.n_device_children += 1
        self._refresh_leaf(parent)

    def _remove(self, n: TreeNode, res: Any) -> None:
        """Detach ``n`` from its parent (it leaves both leaf sets). O(1)."""
        parent = n.parent
        del parent.children[n.key[: self.page_size]]
        if n.component_data[FULL].value is not None:
            parent.n_device_children -= 1
        self.device_leaves.discard(n)
        self.host_leaves.discard(n)
        res.evicted_nodes.append(n.id)
        self._refresh_leaf(parent)

    # ------------------------------------------------------------------ locks
    def inc_lock_ref(self, node: TreeNode) -> LockHandle:
        """Lock FULL on node and every ancestor, MAMBA on node only (a tombstone too). O(depth)."""
        size = self._size
        for n in self.path_to_root(node):
            f = n.component_data[FULL]
            if f.lock_ref == 0 and f.value is not None:
                size["full_evictable"] -= len(n.key)
                size["full_protected"] += len(n.key)
            f.lock_ref += 1
            self.device_leaves.discard(n)
            self.host_leaves.discard(n)
        locked = node is not self.root
        if locked:
            m = node.component_data[MAMBA]
            if m.lock_ref == 0 and m.value is not None:
                size["mamba_evictable"] -= 1
                size["mamba_protected"] += 1
            m.lock_ref += 1
        return LockHandle(node, locked)

    def dec_lock_ref(self, lock: LockHandle) -> None:
        """Undo one ``inc_lock_ref``. O(depth). Raises ``RadixTreeError`` when unbalanced."""
        size = self._size
        path = self.path_to_root(lock.node)
        for n in path:
            f = n.component_data[FULL]
            if f.lock_ref <= 0:
                raise RadixTreeError(f"unbalanced dec_lock_ref: FULL lock of node {n.id} is 0")
            f.lock_ref -= 1
            if f.lock_ref == 0 and f.value is not None:
                size["full_protected"] -= len(n.key)
                size["full_evictable"] += len(n.key)
        if lock.mamba_locked:
            m = lock.node.component_data[MAMBA]
            if m.lock_ref <= 0:
                raise RadixTreeError(f"unbalanced MAMBA dec_lock_ref on node {lock.node.id}")
            m.lock_ref -= 1
            if m.lock_ref == 0 and m.value is not None:
                size["mamba_protected"] -= 1
                size["mamba_evictable"] += 1
        for n in path:
            self._refresh_leaf(n)

    # ------------------------------------------------------------------ sizes (O(1) reads)
    def full_evictable_size(self) -> int:
        return self._size["full_evictable"]

    def full_protected_size(self) -> int:
        return self._size["full_protected"]

    def mamba_evictable_size(self) -> int:
        return self._size["mamba_evictable"]

    def mamba_protected_size(self) -> int:
        return self._size["mamba_protected"]

    def device_tokens(self) -> int:
        """Tokens whose FULL KV the tree holds on device."""
        return self._size["full_evictable"] + self._size["full_protected"]
