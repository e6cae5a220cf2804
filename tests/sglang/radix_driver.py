"""Drive SGLang 0.5.23's own hybrid radix cache for GLM-5.3-Flash on a CPU, with tiny pools.

Runs inside .venv-sglang (tests/sglang/requirements.txt; importing the cache needs `openai` and
`partial_json_parser` too). Used by test_radix_differential.py, which runs the same operations on
`glm_kv.tensors.radix.RadixTree` and compares what a user can observe.

What is SGLang's and what is ours
---------------------------------
SGLang's, unpatched: server-argument resolution for the model (page 256, strategy
extra_buffer, track interval 256, mamba chunk 256), `HybridReqToTokenPool` + `MambaPool` +
`MambaSlotAllocator`, `HybridLinearKVPool` (DSA) + `PagedTokenToKVPoolAllocator`, all built by
`KVCacheConfigurator` on device="cpu" at small sizes; `UnifiedRadixCache` with components
(FULL, MAMBA) and the pure-Python `UnifiedTreeCore` (`tree_core_backend="python"`, chosen so
the tree can be walked for observation; the Rust core gives the same results apart from node
ids). Every tree decision (match, split, insert, dedup frees, lock, eviction under token and
under mamba pressure, cascade, tombstones, LRU) is SGLang's code.

Ours (the scheduler/model-runner part, which needs a real `Req` and a forward pass): the
request bookkeeping `_Req` below replays, field for field, what the scheduler does around
the cache for one request (wheel file:line in each method's docstring):
  * `start`  = init_next_round_input (common.py:224-270) + ensure_mamba_capacity
               (allocation.py:298) + KV alloc with evict_to_free_tokens (allocator/base.py:155)
               + the prefill mamba-track decision (schedule_batch.py:3166-3232)
               + checkpoint_kv_cache -> checkpoint_into_tree (unified_radix_cache.py:1164-1336)
               for a request that goes on decoding.
  * `decode` = decode KV alloc + the decode track boundary (batch_result_processor.py:1548-1566:
               mamba_last_track_seqlen = committed len at every mamba_track_grid multiple).
  * `finish` = release_kv_cache (common.py:400-441): checkpoint_into_tree for a finished req
               (mamba.py:582-646 picks the slot), free the row past cache_protected_len, unlock,
               free the request's other mamba slots (mamba.py:684-727).
A request's own mamba slots (1 working + `mamba_initial_tracking_slots` ping-pong = 3 here)
are real allocations from SGLang's MambaSlotAllocator when `request_slots=True`;
with `request_slots=False` (the default: what glm_kv's RadixTree models) only the donated
checkpoint slot is allocated (through
`MambaComponent._alloc_mamba_slot`, the same evict-on-failure path).

Also ours: `_instrument` wraps `cache._evict` to sum SGLang's own EvictResult (direct `evict`
and `evict_for_alloc` under token or mamba pressure; the path-cap tombstones do not pass through
it); where every state slot is locked SGLang asserts "Can not alloc mamba cache" (a real
scheduler's admission avoids that state) - the driver skips that checkpoint and counts it in
`evicted["checkpoint_skipped"]`, as glm_kv's request model skips it.

Observation (`observe()`): every node of the tree with its absolute span, FULL device/host,
MAMBA device/host, lock refs; free counts of the token pool and the mamba pool (and host pools);
tree evictable/protected sizes; the eviction totals.

HiCache (`hicache=True`): SGLang's own init_hicache (HybridCacheController, MLA/DSA-indexer/Mamba
host pools), write-through, `direct` io backend, `page_first_direct` layout (MambaPoolHost
rejects layer_first). cpu_workarounds W8 supplies torch versions of the three sgl-kernel direct
copy ops.
Ops: `tick` (check_hicache_events: acks write-through), `load_back(tokens)`, `evict_host`.
The default `kernel` io backend / `page_first` layout need CUDA kernels: not covered.
"""
from __future__ import annotations

import contextlib
import json
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

HERE = Path(__file__).resolve().parent
MAIN = HERE.parents[1]
sys.path.insert(0, str(HERE))

from cpu_workarounds import (  # noqa: E402
    GPU_FACTS, FakeGpu, cpu_as_gpu, install_direct_io_ops, quiet_sglang_logs,
)


def _config() -> dict:
    return json.loads((MAIN / "glm_kv/inputs/data/glm-5.3-flash.json").read_text())


def _model_dir(config: dict) -> str:
    d = Path(tempfile.mkdtemp(prefix="glm-kv-sglang-model-"))
    (d / "config.json").write_text(json.dumps({k: v for k, v in config.items() if not k.startswith("_")}))
    return str(d)


@dataclass
class _Req:
    rid: int
    tokens: list
    kv: "object"  # torch.int64 tensor, one slot per allocated position (page-granular)
    prefix_len: int = 0  # req.prefix_len (device match, then extend_end)
    cache_protected_len: int = 0
    cache_inserted_len: int = 0
    lock: object = None  # TreeLock
    branching: Optional[int] = None  # req.mamba_branching_seqlen
    last_track: Optional[int] = None  # req.kv.mamba_last_track_seqlen
    prev_track: Optional[int] = None  # req.kv.mamba_prev_track_seqlen
    working_slot: object = None  # req.kv.mamba_pool_idx (tensor[1]) or None
    track_slots: list = field(default_factory=list)  # ping-pong buffer, [keep, other]
    committed: int = 0  # kv_committed_len


class SGLangRadix:
    """SGLang 0.5.23 UnifiedRadixCache(FULL, MAMBA) for GLM-5.3-Flash on CPU, small pools."""

    def __init__(self, *, token_pages: int = 16, mamba_slots: int = 8, max_reqs: int = 4,
                 request_slots: bool = False, mamba_max_states_per_path: int = -1,
                 hicache: bool = False, hicache_ratio: float = 2.0, gpu: str = "H200",
                 server_args: Optional[dict] = None, config_path: Optional[str] = None):
        quiet_sglang_logs()
        self._stack = contextlib.ExitStack()
        self._stack.enter_context(cpu_as_gpu(FakeGpu(**GPU_FACTS[gpu])))
        import torch

        from sglang.srt.arg_groups.overrides import resolved_view
        from sglang.srt.configs.model_config import ModelConfig
        from sglang.srt.mem_cache.cache_init_params import CacheInitParams
        from sglang.srt.mem_cache.kv_cache_configurator import KVCacheConfigurator, _PoolSizes
        from sglang.srt.mem_cache.unified_cache.components import ComponentType
        from sglang.srt.mem_cache.unified_radix_cache import UnifiedRadixCache
        from sglang.srt.model_executor.model_runner_components.layer_setup import ModelLayerInfo
        from sglang.srt.model_executor.model_runner_components.spec_aux_hidden_state import (
            SpecAuxHiddenStateConfig,
        )
        from sglang.srt.runtime_context import (
            get_context, get_exec, get_parallel, mamba_cache_chunk_size, mamba_checkpoint_grid,
            mamba_track_grid,
        )
        from sglang.srt.server_args import ServerArgs
        from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

        self.torch = torch
        self.CT = ComponentType
        kw = dict(server_args or {})
        if mamba_max_states_per_path != -1:
            kw["mamba_max_states_per_path"] = mamba_max_states_per_path
        if hicache:
            kw.update(enable_hierarchical_cache=True, hicache_io_backend="direct",
                      hicache_mem_layout="page_first_direct", hicache_write_policy="write_through",
                      hicache_ratio=hicache_ratio)
        config = json.loads(Path(config_path).read_text()) if config_path else _config()
        sa = ServerArgs(model_path=_model_dir(config), device="cuda", **kw)
        sa.resolve_once()
        v = resolved_view(sa)
        ctx = get_context()
        ctx.set_server_args(sa)
        self.server_args, self.view = sa, v
        par = get_parallel()
        mc = ModelConfig.from_server_args(sa)
        mc.context_len = max(8192, token_pages * v.page_size)  # req_to_token row length (W6)
        nl = mc.num_hidden_layers
        kv_dtype = {"bfloat16": torch.bfloat16, "fp8_e4m3": torch.float8_e4m3fn}[v.kv_cache_dtype]
        kvc = KVCacheConfigurator(
            device="cpu", gpu_id=0, attn_dp_size=par.attn_dp_size, pp_size=1, pp_group=None,
            model=None, model_config=mc, server_args=sa, kv_cache_dtype=kv_dtype,
            kv_cache_dtype_str=v.kv_cache_dtype, model_dtype=torch.bfloat16,
            page_size=v.page_size, sliding_window_size=None,
            spec_algorithm=SpeculativeAlgorithm.from_string(v.speculative_algorithm),
            is_draft_worker=False, post_capture_kv_active=False,
            spec_aux_config=SpecAuxHiddenStateConfig(eagle_draft_num_layers=None),
            is_hybrid_swa=False, is_hybrid_swa_compress=False, use_mla_backend=True,
            layer_info=ModelLayerInfo(start_layer=0, end_layer=nl, num_effective_layers=nl),
            forward_stream=None, req_to_token_pool=None, token_to_kv_pool_allocator=None,
            memory_pool_config=None,
        )
        ctx.override("radix driver: small pools", max_mamba_cache_size=mamba_slots)
        self.req_pool = kvc._build_req_to_token_pool(max_num_reqs=max_reqs)
        sizes = _PoolSizes(
            max_total_num_tokens=token_pages * v.page_size, max_running_requests=max_reqs,
            full_max_total_num_tokens=None, swa_max_total_num_tokens=None,
            c4_max_total_num_tokens=0, c128_max_total_num_tokens=0, c4_state_pool_size=0,
            c128_state_pool_size=0, c4_state_dtype=None, c128_state_dtype=None,
        )
        self.kv_pool = kvc._build_token_to_kv_pool(sizes=sizes, is_dsa_model=True,
                                                   is_dsv4_model=False, req_to_token_pool=self.req_pool)
        self.allocator = kvc._build_token_to_kv_pool_allocator(
            sizes=sizes, token_to_kv_pool=self.kv_pool, is_dsv4_model=False,
            req_to_token_pool=self.req_pool, token_to_kv_pool_allocator=None)
        self.mamba_allocator = self.req_pool.mamba_allocator
        self.page = v.page_size
        self.params = CacheInitParams(
            disable=False, req_to_token_pool=self.req_pool,
            token_to_kv_pool_allocator=self.allocator, page_size=v.page_size,
            enable_mamba_extra_buffer=get_exec().mamba.enable_mamba_extra_buffer,
            enable_mamba_extra_buffer_lazy=get_exec().mamba.enable_mamba_extra_buffer_lazy,
            tree_components=(ComponentType.FULL, ComponentType.MAMBA),
            tree_core_backend="python",
        )
        self.cache = UnifiedRadixCache(self.params)
        self.core = self.cache.tree_core
        self.mamba = self.cache.components[ComponentType.MAMBA]
        self.ckpt_pool = getattr(self.req_pool, "mamba_ckpt_pool", None)  # --enable-int8-mamba-checkpoint
        self.chunk = mamba_cache_chunk_size()
        self.ckpt_grid = mamba_checkpoint_grid(v.page_size)
        self.track_grid = mamba_track_grid(v.page_size)
        self.tracking_slots = self.req_pool.mamba_initial_tracking_slots
        self.request_slots = request_slots
        self.hicache = hicache
        self.host = None
        if hicache:
            self._init_hicache(kvc)
        self.reqs: dict[int, _Req] = {}
        self._next_rid = 0
        self.evicted = {"tokens": 0, "mamba": 0}
        self._instrument()

    # ------------------------------------------------------------------ plumbing
    def close(self):
        self._stack.close()

    def _instrument(self):
        """Count every eviction SGLang performs (its own EvictResult), whatever triggered it."""
        orig = self.cache._evict

        def counted(params, *a, **k):
            r = orig(params, *a, **k)
            self.evicted["tokens"] += r.num_tokens_evicted
            self.evicted["mamba"] += r.mamba_num_evicted
            return r

        self.cache._evict = counted

    def _key(self, tokens):
        from array import array

        from sglang.srt.mem_cache.radix_cache import RadixKey

        return RadixKey(array("l", tokens) if not isinstance(tokens, array) else tokens)

    def _alloc_tokens(self, n: int):
        """Page-aligned KV allocation, evicting as the scheduler does (evict_to_free_tokens)."""
        n = -(-n // self.page) * self.page
        if n == 0:
            return self.torch.empty(0, dtype=self.torch.int64)
        if self.allocator.available_size() < n:
            self.allocator.evict_to_free_tokens(self.cache, n)
        out = self.allocator.alloc(n)
        if out is None:
            raise MemoryError(f"token pool: need {n}, available {self.allocator.available_size()}")
        return out.to(self.torch.int64)

    def ensure_mamba_capacity(self, needed: int) -> bool:
        """allocation.py:298 ensure_mamba_capacity: evict_for_alloc(mamba_num=shortfall)."""
        from sglang.srt.mem_cache.base_prefix_cache import EvictParams

        avail = self.mamba_allocator.schedulable_available_size()
        if avail < needed:
            self.cache.evict_for_alloc(EvictParams(num_tokens=0, mamba_num=needed - avail))
        return self.mamba_allocator.schedulable_available_size() >= needed

    def _alloc_slots(self, n: int):
        if not self.ensure_mamba_capacity(n):
            raise MemoryError(f"mamba pool: need {n}, available {self.mamba_allocator.available_size()}")
        return [self.mamba_allocator.alloc(1) for _ in range(n)]

    # ------------------------------------------------------------------ operations
    def match(self, tokens, *, touch: bool = True) -> dict:
        """match_prefix as a request would see it. Note: SGLang's match splits nodes and
        refreshes LRUs (FULL last_access_time on the whole path, MAMBA LRU on the best node)."""
        from sglang.srt.mem_cache.base_prefix_cache import MatchPrefixParams

        r = self.cache.match_prefix(MatchPrefixParams(key=self._key(tokens)))
        best = self.core.node_by_id(r.best_match_node)
        dev = self.core.node_by_id(r.last_device_node)
        M = self.CT.MAMBA
        return {
            "device_prefix_len": r.device_prefix_len,
            "full_kv_hit_length": r.full_kv_hit_length,
            "host_hit_length": r.host_hit_length,
            "mamba_host_hit_length": r.mamba_host_hit_length,
            "mamba_branching_seqlen": r.mamba_branching_seqlen,
            "best_match_end": self._depth(best),
            "hit": {"FULL": r.full_kv_hit_length > 0,
                    "MAMBA": dev is not self.core.root_node and dev.component_data[M].value is not None},
            "_raw": r,
        }

    def start(self, tokens) -> int:
        """A request's prefill; it stays running (decode / finish later). Returns its id."""
        torch = self.torch
        tokens = list(tokens)
        if self.hicache:
            self.load_back(tokens)  # host hit: load back before the prefill, as the scheduler does
        m = self.match(tokens)
        r = m["_raw"]
        rid = self._next_rid
        self._next_rid += 1
        prefix = r.device_prefix_len
        req = _Req(rid=rid, tokens=tokens, kv=None, prefix_len=prefix, cache_protected_len=prefix,
                   branching=r.mamba_branching_seqlen)
        # lock the matched prefix before any allocation can evict it (scheduler: inc_lock_ref on last_node)
        req.lock = self.cache.lock(r.last_device_node)
        try:
            if self.request_slots:  # HybridReqToTokenPool.alloc: 1 working + ping-pong slots
                slots = self._alloc_slots(1 + self.tracking_slots)
                req.working_slot, req.track_slots = slots[0], slots[1:]
            prefix_idx = self.cache.path_device_indices(r.last_device_node)[:prefix].to(torch.int64)
            new = self._alloc_tokens(len(tokens) - prefix)
        except MemoryError:
            self._release_slots(req)
            self.cache.unlock(req.lock)
            raise
        req.kv = torch.cat([prefix_idx, new])
        req.committed = len(tokens)
        self._prefill_track(req, extend_start=prefix, extend_end=len(tokens))
        self.reqs[rid] = req
        # checkpoint_kv_cache: a request that goes on decoding publishes its prefill now
        self._checkpoint(req, up_to=len(tokens), finished=False)
        req.prefix_len = len(tokens)
        return rid

    def _prefill_track(self, req: _Req, extend_start: int, extend_end: int):
        """schedule_batch.py:3166-3232 (non-DCP): one tracked state per extend."""
        extend_len = extend_end - extend_start
        grid = self.ckpt_grid
        mask = extend_len >= grid
        aligned = extend_start + (extend_len // grid) * grid
        if not mask:
            return
        track_seqlen = extend_end
        if req.branching is not None:
            if (req.branching > extend_start and req.branching < track_seqlen
                    and (req.branching - extend_start) % self.chunk == 0):
                aligned = req.branching
        req.last_track = aligned

    def decode(self, rid: int, n: int = 1, tokens=None) -> int:
        """n decode steps; KV pages allocated as needed; track at mamba_track_grid multiples.
        Returns the steps done (fewer when no KV page could be made)."""
        req = self.reqs[rid]
        new_tokens = list(tokens) if tokens is not None else [(req.tokens[-1] * 31 + i + 7) % 50000 for i in range(n)]
        done = 0
        for t in new_tokens:
            if req.committed >= len(req.kv):
                try:
                    page = self._alloc_tokens(1)
                except MemoryError:
                    return done
                req.kv = self.torch.cat([req.kv, page])
            done += 1
            req.tokens.append(t)
            req.committed += 1
            if req.committed % self.track_grid == 0:  # batch_result_processor.py:1548-1566
                req.prev_track, req.last_track = req.last_track, req.committed
                if len(req.track_slots) == 2:
                    req.track_slots.reverse()  # the new keep is the slot just written
        return done

    def finish(self, rid: int):
        """release_kv_cache(checkpoint=True) for a finished request."""
        req = self.reqs.pop(rid)
        self._checkpoint(req, up_to=req.committed, finished=True)
        # free_kv_row [cache_protected_len, owned) + over-allocated tail (whole pages)
        if len(req.kv) > req.cache_protected_len:
            self.allocator.free(req.kv[req.cache_protected_len:])
        self.cache.unlock(req.lock)
        req.lock = None
        self._release_slots(req)

    def prefill(self, tokens, decode: int = 0) -> int:
        """A whole request: prefill, `decode` steps, finish."""
        rid = self.start(tokens)
        if decode:
            self.decode(rid, decode)
        self.finish(rid)
        return rid

    def _tree_state_slot(self):
        """The slot a checkpoint donates to the tree. Active pool: MambaComponent._alloc_mamba_slot
        (evict_for_alloc(mamba_num=1) when empty). With --enable-int8-mamba-checkpoint the tree
        holds int8 checkpoint-pool slots: `_commit_int8_checkpoint` allocates one through
        `_alloc_int8_ckpt_slot` (plain evict(mamba_num=1) when full); the quantized copy of the
        request's active state is skipped here (request slots are not modelled)."""
        if self.ckpt_pool is not None:
            return self.mamba._alloc_int8_ckpt_slot()
        return self.mamba._alloc_mamba_slot(None)

    def _release_slots(self, req: _Req):
        for s in ([req.working_slot] if req.working_slot is not None else []) + req.track_slots:
            if s is not None:
                self.mamba_allocator.free(s)
        req.working_slot, req.track_slots = None, []

    def _checkpoint(self, req: _Req, up_to: int, finished: bool):
        """checkpoint_into_tree (unified_radix_cache.py:1164-1336) with MambaComponent's
        prepare_for_caching_req / cleanup_after_caching_req (mamba.py:604-727)."""
        from sglang.srt.mem_cache.base_prefix_cache import InsertParams

        torch = self.torch
        params = InsertParams(prev_prefix_len=req.cache_protected_len, inserted_len=req.cache_inserted_len)
        # ---- MAMBA prepare
        donated_from_track = False
        if finished:
            cache_len = req.last_track or 0
            if cache_len > up_to:  # _select_finished_checkpoint overshoot
                cache_len = req.prev_track if (req.prev_track is not None and req.prev_track <= up_to) else 0
            if cache_len > 0:
                if self.request_slots:
                    params.mamba_value = req.track_slots.pop(0)  # the keep slot is donated
                    donated_from_track = True
                else:
                    try:
                        params.mamba_value = self._tree_state_slot()
                    except AssertionError:  # every state locked: see the unfinished case below
                        self.evicted["checkpoint_skipped"] = self.evicted.get("checkpoint_skipped", 0) + 1
                        return
        else:
            cache_len = req.last_track or 0
            if cache_len > 0:
                try:
                    new_slot = self._tree_state_slot()  # may evict under mamba pressure
                except AssertionError:
                    # SGLang asserts here ("Can not alloc mamba cache", mamba.py:552): every slot
                    # is locked or held by requests. A real scheduler's admission avoids it; the
                    # driver skips this checkpoint and counts it, so a test can steer clear.
                    self.evicted["checkpoint_skipped"] = self.evicted.get("checkpoint_skipped", 0) + 1
                    req.last_track = req.prev_track = None
                    return
                if self.request_slots:
                    params.mamba_value = req.track_slots[0]
                    req.track_slots[0] = new_slot  # donate_mamba_ping_pong_slot
                else:
                    params.mamba_value = new_slot
        eff = min(up_to, cache_len)
        if eff <= 0:
            req.last_track = None if not finished else req.last_track
            req.prev_track = None if not finished else req.prev_track
            return
        key = self._key(req.tokens[:eff]).page_aligned(self.page)
        n = len(key)
        params.key = key
        params.value = req.kv[:n].clone()
        result = self.cache.insert(params)
        req.cache_inserted_len = max(req.cache_inserted_len, n)
        new_indices = self.cache.path_device_indices(result.last_device_node).to(torch.int64)
        assert len(new_indices) == n, (len(new_indices), n)
        req.kv[req.cache_protected_len:n] = new_indices[req.cache_protected_len:]
        self.cache.unlock(req.lock)
        req.lock = self.cache.lock(result.last_device_node)
        req.cache_protected_len = n
        # ---- MAMBA cleanup
        if result.mamba_exist and params.mamba_value is not None:
            self.mamba._free_mamba_value(params.mamba_value)
        if not finished:
            req.last_track = None
            req.prev_track = None
        del donated_from_track

    def lock(self, tokens):
        """Lock the device match of `tokens` (as a running request would). Returns a handle."""
        m = self.match(tokens)
        return self.cache.lock(m["_raw"].last_device_node)

    def unlock(self, handle):
        self.cache.unlock(handle)

    def evict(self, num_tokens: int = 0, mamba_num: int = 0) -> dict:
        """cache.evict(EvictParams) - a direct eviction request (token and/or mamba)."""
        from sglang.srt.mem_cache.base_prefix_cache import EvictParams

        r = self.cache.evict(EvictParams(num_tokens=num_tokens, mamba_num=mamba_num))
        return {"tokens": r.num_tokens_evicted, "mamba": r.mamba_num_evicted}

    def evict_for_alloc(self, num_tokens: int = 0, mamba_num: int = 0) -> dict:
        """cache.evict_for_alloc: shortfall semantics (what allocation paths call)."""
        from sglang.srt.mem_cache.base_prefix_cache import EvictParams

        r = self.cache.evict_for_alloc(EvictParams(num_tokens=num_tokens, mamba_num=mamba_num))
        return {"tokens": r.num_tokens_evicted, "mamba": r.mamba_num_evicted}

    # ------------------------------------------------------------------ HiCache
    def _init_hicache(self, kvc):
        """init_hicache as create_unified_radix_cache does (registry.py:192-199)."""
        install_direct_io_ops()  # W8
        self.cache.init_hicache(self.server_args, self.params)
        self.controller = self.cache.cache_controller
        self.host = self.cache.host_pool_group

    def tick(self):
        """One scheduler tick of HiCache bookkeeping (check_hicache_events)."""
        if self.hicache:
            self.cache.check_hicache_events()

    def load_back(self, tokens) -> int:
        """What the scheduler does for a host hit before prefill: init_load_back ->
        load_back(best_match_node) (unified_radix_cache.py:3586-3624, 1820-1918), then
        ready_to_load_host_cache + one check_hicache_events tick. Called with req=None, so the
        node's own MAMBA host value is restored (mamba.py:887-915 `nodes_to_load`) and no
        per-request copy-on-write slot is taken. Returns device tokens gained."""
        if not self.hicache:
            return 0
        m = self.match(tokens)
        r = m["_raw"]
        if not (r.host_hit_length > 0 or r.mamba_host_hit_length > 0
                or self.core.is_full_device_evicted(r.best_match_node)):
            return 0
        before = r.device_prefix_len
        ok = self.cache.load_back(r.best_match_node, None, req=None)
        self.cache.ready_to_load_host_cache()
        self.tick()
        if not ok:
            return 0
        return self.match(tokens)["device_prefix_len"] - before

    def evict_host(self, num_tokens: int = 0, mamba_num: int = 0) -> dict:
        """cache.evict_host for FULL (tokens) and/or MAMBA (slots)."""
        out = {"tokens": 0, "mamba": 0}
        if not self.hicache:
            return out
        if num_tokens:
            out["tokens"] = self.cache.evict_host(num_tokens, self.CT.FULL)
        if mamba_num:
            out["mamba"] = self.cache.evict_host(mamba_num, self.CT.MAMBA)
        self.evicted["host_tokens"] = self.evicted.get("host_tokens", 0) + out["tokens"]
        self.evicted["host_mamba"] = self.evicted.get("host_mamba", 0) + out["mamba"]
        return out

    def _observe_host(self) -> dict:
        out = {}
        for e in self.host.entries:
            hp = e.host_pool
            try:
                out[f"host_free_{e.name.value}"] = int(hp.available_size())
            except Exception:  # noqa: BLE001
                pass
        return out

    # ------------------------------------------------------------------ observation
    def _depth(self, node) -> int:
        d = 0
        while node is not None and node is not self.core.root_node:
            d += len(node.key)
            node = node.parent
        return d

    def observe(self, with_keys: bool = False) -> dict:
        F, M = self.CT.FULL, self.CT.MAMBA
        nodes = []
        stack = [(self.core.root_node, 0, ())]
        while stack:
            node, start, prefix = stack.pop()
            for ck in sorted(node.children, key=lambda k: str(k)):
                child = node.children[ck]
                toks = tuple(child.key.token_ids)
                end = start + len(toks)
                path = prefix + toks
                f, mm = child.component_data[F], child.component_data[M]
                nodes.append({
                    "span": (start, end),
                    "path_hash": hash(path) & 0xFFFFFFFF,
                    **({"path": path} if with_keys else {}),
                    "full": f.value is not None, "full_host": f.host_value is not None,
                    "mamba": mm.value is not None, "mamba_host": mm.host_value is not None,
                    "lock_full": f.lock_ref, "lock_mamba": mm.lock_ref,
                    "children": len(child.children),
                })
                stack.append((child, end, path))
        nodes.sort(key=lambda n: (n["span"], n["path_hash"]))
        out = {
            "nodes": nodes,
            "free_tokens": self.allocator.available_size(),
            "free_mamba": self.mamba_allocator.available_size(),
            **({"free_mamba_ckpt": self.ckpt_pool.available_size()} if self.ckpt_pool is not None else {}),
            "full_evictable": self.cache.full_evictable_size(),
            "full_protected": self.cache.full_protected_size(),
            "mamba_evictable": self.cache.mamba_evictable_size(),
            "mamba_protected": self.cache.mamba_protected_size(),
            "evicted": dict(self.evicted),
            "running": len(self.reqs),
        }
        if self.host is not None:
            out.update(self._observe_host())
        return out

    def cached_spans(self) -> list:
        """[(start, end, FULL on device, MAMBA on device)] - the compact view."""
        return [(n["span"][0], n["span"][1], n["full"], n["mamba"]) for n in self.observe()["nodes"]]

    def check(self):
        """SGLang's own sanity check plus pool accounting."""
        self.cache.sanity_check()
