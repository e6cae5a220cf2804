"""Issue 30 item 5: a PD decode server's extra request slots, against SGLang 0.5.23's own classes.

SGLang: ``handle_pd_disaggregation`` (arg_groups/pd_disaggregation_hook.py) defaults
``disaggregation_decode_extra_slots`` to 2 x the per-worker cap when ``--max-running-requests`` is given
and its per-worker share is <= 32 (else 0; none when the cap is automatic), and
``KVCacheConfigurator._build_req_to_token_pool`` gives the decode server a ``HybridMambaDecodeReqToTokenPool``
whose ``req_to_token`` has ``size + pre_alloc_size + 1`` rows; the DSA pool's compress tail has one row more.

SGLang's side is the oracle (tests/sglang/oracle.py ``sglang_plan``): its resolution pipeline, then the
decode request pool and the DSA KV pool built through SGLang's own configurator, the tail rows read off
``_compress_tail_k``. glm-kv's side is its plan (``tail.rows``, ``tail.bytes``) and its resolved
``decode_extra_slots`` (compared with the ``req_to_token`` rows SGLang's decode pool adds). Caps on both
sides of 32 per worker, one worker and four attention-DP workers, automatic cap, prefill and co-located
servers. Planted error: the old rule (decode adds nothing beyond the usual 2 rows) fails the comparison.
"""
from __future__ import annotations

import contextlib

import pytest

L = {"sglang_layout": "0.5.23"}

# (id, launch as the user wrote it): per-worker caps 8, 32 (the edge), 33 and 64, with DP attention
# splitting 64 and 160 into 16 and 40 per worker
CASES = [
    ("decode-8", {"gpu": "H200", "tp_size": 2, "disaggregation_mode": "decode", "max_running_requests": 8}),
    ("decode-32", {"gpu": "H200", "tp_size": 2, "disaggregation_mode": "decode", "max_running_requests": 32}),
    ("decode-33", {"gpu": "H200", "tp_size": 2, "disaggregation_mode": "decode", "max_running_requests": 33}),
    ("decode-64", {"gpu": "H200", "tp_size": 2, "disaggregation_mode": "decode", "max_running_requests": 64}),
    ("decode-dpattn-64", {"gpu": "B200", "tp_size": 4, "dp_size": 4, "enable_dp_attention": True,
                          "disaggregation_mode": "decode", "max_running_requests": 64}),
    ("decode-dpattn-160", {"gpu": "B200", "tp_size": 4, "dp_size": 4, "enable_dp_attention": True,
                           "disaggregation_mode": "decode", "max_running_requests": 160}),
    ("decode-replicas-64", {"gpu": "H200", "tp_size": 2, "dp_size": 2, "disaggregation_mode": "decode",
                            "max_running_requests": 64}),
    ("decode-mtp-16", {"gpu": "H200", "tp_size": 2, "disaggregation_mode": "decode", "max_running_requests": 16,
                       "speculative_algorithm": "EAGLE"}),
    ("prefill-8", {"gpu": "H200", "tp_size": 2, "disaggregation_mode": "prefill", "max_running_requests": 8}),
    ("colocated-8", {"gpu": "H200", "tp_size": 2, "max_running_requests": 8}),
]


def _ours(raw: dict):
    from compare_memory import engine

    plan, d = engine({**L, **raw})
    assert plan is not None, d
    return plan, d


@contextlib.contextmanager
def _passing_mode():
    """oracle.py's ServerArgs kwargs plus ``--disaggregation-mode`` (oracle_memory.kwargs_for's rule)."""
    import oracle

    real = oracle.server_args_kwargs

    def kwargs(profile: dict) -> dict:
        kw = real(profile)
        if profile.get("disaggregation_mode") not in (None, "null"):
            kw["disaggregation_mode"] = profile["disaggregation_mode"]
        return kw

    oracle.server_args_kwargs = kwargs
    try:
        yield oracle
    finally:
        oracle.server_args_kwargs = real


def sglang_pools(raw: dict) -> dict:
    """SGLang's decode pools at the launch's own per-worker cap, on the meta device (shapes only, no
    memory): its resolution pipeline (``oracle.resolve_for_sizing``), its per-worker cap
    (``oracle.max_running_requests_per_worker``), then ``KVCacheConfigurator._build_req_to_token_pool``
    and ``_build_token_to_kv_pool`` as the model runner calls them. Returns the ``req_to_token`` rows,
    the compress tail's rows and bytes (both tensors, every layer) and the resolved extra slots."""
    from cpu_workarounds import cpu_as_gpu, quiet_sglang_logs
    from sglang.srt.mem_cache.kv_cache_configurator import _PoolSizes
    from sglang.srt.runtime_context import get_disagg

    quiet_sglang_logs()
    with _passing_mode() as oracle, cpu_as_gpu(oracle.fake_gpu(raw)):
        r = oracle.resolve_for_sizing(oracle.shipped_config(), oracle.server_args_kwargs({**L, **raw}))
        per_worker = oracle.max_running_requests_per_worker(r.configurator(), r.v.max_running_requests)
        if per_worker is None:   # automatic: the capacity sizes it later; any count shows the extra rows
            per_worker = 64
        kvc = r.configurator(device="meta")
        r.ctx.override("glm-kv test: one mamba slot", max_mamba_cache_size=1)
        req = kvc._build_req_to_token_pool(max_num_reqs=per_worker)
        page = r.v.page_size
        sizes = _PoolSizes(
            max_total_num_tokens=2 * page, max_running_requests=per_worker,
            full_max_total_num_tokens=None, swa_max_total_num_tokens=None,
            c4_max_total_num_tokens=0, c128_max_total_num_tokens=0, c4_state_pool_size=0,
            c128_state_pool_size=0, c4_state_dtype=None, c128_state_dtype=None)
        kv = kvc._build_token_to_kv_pool(sizes=sizes, is_dsa_model=True, is_dsv4_model=False,
                                         req_to_token_pool=req)
        full = kv.full_kv_pool
        tails = [t for t in (*full._compress_tail_k, *full._compress_tail_score) if t.shape[0] > 0]
        decode = get_disagg().disaggregation_mode == "decode"
        extra = get_disagg().disaggregation_decode_extra_slots if decode else 0
        return {"per_worker": per_worker, "req_to_token_rows": int(req.req_to_token.shape[0]),
                "extra_slots": int(extra or 0), "extra_rows": int(req.req_to_token.shape[0]) - per_worker - 1,
                "tail": {"rows": int(tails[0].shape[0]),
                         "bytes": sum(t.numel() * t.element_size() for t in tails)}}


def mismatches(raw: dict) -> list:
    """(key, glm-kv, SGLang) for the tail's rows and bytes and the req_to_token rows."""
    plan, d = _ours(raw)
    theirs = sglang_pools(raw)
    out = [(k, d["tail"][k], theirs["tail"][k]) for k in ("rows", "bytes") if d["tail"][k] != theirs["tail"][k]]
    # req_to_token: the per-worker cap + glm-kv's extra slots + the padding row; the tail has one row more
    ours_r2t = plan.args.requests_per_worker + plan.args.decode_extra_slots + 1
    if ours_r2t != theirs["req_to_token_rows"]:
        out.append(("req_to_token_rows", ours_r2t, theirs["req_to_token_rows"]))
    if plan.tail.rows - 1 != theirs["req_to_token_rows"]:
        out.append(("tail_rows_minus_1", plan.tail.rows - 1, theirs["req_to_token_rows"]))
    return out


@pytest.mark.parametrize("pid,raw", CASES, ids=[c[0] for c in CASES])
def test_tail_rows_follow_sglangs_decode_slots(sglang_ready, pid, raw):
    assert mismatches(raw) == [], pid


@pytest.mark.parametrize("pid,raw", CASES, ids=[c[0] for c in CASES])
def test_decode_extra_slots_are_sglangs(sglang_ready, pid, raw):
    plan, _ = _ours(raw)
    sg = sglang_pools(raw)
    theirs = sg["extra_rows"]   # the rows SGLang's request pool adds beyond the cap and the padding row
    assert sg["extra_slots"] == theirs   # its resolved disaggregation_decode_extra_slots, as built
    assert plan.args.decode_extra_slots == theirs, pid
    if pid in ("decode-8", "decode-32", "decode-dpattn-64", "decode-mtp-16"):
        assert theirs > 0, pid   # not 0 == 0 where SGLang reserves slots


def test_automatic_cap_gets_no_extra_slots(sglang_ready):
    """No --max-running-requests: the hook sees None and reserves nothing (even under MTP, whose reset
    to 48 comes in a later hook)."""
    for raw in ({"gpu": "H200", "tp_size": 2, "disaggregation_mode": "decode"},
                {"gpu": "H200", "tp_size": 2, "disaggregation_mode": "decode", "speculative_algorithm": "EAGLE"}):
        plan, _ = _ours(raw)
        assert plan.args.decode_extra_slots == 0 == sglang_pools(raw)["extra_rows"], raw


def test_planted_old_rule_fails(sglang_ready, monkeypatch):
    import glm_kv.inputs.resolve as resolve

    monkeypatch.setattr(resolve, "decode_extra_slots", lambda p: 0)   # the old "+2 rows" only
    assert mismatches(CASES[0][1]) != []
    assert mismatches(CASES[4][1]) != []
    assert mismatches(CASES[3][1]) == []   # above 32 per worker the old rule was right


# An explicit --disaggregation-decode-extra-slots N: a decode server takes it as it is (the hook fills only
# an unset value); a prefill or co-located server's pools never read it (inert there, proven below).
EXPLICIT = [
    ("decode-64-given-5", {"gpu": "H200", "tp_size": 2, "disaggregation_mode": "decode", "max_running_requests": 64,
                           "disaggregation_decode_extra_slots": 5}),
    ("decode-8-given-0", {"gpu": "H200", "tp_size": 2, "disaggregation_mode": "decode", "max_running_requests": 8,
                          "disaggregation_decode_extra_slots": 0}),
    ("decode-16-given-100", {"gpu": "H200", "tp_size": 2, "disaggregation_mode": "decode", "max_running_requests": 16,
                             "disaggregation_decode_extra_slots": 100}),
    ("decode-dpattn-64-given-3", {"gpu": "B200", "tp_size": 4, "dp_size": 4, "enable_dp_attention": True,
                                  "disaggregation_mode": "decode", "max_running_requests": 64,
                                  "disaggregation_decode_extra_slots": 3}),
]
INERT_ELSEWHERE = [
    ("prefill-8-given-7", {"gpu": "H200", "tp_size": 2, "disaggregation_mode": "prefill", "max_running_requests": 8,
                           "disaggregation_decode_extra_slots": 7}),
    ("colocated-8-given-7", {"gpu": "H200", "tp_size": 2, "max_running_requests": 8,
                             "disaggregation_decode_extra_slots": 7}),
]


@pytest.mark.parametrize("pid,raw", EXPLICIT, ids=[c[0] for c in EXPLICIT])
def test_explicit_extra_slots_on_a_decode_server(sglang_ready, pid, raw):
    assert mismatches(raw) == [], pid
    plan, _ = _ours(raw)
    sg = sglang_pools(raw)
    assert plan.args.decode_extra_slots == sg["extra_rows"] == raw["disaggregation_decode_extra_slots"], (pid, sg)


@pytest.mark.parametrize("pid,raw", INERT_ELSEWHERE, ids=[c[0] for c in INERT_ELSEWHERE])
def test_explicit_extra_slots_are_inert_elsewhere(sglang_ready, pid, raw):
    without = {k: v for k, v in raw.items() if k != "disaggregation_decode_extra_slots"}
    assert sglang_pools(raw) == sglang_pools(without), pid   # SGLang: same rows, same tail
    _, mine = _ours(raw)
    _, base = _ours(without)
    assert {k: v for k, v in mine.items() if k != "profile"} == {k: v for k, v in base.items() if k != "profile"}, pid
    assert mismatches(raw) == [], pid


def test_launch_command_takes_the_flag(sglang_ready, capsys):
    """``glm-kv plan --sglang-args ... --disaggregation-decode-extra-slots N`` plans (it was refused)."""
    import json

    from glm_kv import cli

    cmd = ("python -m sglang.launch_server --model-path zai-org/GLM-5.3-Flash --tp-size 8 --disaggregation-mode decode "
           "--max-running-requests 64 --disaggregation-decode-extra-slots 5")
    assert cli.main(["plan", "--json", "--sglang-args", cmd]) in (0, None)
    d = json.loads(capsys.readouterr().out)
    assert d["tail"]["rows"] == 64 + 5 + 2, d["tail"]


def test_planted_explicit_value_ignored_fails(sglang_ready, monkeypatch):
    """glm-kv taking SGLang's default instead of the given value fails every decode case that differs."""
    import glm_kv.inputs.resolve as resolve

    real = resolve.decode_extra_slots
    monkeypatch.setattr(resolve, "decode_extra_slots",
                        lambda p: real(p.model_copy(update={"disaggregation_decode_extra_slots": None})))
    assert all(mismatches(raw) != [] for _, raw in EXPLICIT), [mismatches(raw) for _, raw in EXPLICIT]
