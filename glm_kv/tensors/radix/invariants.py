"""The tree's invariants, recounted from scratch: what tests call after random operations.

Two kinds. Ownership: every device and host slot is owned exactly once, by the tree or by a free
list; every node's key is whole pages and its slots match its key. Bookkeeping: the sizes, leaf
sets, device-child counts and the MAMBA LRU membership the tree keeps incrementally equal a
recount. O(nodes + pool size); raises ``RadixTreeError`` naming the first broken rule.
"""
from __future__ import annotations

from typing import Any

from .errors import RadixTreeError
from .nodes import FULL, MAMBA

RadixTree = Any  # tree.py imports this module: no import back (tests/test_layering.py forbids cycles)


def _require(ok: bool, what: str) -> None:
    if not ok:
        raise RadixTreeError(what)


def check_ownership(tree: RadixTree) -> None:
    """Every device/host slot is owned exactly once: by the tree or by a free list."""
    ps = tree.page_size
    alloc = tree.pools.token_to_kv_pool_allocator
    host = tree.host
    pages: list[int] = list(alloc.free_pages)
    mslots: list[int] = list(tree.mamba_slot_allocator.free_slots)
    hpages: list[int] = list(host.kv.allocator.free_pages) if host else []
    hm: list[int] = list(host.mamba.allocator.free_pages) if host else []
    for n in tree.nodes():
        if n is tree.root:
            continue
        f, m = n.component_data[FULL], n.component_data[MAMBA]
        _require(len(n.key) % ps == 0 and len(n.key) > 0, f"node {n.id}: key of {len(n.key)} tokens")
        _require(n.parent.children.get(n.key[:ps]) is n, f"node {n.id}: not its parent's child")
        if f.value is not None:
            _require(len(f.value) == len(n.key), f"node {n.id}: {len(f.value)} slots for {len(n.key)} tokens")
            _require(n.parent is tree.root or not n.parent.evicted, f"node {n.id}: device KV below an evicted node")
            pages += (f.value[::ps] // ps).tolist()
        if f.host_value is not None:
            hpages += (f.host_value[::ps] // ps).tolist()
        if m.value is not None:
            _require(f.value is not None, f"node {n.id}: MAMBA state on device without its FULL KV")
            mslots += m.value.tolist()
        if m.host_value is not None:
            hm += m.host_value.tolist()
        if f.value is None:
            _require(f.host_value is not None, f"node {n.id}: evicted without a host copy")
    _require(sorted(pages) == list(range(1, alloc.num_pages + 1)), "device token pages leaked or shared")
    _require(sorted(mslots) == list(range(1, tree.mamba_slot_allocator.size + 1)), "mamba slots leaked or shared")
    if host:
        _require(sorted(hpages) == list(range(host.kv.size // ps)), "host pages leaked or shared")
        _require(sorted(hm) == list(range(host.mamba.size)), "host mamba slots leaked or shared")


def check_bookkeeping(tree: RadixTree) -> None:
    """The incrementally kept sizes, leaf sets, child counts and MAMBA LRU equal a recount."""
    size = dict.fromkeys(("full_evictable", "full_protected", "mamba_evictable", "mamba_protected"), 0)
    dev_leaves, host_leaves, states = set(), set(), set()
    for n in tree.nodes():
        if n is tree.root:
            continue
        f, m = n.component_data[FULL], n.component_data[MAMBA]
        dev_children = sum(c.component_data[FULL].value is not None for c in n.children.values())
        _require(n.n_device_children == dev_children,
                 f"node {n.id}: kept {n.n_device_children} device children, counted {dev_children}")
        if f.value is not None:
            size["full_protected" if f.lock_ref else "full_evictable"] += len(f.value)
        if m.value is not None:
            size["mamba_protected" if m.lock_ref else "mamba_evictable"] += 1
            states.add(n)
        locked = any(cd.lock_ref > 0 for cd in n.component_data.values())
        if f.value is not None and not locked and dev_children == 0:
            dev_leaves.add(n)
        host_locked = any(cd.host_lock_ref > 0 for cd in n.component_data.values())
        if f.value is None and f.host_value is not None and not n.children and not locked and not host_locked:
            host_leaves.add(n)
    _require(tree._size == size, f"kept sizes {tree._size} != recount {size}")
    _require(tree.device_leaves.members == dev_leaves,
             f"kept device leaves {sorted(x.id for x in tree.device_leaves.members)} != "
             f"recount {sorted(x.id for x in dev_leaves)}")
    _require(tree.host_leaves.members == host_leaves,
             f"kept host leaves {sorted(x.id for x in tree.host_leaves.members)} != "
             f"recount {sorted(x.id for x in host_leaves)}")
    lru = tree.lru_lists[MAMBA]
    _require(set(lru) == states and len(lru) == len(states), "MAMBA LRU members != nodes with a device state")


def check_invariants(tree: RadixTree) -> None:
    """Both: ownership, then bookkeeping."""
    check_ownership(tree)
    check_bookkeeping(tree)
