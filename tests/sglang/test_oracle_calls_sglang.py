"""Issue 34, item 5: the SGLang-side oracle calls SGLang's rules where SGLang has a function for them.

Each test moves SGLang's own function (monkeypatch) and checks that the oracle's answer moves with
it, so an oracle that restated the rule (a copy, right or wrong) would fail here:

* the per-DP-worker request count: ``KVCacheConfigurator.resolve_max_num_reqs``
  (kv_cache_configurator.py:3128) -> ``parallel.max_running_requests_per_worker``;
* the EAGLE/MTP draft layer count: ``resolve_spec_aux_hidden_state_config``
  (spec_aux_hidden_state.py:174) -> the configurator's ``spec_aux_config`` and ``token.cell_size_bytes``;
* the MTP draft worker's device pools packed into the HiCache host group: SGLang's draft-worker
  ``KVCacheConfigurator`` (``is_draft_worker=True``) and ``_can_pack_hicache_mtp``
  (base_spec_worker.py) -> ``host.kv_layers`` / ``host.kv_bytes``.
"""
from __future__ import annotations

GiB = 1 << 30

# DP attention over 4 workers, 10 requests asked for: SGLang's rule gives max(1, 10 // 4) = 2 per worker.
DP4 = {"gpu": "H200", "tp_size": 8, "dp_size": 4, "enable_dp_attention": True, "max_running_requests": 10}
EAGLE = {"gpu": "H200", "speculative_algorithm": "EAGLE", "max_running_requests": 64,
         "available_bytes": 100 * GiB}
PLAIN = {"gpu": "H200", "max_running_requests": 64, "available_bytes": 100 * GiB}
# MTP with HiCache, sized from the weights (the suite's hardware readings, profiles.hardware)
MTP_HICACHE = {"gpu": "H200", "enable_hierarchical_cache": True, "hicache_ratio": 1.5,
               "speculative_algorithm": "EAGLE", "max_running_requests": 64, "weights_bytes": 70_000_000_000}


def _plan(profile: dict) -> dict:
    from oracle import sglang_plan

    out = sglang_plan(profile)
    assert "errors" not in out, out.get("errors")
    return out


def test_per_worker_request_count_is_sglangs(sglang_ready, monkeypatch):
    from sglang.srt.mem_cache.kv_cache_configurator import KVCacheConfigurator

    honest = _plan(DP4)["parallel"]["max_running_requests_per_worker"]
    assert honest == 2, honest   # max(1, 10 // 4), read from the wheel; not computed by the oracle

    real = KVCacheConfigurator.resolve_max_num_reqs
    calls = []

    def moved(self, token_capacity):
        calls.append(token_capacity)
        return real(self, token_capacity) + 7

    monkeypatch.setattr(KVCacheConfigurator, "resolve_max_num_reqs", moved)
    assert _plan(DP4)["parallel"]["max_running_requests_per_worker"] == honest + 7
    assert calls, "the oracle never asked SGLang's resolve_max_num_reqs"


def test_per_worker_request_count_is_not_capped_by_the_pools(sglang_ready):
    """W10: the count is the launch argument's share, not what the (here tiny) pools would cap it to."""
    out = _plan({"gpu": "H200", "max_running_requests": 4096})
    assert out["parallel"]["max_running_requests_per_worker"] == 4096


def test_draft_layer_count_is_sglangs(sglang_ready, monkeypatch):
    import sglang.srt.model_executor.model_runner_components.spec_aux_hidden_state as aux_mod
    from cpu_workarounds import cpu_as_gpu
    from oracle import fake_gpu, resolve_for_sizing, server_args_kwargs, shipped_config

    real = aux_mod.resolve_spec_aux_hidden_state_config
    returned = []

    def recorded(**kw):
        returned.append(real(**kw))
        return returned[-1]

    monkeypatch.setattr(aux_mod, "resolve_spec_aux_hidden_state_config", recorded)
    with cpu_as_gpu(fake_gpu(EAGLE)):
        r = resolve_for_sizing(shipped_config(), server_args_kwargs(EAGLE))
        kvc = r.configurator()
    assert kvc.spec_aux_config is returned[-1]   # the object SGLang resolved, not a copy of its rule
    assert kvc.spec_aux_config.eagle_draft_num_layers == 1   # GLM-5.3-Flash's one NextN layer

    plain = _plan(PLAIN)["token"]["cell_size_bytes"]
    eagle = _plan(EAGLE)["token"]["cell_size_bytes"]
    per_draft_layer = eagle - plain
    assert per_draft_layer > 0, (plain, eagle)

    def one_more_layer(**kw):
        cfg = real(**kw)
        if cfg.eagle_draft_num_layers is not None:
            cfg.eagle_draft_num_layers += 1
        return cfg

    monkeypatch.setattr(aux_mod, "resolve_spec_aux_hidden_state_config", one_more_layer)
    assert _plan(EAGLE)["token"]["cell_size_bytes"] == eagle + per_draft_layer


def _memory(profile: dict) -> dict:
    from oracle_memory import sglang_memory
    from profiles import hardware

    prof, measured = hardware(profile)
    out = sglang_memory(prof, profile, pre_model_load_bytes=prof["pre_model_load_bytes"],
                        weights_bytes=prof["weights_bytes"] + measured.get("draft_weights_bytes", 0))
    assert "errors" not in out, out.get("errors")
    return out


def test_mtp_draft_pools_are_sglangs_draft_worker_pools(sglang_ready, monkeypatch):
    import sglang.srt.speculative.base_spec_worker as spec_worker
    from sglang.srt.mem_cache.kv_cache_configurator import KVCacheConfigurator

    real_init = KVCacheConfigurator._init_pools
    drafts = []

    def spy(self, **kw):
        pools = real_init(self, **kw)
        if self.is_draft_worker:
            drafts.append((self.model_config.hf_config.architectures[0], pools.token_to_kv_pool))
        return pools

    monkeypatch.setattr(KVCacheConfigurator, "_init_pools", spy)
    packed = _memory(MTP_HICACHE)["host"]
    assert len(drafts) == 1, drafts
    arch, pool = drafts[0]
    assert arch.endswith("NextN"), arch   # the draft-mode config SGLang rewrites the target to
    assert pool.layer_num == 1 and type(pool).__name__ == "DSATokenToKVPool", (pool.layer_num, type(pool))
    monkeypatch.setattr(KVCacheConfigurator, "_init_pools", real_init)

    # SGLang's packing rule decides whether the draft rides in the host group at all
    monkeypatch.setattr(spec_worker, "_can_pack_hicache_mtp", lambda *a, **k: False)
    unpacked = _memory(MTP_HICACHE)["host"]
    assert unpacked["kv_layers"] == packed["kv_layers"] - 1, (unpacked, packed)
    assert unpacked["kv_bytes"] < packed["kv_bytes"], (unpacked, packed)
