"""Issue 20.2: ``--enable-linear-replayssm-spec`` (+ ``--linear-replayssm-cache-len``) and the CUDA-graph
switches (``--disable-cuda-graph``, ``--disable-decode-cuda-graph``, ``--disable-prefill-cuda-graph``)
against SGLang 0.5.23 on the CPU.

SGLang's side: oracle_memory.sglang_memory with the flags passed to ``ServerArgs`` as they are: its
resolution and default fraction (``reserve_for_graph_mb`` over the resolved ``cuda_graph_config``),
``_profile_available_bytes``, ``_handle_max_mamba_cache`` (the replay ring per KDA slot, no verify
scratch), ``config_from_budget`` and ``resolve_max_num_reqs``. The ring per slot is read off SGLang's
budget (what ``_handle_max_mamba_cache`` took beyond ``(K + 1) x mamba_cache_per_req``, over K + 1
slots) and, separately, measured from the tensors SGLang's own ``MambaPool`` allocates on the CPU
with the flag (a small pool: the ring is per slot).

glm-kv's side: ``make_profile`` -> ``compute_plan`` with the same pre-load memory and weights.
"""
from __future__ import annotations

import contextlib

import pytest

from glm_kv.errors import ProfileError

GiB = 1 << 30
EXTRA = ("enable_linear_replayssm_spec", "linear_replayssm_cache_len", "disable_cuda_graph",
         "disable_decode_cuda_graph", "disable_prefill_cuda_graph")

# (id, profile, pre-load free bytes, weights bytes incl. any MTP draft)
CASES = [
    ("h200-tp1-replay16", {"gpu": "H200", "tp_size": 1, "enable_linear_replayssm_spec": True}, 139 * GiB, 70 * GiB),
    ("h200-tp8-eagle-replay16", {"gpu": "H200", "tp_size": 8, "speculative_algorithm": "EAGLE",
                                 "max_running_requests": 64, "enable_linear_replayssm_spec": True},
     139 * GiB, 20 * GiB),
    ("b200-tp4-dpattn-eagle-replay8", {"gpu": "B200", "tp_size": 4, "dp_size": 4, "enable_dp_attention": True,
                                       "speculative_algorithm": "EAGLE", "max_running_requests": 64,
                                       "enable_linear_replayssm_spec": True, "linear_replayssm_cache_len": 8},
     176 * GiB, 40 * GiB),
    ("h200-tp2-mmc-replay32", {"gpu": "H200", "tp_size": 2, "speculative_algorithm": "EAGLE",
                               "max_running_requests": 32, "max_mamba_cache_size": 60,
                               "enable_linear_replayssm_spec": True, "linear_replayssm_cache_len": 32},
     139 * GiB, 40 * GiB),
    ("b300-tp8-radixoff-replay", {"gpu": "B300", "tp_size": 8, "disable_radix_cache": True,
                                  "max_running_requests": 16, "enable_linear_replayssm_spec": True},
     265 * GiB, 30 * GiB),
    ("h200-tp1-no-graphs", {"gpu": "H200", "tp_size": 1, "disable_cuda_graph": True}, 139 * GiB, 70 * GiB),
    ("b200-tp4-dpattn-no-decode-graph", {"gpu": "B200", "tp_size": 4, "dp_size": 4, "enable_dp_attention": True,
                                         "speculative_algorithm": "EAGLE", "max_running_requests": 64,
                                         "disable_decode_cuda_graph": True}, 176 * GiB, 40 * GiB),
    ("h200-tp8-no-prefill-graph", {"gpu": "H200", "tp_size": 8, "disable_prefill_cuda_graph": True},
     139 * GiB, 20 * GiB),
    ("h200-tp8-pd-decode-no-prefill-graph", {"gpu": "H200", "tp_size": 8, "disaggregation_mode": "decode",
                                            "max_running_requests": 64, "disable_prefill_cuda_graph": True},
     139 * GiB, 20 * GiB),
    ("b200-tp8-pd-prefill-no-decode-graph", {"gpu": "B200", "tp_size": 8, "disaggregation_mode": "prefill",
                                             "disable_decode_cuda_graph": True}, 176 * GiB, 20 * GiB),
]
KEYS = ("mem_fraction_static", "rest_bytes", "max_mamba_cache_size", "max_total_num_tokens", "max_running_requests",
        "ring_bytes_per_slot")


@contextlib.contextmanager
def passing_flags():
    """oracle_memory with the new flags handed to SGLang's ServerArgs as the profile gives them."""
    import oracle_memory

    real = oracle_memory.kwargs_for

    def kwargs(profile, raw):
        return {**real(profile, raw), **{k: profile[k] for k in EXTRA if profile.get(k) not in (None, False)}}

    oracle_memory.kwargs_for = kwargs
    try:
        yield oracle_memory
    finally:
        oracle_memory.kwargs_for = real


def sglang_side(profile: dict, pre: int, weights: int) -> dict:
    with passing_flags() as om:
        out = om.sglang_memory(dict(profile), {}, pre_model_load_bytes=pre, weights_bytes=weights)
    if "errors" in out:
        return out
    c = out["capacity"]
    K = c["max_mamba_cache_size"]
    # the pool's bytes per slot beyond the KDA state (oracle_memory: SGLang's replayssm_ring_bytes_per_req)
    ring = c["mamba_pool_bytes"] // (K + 1) - out["request"]["state_slot_bytes"]
    return {"mem_fraction_static": c["mem_fraction_static"], "rest_bytes": c["rest_bytes"],
            "max_mamba_cache_size": K, "max_total_num_tokens": c["max_total_num_tokens"],
            "max_running_requests": c["max_running_requests"], "ring_bytes_per_slot": ring,
            "_scratch": c["spec_scratch_bytes"]}


def glm_kv_side(profile: dict, pre: int, weights: int) -> dict:
    from glm_kv.inputs.profile import make_profile
    from glm_kv.ledgers.plan import compute_plan

    plan = compute_plan(make_profile({**profile, "pre_model_load_bytes": pre, "weights_bytes": weights,
                                      "draft_weights_bytes": 0}))
    c = plan.capacity
    return {"mem_fraction_static": plan.memory.mem_fraction_static, "rest_bytes": c.available_bytes,
            "max_mamba_cache_size": c.max_mamba_cache_size, "max_total_num_tokens": c.max_total_num_tokens,
            "max_running_requests": c.max_running_requests_per_worker,
            "ring_bytes_per_slot": plan.request.replayssm_ring_bytes_per_slot,
            "_scratch": c.spec_scratch_bytes}


def mismatches(ours: dict, theirs: dict) -> list[str]:
    bad = []
    for k in KEYS:
        o, t = ours[k], theirs[k]
        ok = abs(o - t) <= 1 if k == "rest_bytes" else o == t   # SGLang's rest is a float GiB
        if not ok:
            bad.append(f"{k}: glm-kv {o!r}, SGLang 0.5.23 {t!r}")
    return bad


def test_flags_agree_with_sglang(sglang_ready):
    bad = []
    for pid, prof, pre, w in CASES:
        theirs = sglang_side(prof, pre, w)
        assert "errors" not in theirs, (pid, theirs)
        ours = glm_kv_side(prof, pre, w)
        bad += [f"{pid}: {m}" for m in mismatches(ours, theirs)]
        if prof.get("enable_linear_replayssm_spec"):   # the ring replaces the verify scratch entirely
            # SGLang's budget beyond (K + 1) x (slot + its own ring per slot) is nothing: no scratch left
            assert theirs["_scratch"] == 0 and theirs["ring_bytes_per_slot"] > 0, pid
            assert ours["_scratch"] == 0, pid
    assert not bad, "\n".join(bad)


def test_the_flags_move_sglang_pools(sglang_ready):
    """Each case differs from the same profile without its flag (so the agreement above is not vacuous)."""
    for pid, prof, pre, w in CASES:
        plain = {k: v for k, v in prof.items() if k not in EXTRA}
        with_flag, without = sglang_side(prof, pre, w), sglang_side(plain, pre, w)
        if prof.get("disaggregation_mode") and not prof.get("enable_linear_replayssm_spec"):
            # the phase the server does not run: inert there, as glm-kv says too
            assert with_flag["mem_fraction_static"] == without["mem_fraction_static"], pid
            continue
        assert {k: with_flag[k] for k in KEYS} != {k: without[k] for k in KEYS}, pid


def mamba_pool_ring_bytes_per_slot(tp: int, length: int, draft_tokens: int | None) -> int:
    """The replay ring SGLang's MambaPool allocates per slot (CPU, a 3-slot pool), by its tensors."""
    import oracle_memory
    from sglang.srt.mem_cache.memory_pool import MambaPool

    prof = {"gpu": "H200", "tp_size": tp, "enable_linear_replayssm_spec": True, "linear_replayssm_cache_len": length}
    with passing_flags(), oracle_memory.cpu_as_gpu(oracle_memory.fake_gpu(prof)):
        r = oracle_memory.resolve_for_sizing(oracle_memory.shipped_config(), oracle_memory.kwargs_for(prof, {}))
        params = r.configurator().mambaish_config.mamba2_cache_params
        sizes = []
        for size in (2, 4):
            pool = MambaPool(size=size, spec_state_size=size, cache_params=params,
                             mamba_layer_ids=list(params.layers), device="cpu",
                             speculative_num_draft_tokens=draft_tokens, speculative_eagle_topk=1,
                             enable_linear_replayssm_spec=True, linear_replayssm_cache_len=length)
            st = pool.mamba_cache
            sizes.append(sum(t.numel() * t.element_size() for name in ("replayssm_d", "replayssm_k", "replayssm_g",
                                                                        "replayssm_rawv", "replayssm_rawk",
                                                                        "replayssm_beta")
                             if (t := getattr(st, name)) is not None))
            del pool, st
    return (sizes[1] - sizes[0]) // 2


@pytest.mark.parametrize("tp,length", [(8, 16), (4, 8), (8, 32)])
def test_ring_equals_what_mambapool_allocates(sglang_ready, tp, length):
    from glm_kv.inputs.model import load_model
    from glm_kv.ledgers.request import replayssm_ring_bytes

    m = load_model("glm-5.3-flash")
    ours = replayssm_ring_bytes((m.kda_num_heads // tp, m.kda_head_dim, m.kda_head_dim), m.num_linear_layers, length)
    assert ours == mamba_pool_ring_bytes_per_slot(tp, length, 4)


@pytest.mark.parametrize("length,draft,message", [(12, 4, "power of two"), (4, 4, "ring too small")])
def test_mambapool_refusals_are_refused_the_same_way(sglang_ready, length, draft, message):
    """MambaPool refuses a ring that is not a power of two, or shorter than 2 x draft tokens."""
    from glm_kv.inputs.profile import make_profile
    from glm_kv.ledgers.plan import compute_plan

    with pytest.raises(ValueError) as theirs:
        mamba_pool_ring_bytes_per_slot(8, length, draft)
    assert message in str(theirs.value)
    with pytest.raises(ProfileError) as ours:
        compute_plan(make_profile({"gpu": "H200", "tp_size": 8, "speculative_algorithm": "EAGLE",
                                   "speculative_num_steps": draft - 1, "speculative_eagle_topk": 1,
                                   "enable_linear_replayssm_spec": True,
                                   "linear_replayssm_cache_len": length, "available_bytes": 60 * GiB}))
    assert ours.value.field == "linear_replayssm_cache_len"
    assert str(theirs.value).split("(")[0].strip() in ours.value.rule, (str(theirs.value), ours.value.rule)


def test_a_planted_ring_error_is_caught(sglang_ready, monkeypatch):
    """The ring without its fp32 vector gate (a plausible slip): the comparison names the ring and K."""
    import glm_kv.ledgers.request as request

    real = request.replayssm_ring_bytes
    monkeypatch.setattr(request, "replayssm_ring_bytes",
                        lambda shape, layers, n: real(shape, layers, n) - shape[0] * n * shape[2] * 4 * layers)
    pid, prof, pre, w = CASES[0]
    bad = mismatches(glm_kv_side(prof, pre, w), sglang_side(prof, pre, w))
    assert any(b.startswith("ring_bytes_per_slot:") for b in bad), bad
    assert any(b.startswith("max_mamba_cache_size:") for b in bad), bad


def test_a_planted_scratch_kept_under_replay_is_caught(sglang_ready, monkeypatch):
    """Keeping the verify scratch beside the ring (the flag's point missed): K moves."""
    import glm_kv.inputs.resolve as resolve

    monkeypatch.setattr(resolve.ServerArgs, "verify_state_draft_tokens", property(lambda self: self.draft_tokens))
    pid, prof, pre, w = CASES[1]
    bad = mismatches(glm_kv_side(prof, pre, w), sglang_side(prof, pre, w))
    assert any(b.startswith("max_mamba_cache_size:") for b in bad), bad


def test_a_planted_graph_error_is_caught(sglang_ready, monkeypatch):
    """Dropping the DP-attention padding with the decode graph (it stays in SGLang): the fraction moves."""
    import glm_kv.ledgers.memory as memory

    real = memory.fraction_inputs

    def planted(p, *a, **k):
        f = real(p, *a, **k)
        return memory.FractionInputs(**{**f.__dict__, "attn_dp_size": 1 if f.decode_graph_disabled else f.attn_dp_size})

    monkeypatch.setattr(memory, "fraction_inputs", planted)
    pid, prof, pre, w = CASES[6]
    bad = mismatches(glm_kv_side(prof, pre, w), sglang_side(prof, pre, w))
    assert any(b.startswith("mem_fraction_static:") for b in bad), bad
