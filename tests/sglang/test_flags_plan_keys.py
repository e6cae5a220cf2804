"""Issue 30 items 1 and 8, against SGLang 0.5.23's own classes.

* ``memory.mem_fraction_static`` (+ ``_source``) is in every plan, weights or not: SGLang resolves the
  fraction at launch (``ServerArgs.resolve_once``, arg_groups/memory_hook.py) before any weights load.
  Compared with ``oracle_memory.sglang_memory``'s ``resolved.mem_fraction_static`` on launches that give
  no weights (so glm-kv computes no capacity).
* ``request.spec_scratch_bytes_per_request``: the speculative verify scratch one request reserves
  (``KVCacheConfigurator._handle_max_mamba_cache``: mamba_cache_per_req x speculative_num_draft_tokens,
  none with ReplaySSM or on a PD prefill server). SGLang's side: its ``_handle_max_mamba_cache`` run with an
  explicit ``max_mamba_cache_size`` at two request caps; the scratch it takes grows by exactly the per-request
  amount per extra request (capped_reqs), so the difference over the request difference is SGLang's number.
* planted errors: a fraction off by 0.001, a scratch counted with one draft token too many, and a scratch
  left in under ReplaySSM each fail these comparisons.
"""
from __future__ import annotations

import contextlib

import pytest

GiB = 1 << 30
L = {"sglang_layout": "0.5.23"}

NO_WEIGHTS = [
    ("h200-tp1", {"gpu": "H200", "tp_size": 1}),
    ("b200-tp4-dpattn-mtp", {"gpu": "B200", "tp_size": 4, "dp_size": 4, "enable_dp_attention": True,
                             "speculative_algorithm": "EAGLE", "max_running_requests": 64}),
    ("h200-tp8-decode-graph64", {"gpu": "H200", "tp_size": 8, "disaggregation_mode": "decode",
                                 "cuda_graph_max_bs_decode": 64}),
    ("h100-tp8-chunk4096", {"gpu": "H100", "tp_size": 8, "chunked_prefill_size": 4096,
                            "max_running_requests": 128}),
    ("b200-tp8-deepep-prefill", {"gpu": "B200", "tp_size": 8, "moe_a2a_backend": "deepep",
                                 "disaggregation_mode": "prefill"}),
    ("h200-tp2-given", {"gpu": "H200", "tp_size": 2, "mem_fraction_static": 0.8}),
]

# (id, profile, (request caps), attn_dp): the scratch difference between the caps, per request
SCRATCH = [
    ("h200-tp1-eagle", {"gpu": "H200", "tp_size": 1, "speculative_algorithm": "EAGLE"}, (8, 16), 1),
    ("h200-tp1-eagle-4draft", {"gpu": "H200", "tp_size": 1, "speculative_algorithm": "EAGLE",
                               "speculative_num_steps": 3, "speculative_eagle_topk": 1,
                               "speculative_num_draft_tokens": 4}, (8, 16), 1),
    ("h200-tp2-eagle", {"gpu": "H200", "tp_size": 2, "speculative_algorithm": "EAGLE"}, (4, 12), 1),
    ("b200-tp4-dpattn-eagle", {"gpu": "B200", "tp_size": 4, "dp_size": 4, "enable_dp_attention": True,
                               "speculative_algorithm": "EAGLE"}, (32, 56), 4),
    ("h200-tp1-no-spec", {"gpu": "H200", "tp_size": 1}, (8, 16), 1),
    ("h200-tp1-eagle-replayssm", {"gpu": "H200", "tp_size": 1, "speculative_algorithm": "EAGLE",
                                  "enable_linear_replayssm_spec": True}, (8, 16), 1),
    ("h200-tp2-eagle-pd-prefill", {"gpu": "H200", "tp_size": 2, "speculative_algorithm": "EAGLE",
                                   "disaggregation_mode": "prefill"}, (8, 16), 1),
]
EXTRA = ("enable_linear_replayssm_spec",)


def _ours(raw: dict) -> dict:
    from compare_memory import engine

    plan, d = engine({**L, **raw})
    assert plan is not None, d
    return d


@contextlib.contextmanager
def _passing_extra():
    import oracle_memory

    real = oracle_memory.kwargs_for
    oracle_memory.kwargs_for = lambda profile, raw: {**real(profile, raw),
                                                    **{k: profile[k] for k in EXTRA if profile.get(k)}}
    try:
        yield oracle_memory
    finally:
        oracle_memory.kwargs_for = real


def fraction_mismatch(raw: dict) -> list:
    from oracle_memory import sglang_memory

    d = _ours(raw)
    sg = sglang_memory(dict(raw), dict(raw), pre_model_load_bytes=None, weights_bytes=None)
    assert "errors" not in sg, sg
    src = "profile" if "mem_fraction_static" in raw else "default"
    ours = (d["memory"]["mem_fraction_static"], d["memory"]["mem_fraction_static_source"])
    return [] if ours == (sg["resolved"]["mem_fraction_static"], src) else [ours, sg["resolved"]]


@pytest.mark.parametrize("pid,raw", NO_WEIGHTS, ids=[c[0] for c in NO_WEIGHTS])
def test_fraction_printed_without_weights_is_sglangs(sglang_ready, pid, raw):
    d = _ours(raw)
    assert "capacity" not in d   # no weights, no available_bytes: no capacity, and the fraction is still there
    assert fraction_mismatch(raw) == [], pid


def test_planted_fraction_error_fails(sglang_ready, monkeypatch):
    import glm_kv.ledgers.memory as memory

    real = memory.fraction_from_inputs
    monkeypatch.setattr(memory, "fraction_from_inputs", lambda f: real(f) + 0.001)
    assert fraction_mismatch(NO_WEIGHTS[0][1]) != []


def sglang_scratch_per_request(raw: dict, caps: tuple[int, int], attn_dp: int) -> int:
    """SGLang's verify scratch per request: its _handle_max_mamba_cache at two request caps."""
    taken = []
    with _passing_extra() as om:
        for cap in caps:
            prof = {**raw, "max_running_requests": cap, "max_mamba_cache_size": 300,
                    "available_bytes": 100 * GiB}
            sg = om.sglang_memory(prof, prof, pre_model_load_bytes=None, weights_bytes=None)
            assert "errors" not in sg, sg
            taken.append(sg["capacity"]["spec_scratch_bytes"])
    extra_requests = (caps[1] - caps[0]) // attn_dp
    return round((taken[1] - taken[0]) / extra_requests)


@pytest.mark.parametrize("pid,raw,caps,attn_dp", SCRATCH, ids=[c[0] for c in SCRATCH])
def test_spec_scratch_per_request_is_sglangs(sglang_ready, pid, raw, caps, attn_dp):
    ours = _ours({**raw, "max_running_requests": caps[0]})["request"]["spec_scratch_bytes_per_request"]
    assert ours == sglang_scratch_per_request(raw, caps, attn_dp), pid
    if raw.get("speculative_algorithm") and not raw.get("enable_linear_replayssm_spec") \
            and raw.get("disaggregation_mode") != "prefill":
        assert ours > 0, pid   # the comparison is not 0 == 0 where SGLang reserves scratch


def test_planted_scratch_errors_fail(sglang_ready, monkeypatch):
    from glm_kv.inputs.resolve import ServerArgs

    pid, raw, caps, attn_dp = SCRATCH[0]
    theirs = sglang_scratch_per_request(raw, caps, attn_dp)
    real = ServerArgs.verify_state_draft_tokens
    monkeypatch.setattr(ServerArgs, "verify_state_draft_tokens", property(lambda s: real.fget(s) + 1))
    assert _ours({**raw, "max_running_requests": caps[0]})["request"]["spec_scratch_bytes_per_request"] != theirs
    # the ReplaySSM exception forgotten: the scratch counted as without the ring
    monkeypatch.setattr(ServerArgs, "verify_state_draft_tokens", property(lambda s: s.draft_tokens))
    pid, raw, caps, attn_dp = SCRATCH[5]
    assert _ours({**raw, "max_running_requests": caps[0]})["request"]["spec_scratch_bytes_per_request"] \
        != sglang_scratch_per_request(raw, caps, attn_dp)
