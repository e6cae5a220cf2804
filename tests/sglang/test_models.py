"""Issue 22, deliverable 4: every shipped model's pools, glm-kv against SGLang 0.5.23's classes.

SGLang gets only the checkpoint's files and the launch arguments (models_oracle.py); glm-kv gets
the same launch arguments as a profile. Every key is compared both ways: the two key sets must be
equal (a key one side has and the other lacks fails, named), then every value.
"""
from __future__ import annotations

import pytest

from glm_kv.inputs.profile import make_profile
from glm_kv.ledgers import layers as layers_module
from glm_kv.ledgers.host import host_ledger
from glm_kv.ledgers.plan import load_plan
from models_oracle import sglang_model_plan, sglang_server_args_refusal

GiB = 1 << 30
MODELS = ["kimi-k3", "qwen3.5-35b-a3b", "nemotron-3-super-120b-a12b-fp8", "deepseek-v3.2", "glm-5.1", "glm-5.3-flash"]
ANCHOR_LAUNCH = {"gpu": "B200", "tp_size": 8, "dp_size": 8, "enable_dp_attention": True, "kv_cache_dtype": "fp8_e4m3",
                 "dsa_prefill_backend": "flashmla_sparse", "dsa_decode_backend": "flashmla_kv",
                 "available_bytes": 45 * GiB}
CASES = [(m, {"gpu": g, "available_bytes": 60 * GiB}) for m in MODELS for g in ("H200", "B200")] + [
    ("kimi-k3", {"gpu": "H200", "tp_size": 8, "available_bytes": 90 * GiB, "max_running_requests": 64}),
    ("kimi-k3", {"gpu": "B200", "tp_size": 4, "kv_cache_dtype": "fp8_e4m3", "mamba_ssm_dtype": "bfloat16",
                 "available_bytes": 120 * GiB}),
    ("qwen3.5-35b-a3b", {"gpu": "H200", "tp_size": 2, "disable_radix_cache": True, "max_running_requests": 32,
                         "available_bytes": 100 * GiB}),
    ("qwen3.5-35b-a3b", {"gpu": "B200", "tp_size": 4, "disable_overlap_schedule": True, "available_bytes": 150 * GiB}),
    ("nemotron-3-super-120b-a12b-fp8", {"gpu": "H200", "tp_size": 2, "kv_cache_dtype": "bfloat16",
                                        "available_bytes": 80 * GiB}),
    ("deepseek-v3.2", {"gpu": "H200", "tp_size": 8, "kv_cache_dtype": "fp8_e4m3", "available_bytes": 70 * GiB,
                       "max_running_requests": 256}),
    # sglang #11309's deployment: fp8 with FlashMLA's scaled rows on B200 (656 + 132 B per layer)
    ("deepseek-v3.2", ANCHOR_LAUNCH),
    ("glm-5.1", {"gpu": "B200", "tp_size": 8, "kv_cache_dtype": "bfloat16", "max_total_tokens": 300_000,
                 "available_bytes": 80 * GiB}),
    # DP attention: attention TP = tp / dp; a page size the backend does not keep is replaced
    ("deepseek-v3.2", {"gpu": "H200", "tp_size": 8, "dp_size": 8, "enable_dp_attention": True,
                       "available_bytes": 60 * GiB}),
    ("kimi-k3", {"gpu": "H200", "tp_size": 8, "dp_size": 4, "enable_dp_attention": True, "available_bytes": 60 * GiB}),
    ("kimi-k3", {"gpu": "B200", "tp_size": 8, "page_size": 16, "available_bytes": 60 * GiB}),
    ("qwen3.5-35b-a3b", {"gpu": "B200", "tp_size": 8, "page_size": 16, "available_bytes": 30 * GiB}),
    ("nemotron-3-super-120b-a12b-fp8", {"gpu": "B200", "tp_size": 4, "page_size": 32, "max_mamba_cache_size": 100,
                                        "available_bytes": 60 * GiB}),
    ("qwen3.5-35b-a3b", {"gpu": "H200", "mamba_scheduler_strategy": "no_buffer", "disable_overlap_schedule": True,
                         "available_bytes": 60 * GiB}),
]
# launches SGLang refuses at start-up: glm-kv must refuse them too (and the cases above it must not)
REFUSED = [
    ("qwen3.5-35b-a3b", {"gpu": "H200", "mamba_scheduler_strategy": "no_buffer"}),
    ("kimi-k3", {"gpu": "H200", "tp_size": 5}),
    ("deepseek-v3.2", {"gpu": "H200", "tp_size": 8, "dp_size": 3, "enable_dp_attention": True}),
    # trtllm_mla (Kimi-K3's Blackwell default) refuses the spelling "bfloat16" (found by seed 161584343)
    ("kimi-k3", {"gpu": "B200", "tp_size": 4, "kv_cache_dtype": "bfloat16"}),
]


def ours(name: str, launch: dict) -> dict:
    p = load_plan(make_profile({"model": name, **launch}))
    tok, req, cap, m = p.token, p.request, p.capacity, p.layers
    dsa = tok.indexer_bytes_per_token > 0
    hybrid = bool(m.state_layers)
    return {
        "page_size": tok.page_size, "kv_cache_dtype": tok.kv_cache_dtype,
        "dsa_prefill_backend": p.args.dsa_prefill_backend if dsa else None,
        "dsa_decode_backend": p.args.dsa_decode_backend if dsa else None,
        "mamba_strategy": req.mamba_strategy if hybrid else None,
        "attn_tp_size": p.parallel.attn_tp_size, "num_hidden_layers": m.num_hidden_layers,
        "bytes_per_token": tok.cell_size_bytes, "bytes_per_slot": req.state_slot_bytes,
        "slots_per_request": req.slots_per_request, "bytes_per_request": req.state_bytes_per_request,
        "full_attention_layers": list(m.full_attention_layers), "state_layers": list(m.state_layers),
        "max_total_num_tokens": cap.max_total_num_tokens, "max_running_requests": cap.max_running_requests_per_worker,
        "max_mamba_cache_size": cap.max_mamba_cache_size if hybrid else None,
        "measured_kv_bytes_per_token": tok.kv_bytes_per_token,
        "measured_indexer_bytes_per_token": tok.indexer_bytes_per_token,
        "measured_bytes_per_slot": req.state_slot_bytes,
    }


def compare(a: dict, b: dict) -> list[str]:
    """Every key both ways: missing on either side, then differing values (named)."""
    problems = [f"{k}: only glm-kv has it" for k in sorted(set(a) - set(b))]
    problems += [f"{k}: only SGLang has it" for k in sorted(set(b) - set(a))]
    problems += [f"{k}: glm-kv {a[k]!r} != SGLang {b[k]!r}" for k in sorted(set(a) & set(b)) if a[k] != b[k]]
    return problems


@pytest.fixture(scope="module")
def sglang_answers(sglang_ready):
    return {}


def _sglang(cache, name, launch):
    key = (name, tuple(sorted(launch.items())))
    if key not in cache:
        ans = sglang_model_plan(name, launch)
        assert "errors" not in ans, ans
        ans.pop("pool_classes")
        cache[key] = ans
    return cache[key]


@pytest.mark.parametrize("name, launch", CASES, ids=lambda v: v if isinstance(v, str) else
                         ",".join(f"{k}={x}" for k, x in v.items() if k != "available_bytes"))
def test_model_pools_agree_with_sglang(sglang_answers, name, launch):
    theirs = {k: v for k, v in _sglang(sglang_answers, name, launch).items() if k != "host"}
    assert compare(ours(name, launch), theirs) == []


# (flag, value): the three disable switches and the per-phase graph backends (every value SGLang takes)
GRAPH_FLAGS = [("disable_cuda_graph", True), ("disable_decode_cuda_graph", True), ("disable_prefill_cuda_graph", True)] \
    + [(f"cuda_graph_backend_{phase}", v) for phase in ("decode", "prefill") for v in ("full", "breakable", "disabled")]


def graph_flag_problems(cache, name: str, flag: str, value) -> tuple[list, list]:
    """(SGLang with the flag vs SGLang without it, glm-kv with it vs SGLang with it), key by key."""
    launch = {"gpu": "H200", "available_bytes": 60 * GiB}
    flagged = {**launch, flag: value}
    theirs = {k: v for k, v in _sglang(cache, name, flagged).items() if k != "host"}
    moved = compare(theirs, {k: v for k, v in _sglang(cache, name, launch).items() if k != "host"})
    return moved, compare(ours(name, flagged), theirs)


@pytest.mark.parametrize("flag, value", GRAPH_FLAGS, ids=[f"{f}={v}" for f, v in GRAPH_FLAGS])
@pytest.mark.parametrize("name", MODELS[:-1])
def test_cuda_graph_flags_move_no_pool_for_other_models(sglang_answers, name, flag, value):
    """The CUDA-graph switches and per-phase backends are not refused for the other models: SGLang's own
    classes give the same pools with and without them (they move only the default mem_fraction_static and
    the profiled rest, i.e. available_bytes, which these models take as given), and glm-kv agrees."""
    assert graph_flag_problems(sglang_answers, name, flag, value) == ([], [])


@pytest.mark.parametrize("flag", ["cuda_graph_backend_decode", "cuda_graph_backend_prefill"])
def test_graph_backends_reach_sglang(sglang_ready, flag):
    """The oracle hands the backends to ServerArgs (not dropped on the way): a value outside its choices
    is refused there, so the equal pools above come from SGLang having read the flag."""
    ans = sglang_model_plan("deepseek-v3.2", {"gpu": "H200", "available_bytes": 60 * GiB, flag: "eager"})
    assert "errors" in ans and "eager" in ans["errors"]["message"], ans


def test_a_planted_graph_reservation_is_caught(sglang_answers, monkeypatch):
    """Planted error: glm-kv takes a 1 GiB decode-graph reservation out of available_bytes when a decode
    backend is given (SGLang does not: available_bytes is the rest after it). The inert check fails, naming
    the pool sizes, for a hybrid and an attention-only model."""
    import glm_kv.ledgers.plan as plan_module

    real = plan_module._capacity

    def reserving(args, tok, req, avail, source, rest_gib, *rest):
        if args.profile.cuda_graph_backend_decode in ("full", "breakable"):
            avail, rest_gib = avail - GiB, rest_gib - 1
        return real(args, tok, req, avail, source, rest_gib, *rest)

    monkeypatch.setattr(plan_module, "_capacity", reserving)
    for name, value in (("kimi-k3", "full"), ("deepseek-v3.2", "breakable")):
        moved, problems = graph_flag_problems(sglang_answers, name, "cuda_graph_backend_decode", value)
        assert moved == [] and any(p.startswith("max_total_num_tokens:") for p in problems), (name, problems)
    assert graph_flag_problems(sglang_answers, "kimi-k3", "cuda_graph_backend_decode", "disabled") == ([], [])


def ours_host(name: str, launch: dict, device_tokens: int, device_slots: int) -> dict:
    """glm-kv's HiCache host pools at the device sizes SGLang's host group was built over (W6)."""
    p = load_plan(make_profile({"model": name, **launch, "enable_hierarchical_cache": True, "hicache_ratio": 2.0}))
    h = host_ledger(p.layers, p.profile, p.token, p.request.state_slot_bytes, device_tokens, device_slots,
                    rules=p.args.rules)
    return {"entries": sorted(h.entries), "device_tokens": device_tokens, "device_slots": device_slots,
            "kv_host_tokens": h.kv_tokens, "kv_host_bytes_per_token": h.kv_bytes_per_token,
            "mamba_host_slots": h.mamba_slots, "mamba_host_slot_bytes": h.mamba_slot_bytes}


# HiCache lives on the radix tree: a radix-off launch is refused with it (test below), not sized
HYBRID_CASES = [(n, launch) for n, launch in CASES if n in ("kimi-k3", "qwen3.5-35b-a3b", "nemotron-3-super-120b-a12b-fp8")
                and not launch.get("disable_radix_cache")]


@pytest.mark.parametrize("name", MODELS)
def test_hicache_without_the_radix_cache_is_refused_for_every_model(sglang_ready, name):
    """SGLang 0.5.23 (arg_groups/kv_cache_hook.py): "The arguments enable-hierarchical-cache and
    disable-radix-cache are mutually exclusive", for every model; glm-kv refuses it naming the field
    (before issue 31 only GLM-5.3-Flash's path did)."""
    from glm_kv.errors import ProfileError

    why = sglang_server_args_refusal(name, "H200", tp_size=8, enable_hierarchical_cache=True,
                                     disable_radix_cache=True)
    assert why is not None and "mutually exclusive" in why, why
    with pytest.raises(ProfileError) as e:
        ours(name, {"gpu": "H200", "tp_size": 8, "enable_hierarchical_cache": True, "disable_radix_cache": True,
                    "available_bytes": 60 * GiB})
    assert e.value.field == "enable_hierarchical_cache"


@pytest.mark.parametrize("name, launch", HYBRID_CASES, ids=lambda v: v if isinstance(v, str) else
                         ",".join(f"{k}={x}" for k, x in v.items() if k != "available_bytes"))
def test_host_pools_agree_with_sglang(sglang_answers, name, launch):
    """HiCache's host pool group (build_hybrid_mamba_stack) for the hybrids, key by key."""
    theirs = _sglang(sglang_answers, name, launch)["host"]
    assert compare(ours_host(name, launch, theirs["device_tokens"], theirs["device_slots"]), theirs) == []


def test_deepseek_v32_anchor_through_sglang(sglang_answers):
    """Public anchor, sglang PR #11309 (2025-10-07): that PR's SGLang build booted DeepSeek-V3.2-Exp
    with `--tp 8 --dp 8 --enable-dp-attention` on 8 x B200 and logged 975,424 tokens in 43.67 GB
    (2**30 B) of KV, indexer included: 61 x (656 + 132) = 48,068 B per token. SGLang 0.5.23's own
    classes give the same cell size for that deployment, and so does glm-kv."""
    launch = ANCHOR_LAUNCH
    ans = _sglang(sglang_answers, "deepseek-v3.2", launch)
    assert ans["bytes_per_token"] == ours("deepseek-v3.2", launch)["bytes_per_token"] == 48_068
    assert round(975_424 * 48_068 / GiB, 2) == 43.67


def test_planted_error_is_named(sglang_answers, monkeypatch):
    """Planted error: the Mamba-2 spec's SSM state read as bf16 -> the comparison names the keys."""
    name, launch = CASES[4]
    assert name.startswith("nemotron")
    truth = _sglang(sglang_answers, name, launch)
    monkeypatch.setattr(layers_module.Mamba2State, "temporal_bytes",
                        property(lambda s: s.temporal_shape[0] * s.head_dim * s.state_size * 2))
    problems = compare(ours(name, launch), truth)
    assert any(p.startswith("bytes_per_slot:") for p in problems), problems
    assert any(p.startswith("measured_bytes_per_slot:") for p in problems), problems
    monkeypatch.undo()
    monkeypatch.setattr(layers_module.MlaKv, "bytes_per_token", property(lambda s: s.kv_cache_dim * s.item_bytes + 1))
    assert CASES[8][0] == "glm-5.1"
    problems = compare(ours("glm-5.1", CASES[8][1]), _sglang(sglang_answers, "glm-5.1", CASES[8][1]))
    assert any(p.startswith("bytes_per_token:") for p in problems), problems
    # a key only one side reports is named too
    assert compare({"a": 1}, {"b": 1}) == ["a: only glm-kv has it", "b: only SGLang has it"]


@pytest.mark.parametrize("name, launch", REFUSED, ids=lambda v: v if isinstance(v, str) else
                         ",".join(f"{k}={x}" for k, x in v.items()))
def test_refusals_agree_with_sglang(sglang_ready, name, launch):
    from glm_kv.errors import ProfileError

    theirs = sglang_model_plan(name, launch)
    assert "errors" in theirs, f"SGLang 0.5.23 accepts {name} {launch}"
    with pytest.raises(ProfileError):
        ours(name, {**launch, "available_bytes": 60 * GiB})


def _random_launch(rng) -> tuple[str, dict]:
    name = rng.choice(MODELS)
    launch = {"gpu": rng.choice(["H200", "B200"]), "tp_size": rng.choice([1, 2, 4, 8]),
              "available_bytes": rng.randrange(20, 120) * GiB}
    if rng.random() < 0.5:
        launch["kv_cache_dtype"] = rng.choice(["bfloat16", "fp8_e4m3"])
    if rng.random() < 0.3:
        launch["mamba_ssm_dtype"] = rng.choice(["float32", "bfloat16"])
    if rng.random() < 0.4:
        launch["max_running_requests"] = rng.choice([8, 64, 256, 1024])
    if rng.random() < 0.3:
        launch["page_size"] = rng.choice([1, 16, 32, 64, 128])
    if rng.random() < 0.2:
        launch["disable_overlap_schedule"] = True
    if rng.random() < 0.2 and launch["tp_size"] > 1:
        launch.update(dp_size=launch["tp_size"], enable_dp_attention=True)
    return name, launch


def test_random_launches_agree_with_sglang(sglang_ready):
    """Random launches (seed GLM_KV_SEED): accepted or refused alike, and every key equal."""
    import os
    import random

    from glm_kv.errors import ProfileError

    seed = int(os.environ["GLM_KV_SEED"])
    rng = random.Random(seed)
    for _ in range(4):
        name, launch = _random_launch(rng)
        theirs = sglang_model_plan(name, launch)
        try:
            mine = ours(name, launch)
        except ProfileError as e:
            assert "errors" in theirs, f"seed {seed}: glm-kv refuses {name} {launch} ({e}); SGLang accepts it"
            continue
        assert "errors" not in theirs, f"seed {seed}: SGLang refuses {name} {launch} ({theirs['errors']}); glm-kv accepts it"
        theirs = {k: v for k, v in theirs.items() if k not in ("host", "pool_classes")}
        assert compare(mine, theirs) == [], f"seed {seed}: {name} {launch}"
