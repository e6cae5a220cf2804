"""A request's life around the tree, as SGLang 0.5.23's scheduler drives it.

* ``start_request`` / ``decode`` / ``finish_request`` (``prefill`` for a whole one): one tracked
  state per extend - at the extend's last grid point, or at ``mamba_branching_seqlen`` when that
  lies inside the extend (it *replaces* the end state) -, decode tracks at every
  ``mamba_track_interval`` multiple, and the insert is cut at the last tracked length
  (``mamba_last_track_seqlen``): KV past it is freed with the request, not cached.
* ``load_back_for``: a host hit before prefill (scheduler ``init_load_back``).

Field names are SGLang's ``Req`` / ``req.kv`` ones. A request's own working / ping-pong mamba
slots are not modelled (the tree only sees the state a request donates when it checkpoints), and
a checkpoint that finds every state locked is skipped where SGLang asserts.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import torch

from .content import SyntheticContent
from .nodes import FULL, MAMBA, LockHandle, MatchResult, TreeNode  # noqa: F401  (FULL, MAMBA: re-exported)
from .tree import RadixTree


@dataclass
class Req:
    """What the scheduler keeps for one request around the tree (SGLang's ``Req`` / ``req.kv``
    field names). ``kv`` is the request's req_to_token row: one device slot per position;
    ``allocated`` is its length, kept as an int so decode never asks the tensor."""
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
    allocated: int = 0                                 # len(kv)


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


def start_request(tree: RadixTree, tokens, content: Optional[SyntheticContent] = None) -> Optional[Req]:
    """Admit and prefill a request that goes on decoding; None when token slots cannot be made.

    Scheduler order: match (after a load-back of a host hit), lock the matched prefix, allocate
    the extend's KV (evicting under token pressure), track one KDA state for the extend
    (schedule_batch.py: the extend's last grid point, replaced by ``mamba_branching_seqlen`` when
    that lies inside the extend), then ``checkpoint_kv_cache``: insert the prompt up to that state.
    O(len(tokens) + depth) plus what eviction costs.
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
    ps = tree.page_size
    req = Req(tokens=tokens, kv=torch.cat([tree.path_device_indices(r.last_device_node)[:prefix], new]),
              lock=lock, match=r, prefix_len=prefix, cache_protected_len=prefix,
              mamba_branching_seqlen=r.mamba_branching_seqlen, committed=len(tokens),
              last_node=r.last_device_node, allocated=prefix + -(-(len(tokens) - prefix) // ps) * ps)
    _prefill_track(tree, req, prefix, len(tokens))
    _checkpoint(tree, req, up_to=len(tokens), finished=False, content=content)
    req.prefix_len = len(tokens)
    return req


def _prefill_track(tree: RadixTree, req: Req, extend_start: int, extend_end: int) -> None:
    """schedule_batch.py (non-DCP): one tracked state per extend. O(1)."""
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
    """Decode ``tokens``: a KV page when the row is full (evicting under token pressure), a
    tracked state at every ``mamba_track_interval`` multiple (batch_result_processor.py). Returns
    how many were decoded (fewer when no page could be made).

    Token by token in effect, a page at a time in fact: each step takes every token the row's
    free slots hold and moves the track lengths past the multiples it crossed. O(len(tokens))
    list work, one allocation (tensor call) per page, no tensor call per token.
    """
    toks = tokens if isinstance(tokens, (list, tuple)) else list(tokens)
    n, done = len(toks), 0
    ps, interval = tree.page_size, tree.mamba_track_interval
    while done < n:
        if req.committed >= req.allocated:
            page = tree._alloc_tokens(1)
            if page is None:
                return done
            req.kv = torch.cat([req.kv, page])
            req.allocated += ps
        k = min(n - done, req.allocated - req.committed)
        start = req.committed
        req.tokens.extend(map(int, toks[done:done + k]))
        req.committed += k
        done += k
        last = req.committed // interval * interval
        if last > start:  # crossed one or more multiples: the latest two are the track pair
            crossed_two = last - interval > start
            req.mamba_prev_track_seqlen = last - interval if crossed_two else req.mamba_last_track_seqlen
            req.mamba_last_track_seqlen = last
    return done


def finish_request(tree: RadixTree, req: Req, content: Optional[SyntheticContent] = None) -> None:
    """release_kv_cache: insert up to the last tracked state, free the rest of the row, unlock."""
    _checkpoint(tree, req, up_to=req.committed, finished=True, content=content)
    if req.allocated > req.cache_protected_len:
        tree.pools.token_to_kv_pool_allocator.free(req.kv[req.cache_protected_len:])
    tree.dec_lock_ref(req.lock)


def _checkpoint(tree: RadixTree, req: Req, up_to: int, finished: bool,
                content: Optional[SyntheticContent]) -> None:
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
