"""The two orders eviction walks: MAMBA's LRU lists, and FULL's evictable leaves by last use.

* ``LRUList`` - SGLang's ``UnifiedLRUList`` (``unified_tree_core.py``): an intrusive doubly-linked
  list through the nodes (``TreeNode.lru_prev`` / ``lru_next``, one pair per list), least recent
  at the head. Insert, move to MRU, remove and membership are O(1); a walk skipping locked
  nodes costs what it skips, as SGLang's ``get_prev_no_lock`` does.
* ``LeafHeap`` - SGLang's ``evictable_device_leaves`` / ``evictable_host_leaves`` sets, kept as
  the tree changes, plus their order by ``last_access_time``. SGLang heapifies the whole set at
  the start of every eviction (O(leaves)); here the heap persists and is repaired lazily: an
  entry whose node left the set is dropped when it surfaces, and one whose node was used since
  is pushed back with the node's new time. This is exact because a node's ``last_access_time``
  never decreases, so a stale entry always surfaces before the node's true position.
"""
from __future__ import annotations

import heapq
from typing import Iterator, Optional

from .nodes import ComponentType, TreeNode


class _End:
    """A list's head or tail sentinel."""
    __slots__ = ("lru_prev", "lru_next")

    def __init__(self):
        self.lru_prev: list = [None, None]
        self.lru_next: list = [None, None]


class LRUList:
    """An auxiliary component's LRU (UTC ``UnifiedLRUList``): least recent first.

    ``slot`` picks the node's link pair: 0 for the device list, 1 for the host list.
    """

    def __init__(self, component: ComponentType, slot: int = 0):
        self.component = component
        self.slot = slot
        self.head, self.tail = _End(), _End()  # head: LRU end, tail: MRU end
        self.head.lru_next[slot] = self.tail
        self.tail.lru_prev[slot] = self.head
        self._len = 0

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[TreeNode]:
        """Least recent first. O(n)."""
        s, x = self.slot, self.head.lru_next[self.slot]
        while x is not self.tail:
            yield x
            x = x.lru_next[s]

    @property
    def order(self) -> list[TreeNode]:
        """The nodes, least recent first (a copy). O(n)."""
        return list(self)

    def in_list(self, node: Optional[TreeNode]) -> bool:
        """O(1)."""
        return node is not None and node.lru_next[self.slot] is not None

    def remove_node(self, node: TreeNode) -> None:
        """Unlink ``node``; a node not in the list is left alone. O(1)."""
        s = self.slot
        nxt = node.lru_next[s]
        if nxt is None:
            return
        prv = node.lru_prev[s]
        prv.lru_next[s] = nxt
        nxt.lru_prev[s] = prv
        node.lru_prev[s] = node.lru_next[s] = None
        self._len -= 1

    def insert_mru(self, node: TreeNode) -> None:
        """Put ``node`` at the most recent end (moving it if it is already in). O(1)."""
        self.remove_node(node)
        s, last = self.slot, self.tail.lru_prev[self.slot]
        node.lru_prev[s], node.lru_next[s] = last, self.tail
        last.lru_next[s] = node
        self.tail.lru_prev[s] = node
        self._len += 1

    reset_node_mru = insert_mru

    def _next_unlocked(self, node: Optional[TreeNode], host: bool) -> Optional[TreeNode]:
        s, ct = self.slot, self.component
        x = self.head.lru_next[s] if node is None else node.lru_next[s]
        while x is not self.tail:
            cd = x.component_data[ct]
            if (cd.host_lock_ref if host else cd.lock_ref) == 0:
                return x
            x = x.lru_next[s]
        return None

    def get_prev_no_lock(self, node: Optional[TreeNode]) -> Optional[TreeNode]:
        """The next more recent node after ``node`` (None: from the LRU end) whose lock is 0.
        O(1 + locked nodes skipped)."""
        return self._next_unlocked(node, host=False)

    def get_prev_no_host_lock(self, node: Optional[TreeNode]) -> Optional[TreeNode]:
        """As ``get_prev_no_lock`` for the host lock. O(1 + host-locked nodes skipped)."""
        return self._next_unlocked(node, host=True)

    def get_lru_no_lock(self) -> Optional[TreeNode]:
        return self._next_unlocked(None, host=False)


class LeafHeap:
    """A set of evictable leaves (``members``) and their order by ``last_access_time``."""

    def __init__(self):
        self.members: set[TreeNode] = set()
        self._heap: list[tuple[float, int, TreeNode]] = []

    def __contains__(self, node: TreeNode) -> bool:
        return node in self.members

    def __len__(self) -> int:
        return len(self.members)

    def add(self, node: TreeNode) -> None:
        """O(log n) amortised (O(1) when already a member)."""
        if node not in self.members:
            self.members.add(node)
            self._push(node)

    def discard(self, node: TreeNode) -> None:
        """O(1): its heap entries go stale and are dropped when they surface."""
        self.members.discard(node)

    def _push(self, node: TreeNode) -> None:
        heapq.heappush(self._heap, (node.last_access_time, node.id, node))
        if len(self._heap) > 2 * len(self.members) + 64:  # mostly stale: rebuild, O(n) per n pushes
            self._heap = [(n.last_access_time, n.id, n) for n in self.members]
            heapq.heapify(self._heap)

    def pop_lru(self) -> Optional[TreeNode]:
        """The member used least recently, its entry taken off the heap (it stays a member until
        the caller evicts it). O(log n) amortised over the stale entries it drops."""
        heap = self._heap
        while heap:
            t, _, node = heapq.heappop(heap)
            if node not in self.members:
                continue
            if t != node.last_access_time:  # used since: back in at its new time
                heapq.heappush(heap, (node.last_access_time, node.id, node))
                continue
            return node
        return None
