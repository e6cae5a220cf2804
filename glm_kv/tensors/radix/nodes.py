"""What the tree is made of: nodes, their per-component data, and what its methods return.

Names are SGLang 0.5.23's (``unified_cache/unified_tree_core.py``: ``UnifiedTreeNode``,
``ComponentData``; ``base_prefix_cache.py``: ``MatchResult``, ``EvictResult``). A node's
``component_data`` holds one ``ComponentData`` per component:

* ``FULL``  - ``value``: device token slots of the node's tokens; ``host_value``: HiCache host slots.
* ``MAMBA`` - ``value``: one device mamba slot holding the KDA state *after* the node's last token
  (a checkpoint); ``host_value``: one MambaPoolHost slot. A node without one is a MAMBA tombstone.

Besides SGLang's fields a node carries what lets the tree keep its bookkeeping incrementally:
``n_device_children`` (children whose FULL KV is on device: a node is a device leaf only when it
is 0) and the intrusive LRU links ``lru_prev`` / ``lru_next`` (one pair per ``LRUList``).
"""
from __future__ import annotations

import enum
import itertools
from dataclasses import dataclass, field
from typing import Any, Optional

import torch


class ComponentType(str, enum.Enum):
    FULL = "full"
    MAMBA = "mamba"


FULL, MAMBA = ComponentType.FULL, ComponentType.MAMBA


@dataclass(slots=True)
class ComponentData:
    value: Optional[torch.Tensor] = None        # device indices
    lock_ref: int = 0
    metadata: dict[str, Any] = field(default_factory=dict)
    host_value: Optional[torch.Tensor] = None   # host indices
    host_lock_ref: int = 0


_ids = itertools.count()  # node ids, one per node ever made (the book shows them)


class TreeNode:
    __slots__ = ("id", "key", "parent", "children", "component_data", "last_access_time",
                 "creation_time", "hit_count", "write_through_pending_id", "n_device_children",
                 "lru_prev", "lru_next")

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
        self.n_device_children = 0        # children with FULL on device (device-leaf test, O(1))
        self.lru_prev: list[Optional[Any]] = [None, None]  # [device MAMBA LRU, host MAMBA LRU]
        self.lru_next: list[Optional[Any]] = [None, None]

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
