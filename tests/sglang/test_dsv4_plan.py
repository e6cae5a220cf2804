"""Issue 32: `glm-kv plan` for DeepSeek-V4 against SGLang 0.5.23's own resolution and sizing, key for key.

SGLang gets the vendored config.json in a checkpoint folder and the launch flags; it never sees a glm-kv
number. ``ServerArgs.resolve_once()`` (with ``check_server_args``) resolves the launch on a faked CUDA GPU
(cpu_workarounds.cpu_as_gpu): the DeepSeek-V4 model override's page size and SWA ratio, the hook's request
cap, the kv-cache dtype, the chunk. ``KVCacheConfigurator`` (hybrid SWA with compression, as the model runner
builds it) then sizes the pools from the launch's byte budget: ``config_from_budget`` (DSV4PoolConfigurator),
``resolve_max_num_reqs``, ``finalize_with_max_running_requests``. Every DeepSeek-V4 field of SGLang's
``MemoryPoolConfig`` must equal the plan's key of that name, and every size key of the plan must be one of
SGLang's, on random launches (the run's seed); a planted error must be caught.
"""
from __future__ import annotations

import json
import random
import shutil
import tempfile
from pathlib import Path

import pytest

from tests.pytest_glm_kv import run_seed

ROOT = Path(__file__).resolve().parents[2]
SIZE_KEYS = ("full_max_total_num_tokens", "swa_max_total_num_tokens", "c4_max_total_num_tokens",
             "c128_max_total_num_tokens", "c4_state_pool_size", "c128_state_pool_size", "max_total_num_tokens")


def draw(rng: random.Random) -> tuple[str, dict]:
    tp = rng.choice([1, 2, 4, 8])
    dpa = tp > 1 and rng.random() < 0.4
    gpu = rng.choice(["H100", "H200", "B200"])
    if rng.random() < 0.5:   # the bytes for the pools given
        budget = {"available_bytes": rng.randint(20 << 30, 120 << 30)}
    else:   # SGLang's rest after stated weights, pre-load memory and (sometimes) fraction: _profile_available_bytes
        total = {"H100": 80, "H200": 141, "B200": 180}[gpu] << 30
        pre = total - rng.randint(1 << 30, 3 << 30)
        budget = {"pre_model_load_bytes": pre, "weights_bytes": rng.randint(int(0.2 * pre), int(0.6 * pre)),
                  "mem_fraction_static": rng.choice([None, None, 0.8, 0.88])}
    launch = {"gpu": gpu, "tp_size": tp, "dp_size": tp if dpa else 1, "enable_dp_attention": dpa, **budget,
              "max_running_requests": rng.choice([None, 16, 64, 128, 256, 1024]),
              "chunked_prefill_size": rng.choice([None, 4096, 8192, 16384]),
              "disable_radix_cache": rng.random() < 0.3, "disable_overlap_schedule": rng.random() < 0.3,
              "swa_full_tokens_ratio": rng.choice([None, None, 0.05, 0.1, 0.25])}
    if rng.random() < 0.4:   # EAGLE top-k 1 (the MTP layer the checkpoints ship): steps + 1 drafts (> 10 refused)
        steps = rng.randint(1, 11)
        launch.update(speculative_algorithm="EAGLE", speculative_eagle_topk=1, speculative_num_steps=steps,
                      speculative_num_draft_tokens=rng.choice([None, steps + 1, rng.randint(2, 12)]))
        if "weights_bytes" in launch:   # the MTP draft's weights, loaded before the target pools are sized
            launch["draft_weights_bytes"] = rng.randint(1 << 30, 4 << 30)
    return rng.choice(["deepseek-v4-flash", "deepseek-v4-pro"]), launch


def glm_kv_plan(name: str, launch: dict) -> dict:
    from glm_kv.inputs.profile import make_profile
    from glm_kv.ledgers.dsv4_plan import dsv4_plan

    fields = {k: v for k, v in launch.items() if v is not None}
    return dsv4_plan(make_profile({"sglang_layout": "0.5.23", "model": name, **fields})).to_dict()


def sglang_plan(name: str, launch: dict, then=None) -> dict:
    from cpu_workarounds import cpu_as_gpu, quiet_sglang_logs
    from oracle import fake_gpu

    from glm_kv.inputs.hf_config import DSV4_SHIPPED, MODELS_DIR

    quiet_sglang_logs()
    d = Path(tempfile.mkdtemp(prefix="glm-kv-dsv4-"))
    shutil.copy(MODELS_DIR / f"{DSV4_SHIPPED[name][0]}_config.json", d / "config.json")
    try:
        with cpu_as_gpu(fake_gpu(launch)):
            return _sizes(str(d), launch, then)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _sizes(path: str, launch: dict, then=None) -> dict:
    """SGLang's resolution and sizing of the launch; ``then(sa, config, model_config, out)`` (test_dsv4_host: the
    host pools over a device pool at these sizes) runs in the same resolved context and its answer is returned."""
    import torch

    from sglang.srt.arg_groups.overrides import resolved_view
    from sglang.srt.configs.model_config import ModelConfig
    from sglang.srt.mem_cache.kv_cache_configurator import KVCacheConfigurator
    from sglang.srt.model_executor.model_runner_components.layer_setup import ModelLayerInfo
    from sglang.srt.model_executor.model_runner_components.spec_aux_hidden_state import SpecAuxHiddenStateConfig
    from sglang.srt.model_executor.pool_configurator import create_memory_pool_configurator
    from sglang.srt.runtime_context import get_context, get_parallel
    from sglang.srt.server_args import ServerArgs
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

    kw = {k: launch[k] for k in ("tp_size", "dp_size", "enable_dp_attention", "max_running_requests",
                                 "chunked_prefill_size", "disable_radix_cache", "disable_overlap_schedule",
                                 "swa_full_tokens_ratio", "kv_cache_dtype", "speculative_algorithm",
                                 "speculative_eagle_topk", "speculative_num_steps", "speculative_num_draft_tokens",
                                 "mem_fraction_static", "enable_hierarchical_cache", "hicache_ratio", "hicache_size",
                                 "hicache_mem_layout", "hicache_io_backend")
          if launch.get(k) is not None}
    sa = ServerArgs(model_path=path, device="cuda", **kw)
    sa.resolve_once()
    sa.check_server_args()
    v = resolved_view(sa)
    get_context().set_server_args(sa)
    par = get_parallel()
    mc = ModelConfig.from_server_args(sa)
    n = mc.num_hidden_layers
    kv = {"fp8_e4m3": torch.float8_e4m3fn, "bfloat16": torch.bfloat16}[v.kv_cache_dtype]
    kvc = KVCacheConfigurator(
        device="cpu", gpu_id=0, attn_dp_size=par.attn_dp_size, pp_size=1, pp_group=None, model=None,
        model_config=mc, server_args=sa, kv_cache_dtype=kv, kv_cache_dtype_str=v.kv_cache_dtype,
        model_dtype=torch.bfloat16, page_size=v.page_size, sliding_window_size=mc.sliding_window_size,
        spec_algorithm=SpeculativeAlgorithm.from_string(v.speculative_algorithm), is_draft_worker=False,
        post_capture_kv_active=False,
        spec_aux_config=SpecAuxHiddenStateConfig(), is_hybrid_swa=True, is_hybrid_swa_compress=True,
        use_mla_backend=False, layer_info=ModelLayerInfo(start_layer=0, end_layer=n, num_effective_layers=n),
        forward_stream=None, req_to_token_pool=None, token_to_kv_pool_allocator=None, memory_pool_config=None)
    budget = launch.get("available_bytes")
    if budget is None:   # the model runner's path: the free memory before and after the weights load
        budget = _profile_available_bytes(kvc, v, launch)
    config = kvc.config_from_budget(budget)
    config.max_running_requests = kvc.resolve_max_num_reqs(config.max_total_num_tokens)
    config = create_memory_pool_configurator(kvc).finalize_with_max_running_requests(config)
    out = {k: getattr(config, k) for k in SIZE_KEYS}
    out.update(page_size=v.page_size, kv_cache_dtype=v.kv_cache_dtype, max_running_requests=config.max_running_requests,
               num_hidden_layers=n, mem_fraction_static=v.mem_fraction_static, rest_bytes=budget)
    return out if then is None else then(sa, config, mc, out)


def _profile_available_bytes(kvc, v, launch: dict) -> int:
    """``KVCacheConfigurator._profile_available_bytes`` on the launch's stated pre-load free memory and weights
    (target + draft): SGLang's two free-memory readings are answered by oracle_memory.fake_free_memory."""
    from types import SimpleNamespace

    import sglang.srt.utils.common as common
    from oracle import fake_gpu
    from oracle_memory import fake_free_memory
    from sglang.srt.runtime_context import get_parallel

    pre = launch["pre_model_load_bytes"]
    state = {"free": pre, "total": int(fake_gpu(launch).memory_mib * (1 << 20))}
    with fake_free_memory(state):
        pre_gib = common.get_available_gpu_memory("cuda", 0, distributed=v.tp_size * v.pp_size > 1, cpu_group=None)
        state["free"] = pre - launch["weights_bytes"] - launch.get("draft_weights_bytes", 0)
        with get_parallel().override(world_group=SimpleNamespace(cpu_group=None)):
            return kvc._profile_available_bytes(pre_model_load_memory=pre_gib)


def differences(name: str, launch: dict) -> list[str]:
    sg = sglang_plan(name, launch)
    d = glm_kv_plan(name, launch)
    mine = {**{k: d["capacity"][k] for k in SIZE_KEYS}, "page_size": d["token"]["page_size"],
            "kv_cache_dtype": d["token"]["kv_cache_dtype"], "max_running_requests": d["capacity"]["max_running_requests"],
            "num_hidden_layers": d["model"]["num_hidden_layers"],
            "mem_fraction_static": d["memory"]["mem_fraction_static"], "rest_bytes": d["capacity"]["rest_bytes"]}
    plan_size_keys = {k for k in d["capacity"] if k.endswith(("_num_tokens", "_pool_size"))}
    bad = [f"{k}: glm-kv {mine.get(k)} vs SGLang {sg.get(k)}" for k in sorted(set(sg) | set(mine)) if mine.get(k) != sg.get(k)]
    bad += [f"plan key {k} is not one of SGLang's" for k in sorted(plan_size_keys - set(sg))]
    return bad


def agree(name: str, launch: dict, sglang_side=None, glm_kv_side=None, diff=None) -> None:
    """Equal keys both ways (``diff``), or both refuse: SGLang's refusal (its text) is in glm-kv's. The sides
    default to the plan's (``sglang_plan``, ``glm_kv_plan``, ``differences``); test_dsv4_host passes its own."""
    from glm_kv.errors import ProfileError

    try:
        (sglang_side or sglang_plan)(name, launch)
    except (AssertionError, ValueError, RuntimeError) as e:
        with pytest.raises(ProfileError) as mine:
            (glm_kv_side or glm_kv_plan)(name, launch)
        assert str(e) in str(mine.value), (launch, str(e), str(mine.value))
        return
    assert (diff or differences)(name, launch) == [], (name, launch)


@pytest.mark.parametrize("i", range(8))
def test_plan_equals_sglangs_resolution_and_sizing(i):
    """Equal keys both ways, or both refuse: SGLang's sizing refusal (its text) is in glm-kv's."""
    agree(*draw(random.Random(run_seed() * 104729 + i)))


# CI's launch of seed 2035665865 (draw 2): the default fraction 0.441 on 8 x H100 with DP attention leaves no rest
NO_REST = {"gpu": "H100", "tp_size": 8, "dp_size": 8, "enable_dp_attention": True,
           "pre_model_load_bytes": 83_667_732_427, "weights_bytes": 38_066_603_359, "chunked_prefill_size": 16384,
           "swa_full_tokens_ratio": 0.1, "speculative_algorithm": "EAGLE", "speculative_eagle_topk": 1,
           "speculative_num_steps": 1, "draft_weights_bytes": 1_848_298_347}


def test_weights_leaving_no_rest_are_refused_in_sglangs_words(monkeypatch):
    """SGLang refuses CI's launch while sizing, naming the fraction that would do; glm-kv's refusal carries
    those words. Planted: the readings without the draft's weights (SGLang counts them): caught."""
    import glm_kv.ledgers.memory as memory

    with pytest.raises(ValueError, match="Loaded weights leave no GPU memory"):
        sglang_plan("deepseek-v4-flash", NO_REST)
    agree("deepseek-v4-flash", NO_REST)
    real = memory.free_readings
    monkeypatch.setattr(memory, "free_readings", lambda pre, w, world: real(pre, w - NO_REST["draft_weights_bytes"],
                                                                             world))
    with pytest.raises(AssertionError):
        agree("deepseek-v4-flash", NO_REST)


def test_eagle_launch_and_planted_ring():
    """EAGLE top-k 1 with 4 drafts: rings of 16 / 256 rows and the (layers + 1) / layers inflation. Planted: the
    c128 ring of 512 rows instead of 256."""
    import glm_kv.ledgers.dsv4 as D

    launch = {"gpu": "H200", "tp_size": 1, "available_bytes": 60_000_000_000, "speculative_algorithm": "EAGLE",
              "speculative_eagle_topk": 1, "speculative_num_steps": 3, "speculative_num_draft_tokens": 4}
    assert differences("deepseek-v4-flash", launch) == []
    saved = dict(D.SPEC_RING_SIZES)
    D.SPEC_RING_SIZES[128] = 512
    try:
        assert differences("deepseek-v4-flash", launch) != []
    finally:
        D.SPEC_RING_SIZES.update(saved)


def test_default_launch_and_planted_ratio(monkeypatch):
    """SGLang's default DeepSeek-V4 launch sizes the SWA pool by the model override's ratio 0.1; planting the
    request-cap sizing (the configurator's mode when no ratio was given) must be caught."""
    import glm_kv.ledgers.dsv4_plan as P

    launch = {"gpu": "H200", "tp_size": 1, "available_bytes": 60_000_000_000}
    assert differences("deepseek-v4-flash", launch) == []
    real = P.dsv4_pool_sizes
    monkeypatch.setattr(P, "dsv4_pool_sizes", lambda m, **kw: real(m, **{**kw, "swa_full_tokens_ratio": None}))
    assert differences("deepseek-v4-flash", launch) != []


def test_rest_after_weights_and_planted_errors(monkeypatch):
    """No available_bytes: SGLang's default fraction and ``_profile_available_bytes`` after the stated weights
    (target + MTP draft) and pre-load memory size the pools. Planted: the prefill CUDA graph DeepSeek-V4 turns off
    counted in the fraction; the draft's weights left out of the rest."""
    import glm_kv.ledgers.memory as M

    launch = {"gpu": "H200", "tp_size": 8, "pre_model_load_bytes": 140 << 30, "weights_bytes": 40 << 30,
              "draft_weights_bytes": 3 << 30, "speculative_algorithm": "EAGLE", "speculative_eagle_topk": 1,
              "speculative_num_steps": 3, "speculative_num_draft_tokens": 4}
    assert differences("deepseek-v4-flash", launch) == []
    with monkeypatch.context() as m:
        m.setattr(M, "DSV4_ARCHS", ())
        assert any(d.startswith("mem_fraction_static") for d in differences("deepseek-v4-flash", launch))
    with monkeypatch.context() as m:
        import glm_kv.ledgers.dsv4_plan as P

        real = P.memory_ledger_for
        m.setattr(P, "memory_ledger_for", lambda *a, **kw: real(*a, **{**kw, "draft_weights_bytes": 0}))
        assert any(d.startswith("rest_bytes") for d in differences("deepseek-v4-flash", launch))


@pytest.mark.parametrize("name, launch", [
    ("deepseek-v4-flash", {"gpu": "H200", "tp_size": 8}),
    ("deepseek-v4-flash", {"gpu": "B200", "tp_size": 8, "dp_size": 8, "enable_dp_attention": True,
                           "speculative_algorithm": "EAGLE", "speculative_eagle_topk": 1, "speculative_num_steps": 3}),
    ("deepseek-v4-pro", {"gpu": "B200", "tp_size": 8, "max_running_requests": 64}),
], ids=["flash-h200", "flash-b200-dpa-eagle", "pro-b200"])
def test_estimated_weights_path_equals_sglang_with_its_own_model(name, launch):
    """No weights given: glm-kv estimates them (ledgers/dsv4_weights.py); SGLang gets the bytes of its own
    DeepseekV4ForCausalLM (and NextN draft) built on meta (test_dsv4_weights.sglang_bytes), never glm-kv's. The
    fraction, the rest and every pool size must agree, and the plan must say its weights are an estimate."""
    from test_dsv4_weights import sglang_bytes

    pre = {"H200": 138 << 30, "B200": 176 << 30}[launch["gpu"]]
    dpa = bool(launch.get("enable_dp_attention"))
    target, draft = sglang_bytes(name, launch["tp_size"], dpa, wo_a_fp8=launch["gpu"] == "B200")
    sg = sglang_plan(name, {**launch, "pre_model_load_bytes": pre, "weights_bytes": target,
                            **({"draft_weights_bytes": draft} if launch.get("speculative_algorithm") else {})})
    d = glm_kv_plan(name, {**launch, "pre_model_load_bytes": pre})
    assert d["capacity"]["weights_bytes_source"].startswith("estimate")
    mine = {**{k: d["capacity"][k] for k in SIZE_KEYS}, "mem_fraction_static": d["memory"]["mem_fraction_static"],
            "rest_bytes": d["capacity"]["rest_bytes"], "max_running_requests": d["capacity"]["max_running_requests"]}
    assert mine == {k: sg[k] for k in mine}


@pytest.mark.parametrize("bad, field", [({"tp_size": 8, "dp_size": 3, "enable_dp_attention": True}, "dp_size"),
                                        ({"chunked_prefill_size": 1000}, "chunked_prefill_size")])
def test_launches_sglang_refuses_are_refused(bad, field):
    """SGLang refuses the launch (resolution, start-up checks or sizing): glm-kv's plan refuses it, naming the field."""
    from glm_kv.errors import ProfileError

    launch = {"gpu": "H200", "tp_size": 1, "available_bytes": 60_000_000_000, **bad}
    with pytest.raises(Exception) as sg:   # noqa: PT011 - whatever SGLang raises (ValueError, AssertionError)
        sglang_plan("deepseek-v4-flash", launch)
    assert not isinstance(sg.value, ProfileError)
    with pytest.raises(ProfileError) as mine:
        glm_kv_plan("deepseek-v4-flash", launch)
    assert mine.value.field == field, (str(sg.value), str(mine.value))


def test_bf16_kv_sglang_resolves_but_its_pool_does_not_build():
    """--kv-cache-dtype bfloat16 passes SGLang's resolution, then DeepSeekV4SingleKVPool asserts a uint8 store:
    glm-kv refuses it, naming kv_cache_dtype. Planted: a pool SGLang builds (fp8) must not raise."""
    import torch

    import sglang.srt.mem_cache.deepseek_v4_memory_pool as mp

    from glm_kv.errors import ProfileError

    assert sglang_plan("deepseek-v4-flash", {"gpu": "H200", "tp_size": 1, "available_bytes": 60_000_000_000,
                                             "kv_cache_dtype": "bfloat16"})["kv_cache_dtype"] == "bfloat16"
    with pytest.raises(AssertionError):
        mp.DeepSeekV4SingleKVPool(256, 256, torch.bfloat16, 448, 64, 1, "cpu", False)
    mp.DeepSeekV4SingleKVPool(256, 256, torch.float8_e4m3fn, 448, 64, 1, "cpu", False)
    with pytest.raises(ProfileError) as mine:
        glm_kv_plan("deepseek-v4-flash", {"gpu": "H200", "tp_size": 1, "available_bytes": 60_000_000_000,
                                          "kv_cache_dtype": "bfloat16"})
    assert mine.value.field == "kv_cache_dtype" and "store_dtype == torch.uint8" in str(mine.value)
