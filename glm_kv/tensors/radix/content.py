"""Synthetic content: deterministic bytes written into the pools and checked anywhere later.

The same prefix always produces the same KV rows, index pages and KDA state (as a real model
would), so a page's bytes can be checked on device or on host against a digest of what was
written. A check that finds different bytes raises ``ContentMismatch`` naming the node.
"""
from __future__ import annotations

import array
import hashlib
import zlib
from typing import TYPE_CHECKING

import torch

from ..model_pools import DevicePools
from .errors import ContentMismatch
from .nodes import FULL, MAMBA, TreeNode

if TYPE_CHECKING:
    from .tree import RadixTree


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
    def check_device_node(self, tree: "RadixTree", node: TreeNode) -> int:
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
                if _digest([r[:, :hw] for r in kv]) != want_host:
                    raise ContentMismatch(f"loaded-back KV of node {node.id} differs from what was written")
                compared += hw * ps * len(kv)
            else:
                if _digest(kv) != want_kv:
                    raise ContentMismatch(f"device KV of node {node.id} differs from what was written")
                compared += sum(r.numel() for r in kv)
            if f.metadata.get("indexer_on_device", True):
                idx = self.pools.read_index_pages(slot)
                if _digest(idx) != want_idx:
                    raise ContentMismatch(f"index pages of node {node.id} differ from what was written")
                compared += sum(r.numel() for r in idx)
        m = node.component_data[MAMBA]
        if m.value is not None:
            parts = self.pools.read_mamba_slot(int(m.value[0]))
            if _digest(parts) != self.written_mamba[self.page_ids(key)[-1]]:
                raise ContentMismatch(f"mamba state of node {node.id} differs from what was written")
            compared += sum(p.numel() for p in parts)
        return compared

    def check_host_node(self, tree: "RadixTree", node: TreeNode) -> int:
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
                if _digest(rows) != want_host:
                    raise ContentMismatch(f"host KV of node {node.id} differs from what was written")
                compared += sum(r.numel() for r in rows)
                if host.indexer is not None:
                    pages = host.indexer.read_pages(h)
                    if _digest(pages) != want_idx:
                        raise ContentMismatch(f"host index pages of node {node.id} differ")
                    compared += sum(p.numel() for p in pages)
        m = node.component_data[MAMBA]
        if m.host_value is not None:
            parts = host.mamba.read_slot(int(m.host_value[0]))
            if _digest(parts) != self.written_mamba[self.page_ids(key)[-1]]:
                raise ContentMismatch(f"host mamba state of node {node.id} differs from what was written")
            compared += sum(p.numel() for p in parts)
        return compared

    def check_tree(self, tree: "RadixTree") -> int:
        """Check every device and host copy in the tree; returns bytes compared."""
        total = 0
        for n in tree.nodes():
            if n is tree.root:
                continue
            if not n.evicted:
                total += self.check_device_node(tree, n)
            total += self.check_host_node(tree, n)
        return total
