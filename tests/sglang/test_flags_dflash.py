"""Issue 20.2: ``--speculative-algorithm DFLASH`` with ``--speculative-draft-model-path``, against SGLang 0.5.23.

SGLang's side, on the CPU (oracle_memory.sglang_memory, its named workarounds), with one change: the
``KVCacheConfigurator`` gets the speculative aux config from SGLang's own
``resolve_spec_aux_hidden_state_config`` (which reads the draft's config.json through
``ModelConfig.from_server_args(..., is_draft_model=True)`` and ``parse_dflash_draft_config``), not the
EAGLE stand-in oracle.py builds. Everything else is SGLang's: ``_handle_dflash`` (draft tokens from
block_size, the 48 default, its refusals), ``resolve_dflash_draft_cell_size`` (draft KV bytes per
token), ``create_memory_pool_configurator(...)._cell_size`` (target + draft cell),
``_handle_max_mamba_cache`` (verify scratch), ``config_from_budget`` / ``resolve_max_num_reqs`` and the
"capped" log line; the draft worker's own device pool is SGLang's ``MHATokenToKVPool`` built on the CPU
with the draft's per-rank geometry (small, on the CPU).

glm-kv's side: ``make_profile`` -> ``compute_plan`` with the same two measured inputs (pre-load free
memory and weights incl. the draft) and nothing else.

W9 EINOPS: ``sglang.srt.speculative.dflash_utils`` imports ``einops`` through ``managers.utils`` ->
``eplb.expert_distribution`` at module level only; the sizing path never calls it. When the package
is missing from .venv-sglang an empty module stands in (no formula reads it).
"""
from __future__ import annotations

import contextlib
import json
import sys
import types

import pytest

from glm_kv.errors import ProfileError

GiB = 1 << 30

# A DFlash draft for GLM-5.3-Flash in the layout SGLang reads (Qwen3-style decoder, dflash_config):
# 5 layers, 8 KV heads of 128 (the published DFlash2 drafter's block: D = 5, sglang #36889).
DRAFT = {"architectures": ["DFlashDraftModel"], "model_type": "qwen3", "hidden_size": 4096,
         "num_hidden_layers": 5, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
         "intermediate_size": 12288, "vocab_size": 154880, "max_position_embeddings": 1048576,
         "rms_norm_eps": 1e-6, "rope_theta": 1000000, "torch_dtype": "bfloat16", "num_target_layers": 45,
         "dflash_config": {"block_size": 5, "mask_token_id": 154856}}


def write_draft(tmp_path, name="draft", **over) -> str:
    cfg = {**DRAFT, **over}
    if over.get("dflash_config", 0) is None:
        cfg.pop("dflash_config")
    d = tmp_path / name
    d.mkdir()
    (d / "config.json").write_text(json.dumps(cfg))
    return str(d)


def nvfp4_model(tmp_path) -> str:
    """The shipped config with the NVFP4 (modelopt) checkpoint's quantization, as on 2 x GB10."""
    from glm_kv.inputs.model import PACKAGE_DIR

    cfg = json.loads((PACKAGE_DIR / "data" / "glm-5.3-flash.json").read_text())
    cfg = {k: v for k, v in cfg.items() if not k.startswith("_")}
    cfg["quantization_config"] = {"quant_method": "modelopt", "quant_algo": "NVFP4"}
    d = tmp_path / "glm-5.3-flash-nvfp4"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(cfg))
    return str(d)


# ----------------------------------------------------------------------------- SGLang's side

SPEC_KWARGS = ("speculative_draft_model_path", "speculative_dflash_block_size", "speculative_draft_window_size",
               "speculative_dspark_block_size")
SGLANG_ONLY = "_sglang"   # a profile key holding ServerArgs kwargs glm-kv has no field for (DSPARK planner flags)


@contextlib.contextmanager
def dflash_oracle(sm: int, seen: dict):
    """oracle_memory with SGLang's own speculative aux config, the DFLASH flags passed through, and
    the wheel's platform facts for the SM (test_gpu_defaults.platform_facts)."""
    sys.modules.setdefault("einops", types.ModuleType("einops"))   # W9
    import oracle_memory
    from sglang.srt.mem_cache.kv_cache_configurator import KVCacheConfigurator
    from sglang.srt.model_executor.model_runner_components.layer_setup import ModelLayerInfo
    from sglang.srt.model_executor.model_runner_components.spec_aux_hidden_state import (
        resolve_spec_aux_hidden_state_config)
    from sglang.srt.model_executor.pool_configurator import create_memory_pool_configurator
    from sglang.srt.runtime_context import override_platform
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm
    from test_gpu_defaults import platform_facts

    real_resolve, real_kwargs = oracle_memory.resolve_for_sizing, oracle_memory.kwargs_for

    def resolve(config, kwargs):
        r = real_resolve(config, kwargs)
        spec = SpeculativeAlgorithm.from_string(r.v.speculative_algorithm)
        aux = resolve_spec_aux_hidden_state_config(server_args=r.sa, model_config=r.mc, spec_algorithm=spec,
                                                   is_draft_worker=False)
        n = r.mc.num_hidden_layers

        def configurator(device="cpu", layers=None):
            start, end = layers or (0, n)
            kvc = KVCacheConfigurator(
                device=device, gpu_id=0, attn_dp_size=r.par.attn_dp_size, pp_size=1, pp_group=None, model=None,
                model_config=r.mc, server_args=r.sa, kv_cache_dtype=r.kv_dtype,
                kv_cache_dtype_str=r.v.kv_cache_dtype, model_dtype=__import__("torch").bfloat16,
                page_size=r.v.page_size, sliding_window_size=None, spec_algorithm=spec, is_draft_worker=False,
                post_capture_kv_active=False, spec_aux_config=aux, is_hybrid_swa=False,
                is_hybrid_swa_compress=False, use_mla_backend=True,
                layer_info=ModelLayerInfo(start_layer=start, end_layer=end, num_effective_layers=end - start),
                forward_stream=None, req_to_token_pool=None, token_to_kv_pool_allocator=None,
                memory_pool_config=None)
            if "cell_size" not in seen:
                seen.update(cell_size=create_memory_pool_configurator(kvc)._cell_size,
                            draft_cell=kvc.dflash_draft_cell_size_per_token,
                            draft_layers=aux.dflash_draft_num_layers, draft_tp=kvc.draft_attn_tp_size,
                            draft_tokens=r.v.speculative_num_draft_tokens,
                            max_running_requests=r.v.max_running_requests,
                            draft_backend=r.v.speculative_draft_attention_backend,
                            draft_config=aux.draft_model_config, target_kv_dtype=r.kv_dtype)
            return kvc

        r.configurator = configurator
        return r

    def kwargs(profile, raw):
        kw = real_kwargs(profile, raw)
        kw.update({k: profile[k] for k in SPEC_KWARGS if profile.get(k) is not None})
        kw.update(profile.get(SGLANG_ONLY) or {})
        return kw

    cap = (sm // 10, sm % 10)
    oracle_memory.resolve_for_sizing, oracle_memory.kwargs_for = resolve, kwargs
    try:
        with override_platform(device_sm=sm, device_capability=cap, **platform_facts(sm)):
            yield oracle_memory
    finally:
        oracle_memory.resolve_for_sizing, oracle_memory.kwargs_for = real_resolve, real_kwargs


def draft_pool_bytes_per_token(seen: dict, tokens: int = 512) -> int:
    """The draft worker's own KV pool: SGLang's MHATokenToKVPool on the CPU (two small sizes, W6), in
    the KV dtype SGLang resolved for the target (the draft worker keeps it off the fa4 backend)."""
    from sglang.srt.mem_cache.memory_pool import MHATokenToKVPool

    dm = seen["draft_config"]
    dtype = seen["target_kv_dtype"]
    sizes = []
    for n in (tokens, 2 * tokens):
        pool = MHATokenToKVPool(n, 256, dtype, dm.get_num_kv_heads(seen["draft_tp"]), dm.head_dim,
                                seen["draft_layers"], "cpu", False, v_head_dim=dm.v_head_dim,
                                enable_alt_stream=False)
        sizes.append(sum(t.numel() * t.element_size() for t in [*pool.k_buffer, *pool.v_buffer]))
    return (sizes[1] - sizes[0]) // tokens


def sglang_dflash(profile: dict, pre: int, weights: int) -> dict:
    from cpu_workarounds import GPU_FACTS, gpu_memory_bytes

    name = profile.get("gpu", "H200")   # the suite's GPU table, never glm-kv's gpus.json
    sm = GPU_FACTS[name]["sm"]
    sg = {**profile, "memory_bytes": gpu_memory_bytes(name), "sm": sm}
    seen: dict = {}
    with dflash_oracle(sm, seen) as om:
        out = om.sglang_memory(sg, {}, pre_model_load_bytes=pre, weights_bytes=weights,
                               config=json.loads((__import__("pathlib").Path(profile["model"]) / "config.json")
                                                 .read_text()) if profile.get("model") else None)
    if "errors" in out:
        return out
    cap = out["capacity"]
    capped = [m for m in out["log"] if m.startswith("max_running_requests is capped")]
    res = {"draft_tokens": seen["draft_tokens"], "max_running_requests_resolved": seen["max_running_requests"],
           "draft_kv_bytes_per_token": seen["draft_cell"], "cell_size_bytes": seen["cell_size"],
           "mem_fraction_static": cap["mem_fraction_static"], "rest_bytes": cap["rest_bytes"],
           "max_mamba_cache_size": cap["max_mamba_cache_size"], "spec_scratch_bytes": cap["spec_scratch_bytes"],
           "max_total_num_tokens": cap["max_total_num_tokens"], "max_running_requests": cap["max_running_requests"],
           "capped_message": capped[0].split(". ")[0].rstrip(".") if capped else None}
    res["draft_pool_bytes_per_token"] = draft_pool_bytes_per_token(seen)
    return res


# ----------------------------------------------------------------------------- glm-kv's side

def glm_kv_dflash(profile: dict, pre: int, weights: int) -> dict:
    from glm_kv.inputs.profile import make_profile
    from glm_kv.ledgers.plan import compute_plan

    p = make_profile({k: v for k, v in profile.items() if not k.startswith("_")}
                     | {"pre_model_load_bytes": pre, "weights_bytes": weights, "draft_weights_bytes": 0})
    plan = compute_plan(p)
    cap, tok = plan.capacity, plan.token
    return {"draft_tokens": plan.draft_tokens, "max_running_requests_resolved": plan.args.max_running_requests_global,
            "draft_kv_bytes_per_token": tok.dflash_draft_bytes_per_token, "cell_size_bytes": tok.cell_size_bytes,
            "mem_fraction_static": plan.memory.mem_fraction_static, "rest_bytes": cap.available_bytes,
            "max_mamba_cache_size": cap.max_mamba_cache_size, "spec_scratch_bytes": cap.spec_scratch_bytes,
            "max_total_num_tokens": cap.max_total_num_tokens,
            "max_running_requests": cap.max_running_requests_per_worker, "capped_message": cap.capped_message,
            "draft_pool_bytes_per_token": tok.dflash_draft_bytes_per_token}


def mismatches(ours: dict, theirs: dict) -> list[str]:
    bad = []
    for k, v in theirs.items():
        o = ours[k]
        if k == "rest_bytes":   # SGLang's rest is a float GiB: one byte of rounding either way
            ok = abs(o - v) <= 1
        elif k == "spec_scratch_bytes":
            ok = abs(o - v) <= 2
        else:
            ok = o == v
        if not ok:
            bad.append(f"{k}: glm-kv {o!r}, SGLang 0.5.23 {v!r}")
    return bad


# ----------------------------------------------------------------------------- profiles

def profiles(tmp_path) -> list[tuple[str, dict, int, int]]:
    """(id, profile, pre-load free bytes, weights incl. draft) - several GPUs, TPs, block sources."""
    d5 = write_draft(tmp_path)                                            # block_size 5 in dflash_config
    d_none = write_draft(tmp_path, "draft-noblock", dflash_config=None)   # no block_size: SGLang's 16
    d_top = write_draft(tmp_path, "draft-top", dflash_config=None, block_size=8, num_key_value_heads=2)
    dfl = {"speculative_algorithm": "DFLASH"}
    return [
        ("h200-tp8-block-from-config", {**dfl, "gpu": "H200", "tp_size": 8, "speculative_draft_model_path": d5,
                                        "_kv_dtype": "bfloat16"}, 140 * GiB, 40 * GiB),
        ("h200-tp1-default-16-mmcs", {**dfl, "gpu": "H200", "tp_size": 1, "speculative_draft_model_path": d_none,
                                      "max_running_requests": 16, "max_mamba_cache_size": 60,
                                      "_kv_dtype": "bfloat16"}, 140 * GiB, 75 * GiB),
        ("b200-tp4-flag-block-bf16", {**dfl, "gpu": "B200", "tp_size": 4, "speculative_draft_model_path": d_top,
                                      "speculative_dflash_block_size": 8, "kv_cache_dtype": "bfloat16",
                                      "max_running_requests": 32, "_kv_dtype": "bfloat16"}, 178 * GiB, 60 * GiB),
        ("b300-tp8-top-level-block", {**dfl, "gpu": "B300", "tp_size": 8, "speculative_draft_model_path": d_top,
                                      "speculative_num_draft_tokens": 8, "_kv_dtype": "fp8_e4m3"},
         265 * GiB, 30 * GiB),
        ("rtxpro6000-tp4", {**dfl, "gpu": "RTX PRO 6000", "tp_size": 4, "speculative_draft_model_path": d5,
                            "max_running_requests": 8, "_kv_dtype": "fp8_e4m3"}, 94 * GiB, 50 * GiB),
    ]


@pytest.fixture
def cases(tmp_path):
    return profiles(tmp_path)


def test_dflash_agrees_with_sglang(sglang_ready, cases):
    bad = []
    for pid, prof, pre, w in cases:
        theirs = sglang_dflash(prof, pre, w)
        assert "errors" not in theirs, (pid, theirs)
        bad += [f"{pid}: {m}" for m in mismatches(glm_kv_dflash(prof, pre, w), theirs)]
    assert not bad, "\n".join(bad)


def test_a_planted_draft_cell_error_is_caught(sglang_ready, cases, monkeypatch):
    """Count the draft's K only (head_dim, not head_dim + v_head_dim): the comparison names it."""
    import glm_kv.inputs.draft as draft
    import glm_kv.inputs.resolve as resolve

    monkeypatch.setattr(resolve, "draft_kv_bytes_per_token",
                        lambda d, tp, item: draft.kv_heads_per_rank(d, tp) * d.head_dim * d.num_layers * item)
    pid, prof, pre, w = cases[0]
    bad = mismatches(glm_kv_dflash(prof, pre, w), sglang_dflash(prof, pre, w))
    assert any(b.startswith("draft_kv_bytes_per_token:") for b in bad), bad
    assert any(b.startswith("cell_size_bytes:") for b in bad), bad


def test_a_planted_block_default_is_caught(sglang_ready, cases, monkeypatch):
    """EAGLE's 4 draft tokens instead of DFLASH's block size: draft tokens and the scratch move."""
    import glm_kv.inputs.resolve as resolve

    monkeypatch.setattr(resolve, "DFLASH_DEFAULT_BLOCK_SIZE", 4)
    pid, prof, pre, w = cases[1]
    bad = mismatches(glm_kv_dflash(prof, pre, w), sglang_dflash(prof, pre, w))
    assert any(b.startswith("draft_tokens:") for b in bad), bad


# ----------------------------------------------------------------------------- refusals

def refusals(tmp_path) -> list[tuple[str, dict]]:
    d5 = write_draft(tmp_path)
    dfl = {"speculative_algorithm": "DFLASH", "gpu": "H200", "tp_size": 8}
    return [
        ("no-draft-path", {**dfl}),
        ("block-vs-draft-tokens", {**dfl, "speculative_draft_model_path": d5, "speculative_dflash_block_size": 6,
                                   "speculative_num_draft_tokens": 5}),
        ("window-below-block", {**dfl, "speculative_draft_model_path": d5, "speculative_draft_window_size": 3}),
        ("dp-attention-no-lm-head", {**dfl, "speculative_draft_model_path": d5, "dp_size": 8,
                                     "enable_dp_attention": True}),
    ]


def test_sglang_refusals_are_refused_the_same_way(sglang_ready, tmp_path):
    from glm_kv.inputs.profile import make_profile
    from glm_kv.ledgers.plan import compute_plan

    for pid, prof in refusals(tmp_path):
        theirs = sglang_dflash(prof, 140 * GiB, 40 * GiB)
        assert "errors" in theirs, (pid, theirs)
        with pytest.raises(ProfileError) as e:
            compute_plan(make_profile({**prof, "pre_model_load_bytes": 140 * GiB, "weights_bytes": 40 * GiB}))
        # the same reason in SGLang's words (its first clause)
        head = theirs["errors"]["message"].split(".")[0].split(";")[0].replace("--", "")[:40]
        assert head.lower() in e.value.rule.replace("--", "").lower(), (pid, head, e.value.rule)


def test_a_draft_window_sglang_takes_is_refused_by_name(tmp_path):
    """--speculative-draft-window-size >= block: SGLang starts, with a private draft req->token table
    glm-kv does not count, so glm-kv refuses it naming the flag (issue 20: no silent acceptance)."""
    from glm_kv.inputs.profile import make_profile
    from glm_kv.ledgers.plan import compute_plan

    prof = {"speculative_algorithm": "DFLASH", "gpu": "H200", "tp_size": 8, "weights_bytes": 40 * GiB,
            "speculative_draft_model_path": write_draft(tmp_path), "speculative_draft_window_size": 64}
    with pytest.raises(ProfileError) as e:
        compute_plan(make_profile(prof))
    assert e.value.field == "speculative_draft_window_size" and "not modelled" in e.value.rule
    compute_plan(make_profile({k: v for k, v in prof.items() if k != "speculative_draft_window_size"}))


def test_unreadable_draft_path_is_named(tmp_path):
    from glm_kv.inputs.profile import make_profile
    from glm_kv.ledgers.plan import compute_plan

    with pytest.raises(ProfileError) as e:
        compute_plan(make_profile({"speculative_algorithm": "DFLASH", "weights_bytes": 40 * GiB,
                                   "speculative_draft_model_path": str(tmp_path / "nowhere")}))
    assert e.value.field == "speculative_draft_model_path" and "nowhere" in e.value.rule


# ----------------------------------------------------------------------------- sglang #36889 (2 x GB10)

GB10_WEIGHTS_BYTES = 20 * GiB   # per rank, NVFP4 target + DFlash draft at TP 2: the suite's own round input


def test_gb10_dflash_reproduction(sglang_ready, tmp_path):
    """A REPRODUCTION of sglang #36889's line, not an anchor (and not in the agreement count):
    2 x GB10, TP 2, NVFP4 target + DFlash draft (D = 5), --max-running-requests 8; SGLang logged
    "max_running_requests is capped to 2 by the mamba state cache (max_mamba_cache_size=10, 5 state
    slots per request)".

    The issue's boot log is not public beyond that line (no free memory, no weights), so the
    reproduction chooses its inputs: the weights are this suite's round figure (GB10_WEIGHTS_BYTES,
    never glm-kv's estimate), the GPU comes from this suite's table, and the pre-load reading is
    the largest at which SGLang 0.5.23's own sizing gives 10 slots (a bisection over SGLang alone).
    So "10 slots" holds by construction; what is tested is that at those inputs glm-kv prints
    SGLang's line and agrees with SGLang on every pool. (The issue reads the 5 slots as 1 + D; in
    the wheel ``_calculate_mamba_ratio`` gives 5 for extra_buffer with overlap whatever D is: D = 5
    moves the verify scratch, not the slots per request. The wheel wins.)
    """
    from cpu_workarounds import gpu_memory_bytes

    from glm_kv.inputs.launch import parse_launch_command

    model, draft = nvfp4_model(tmp_path), write_draft(tmp_path)
    cmd = (f"python -m sglang.launch_server --model-path {model} --tp-size 2 --speculative-algorithm DFLASH "
           f"--speculative-draft-model-path {draft} --max-running-requests 8")
    fields, inert = parse_launch_command(cmd, layout="0.5.23")
    prof = {**fields, "gpu": "GB10", "_kv_dtype": "fp8_e4m3"}
    weights = GB10_WEIGHTS_BYTES
    lo, hi = weights // (1 << 20), gpu_memory_bytes("GB10") // (1 << 20)
    while lo < hi:                      # smallest pre-load MiB with K > 10, by SGLang's sizing only
        mid = (lo + hi) // 2
        got = sglang_dflash(prof, mid << 20, weights)
        if "errors" not in got and got["max_mamba_cache_size"] > 10:
            hi = mid
        else:
            lo = mid + 1
    pre = (lo - 1) << 20                # one MiB less: the largest reading at which SGLang sizes 10 slots
    theirs = sglang_dflash(prof, pre, weights)
    assert theirs["max_mamba_cache_size"] == 10, theirs   # the bisection found the reading (by construction)
    assert theirs["capped_message"] == ("max_running_requests is capped to 2 by the mamba state cache "
                                        "(max_mamba_cache_size=10, 5 state slots per request)"), theirs
    ours = glm_kv_dflash(prof, pre, weights)
    assert not mismatches(ours, theirs), mismatches(ours, theirs)
    assert ours["capped_message"] == theirs["capped_message"]
