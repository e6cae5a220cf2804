"""Issue 20.2: the CUDA-graph flags of SGLang 0.5.23 that were still refused, against SGLang on the CPU.

Each case is a launch-command fragment read twice: by SGLang 0.5.23's own argparse parser (the wheel's
``ServerArgs.add_cli_args``) into ServerArgs kwargs for its sizing (``flag_table.sizing``: resolution,
``parse_cuda_graph_config``, ``handle_gpu_memory_settings`` / ``reserve_for_graph_mb``, the rest and
``config_from_budget``), and by ``glm_kv.inputs.launch.parse_launch_command`` into profile fields for
``compute_plan``. Nothing else is shared.

Modelled (they move the default ``mem_fraction_static``): ``--cuda-graph-bs-decode`` (max_bs = max of the
list, over ``--cuda-graph-max-bs-decode`` and the running-request clamp), ``--cuda-graph-backend-decode``
/ ``-prefill`` (they win over the disable switches; an explicit prefill backend locks out the
auto-disable cascade, "full" has no DeepEP delta) and ``--cuda-graph-config`` (JSON over both).
Inert (the same pools with and without, here on three profiles and in the flag table's proofs): the
prefill capture sizes, ``--disable-cuda-graph-padding`` and the graph debugging switches.
"""
from __future__ import annotations

import json
import shlex

import pytest

from glm_kv.errors import ProfileError

GiB = 1 << 30
LAUNCH = "python -m sglang.launch_server --model-path glm-5.3-flash"

H200_1 = ({"gpu": "H200", "tp_size": 1}, 139 * GiB, 70 * GiB)
B200_DP = ({"gpu": "B200", "tp_size": 4, "dp_size": 4, "enable_dp_attention": True, "speculative_algorithm": "EAGLE",
            "max_running_requests": 64}, 176 * GiB, 40 * GiB)
H200_8 = ({"gpu": "H200", "tp_size": 8}, 139 * GiB, 20 * GiB)
H200_CP = ({"gpu": "H200", "tp_size": 8, "attn_cp_size": 8}, 139 * GiB, 20 * GiB)
B200_DEEPEP = ({"gpu": "B200", "tp_size": 8, "moe_a2a_backend": "deepep"}, 176 * GiB, 20 * GiB)
H200_MOONCAKE = ({"gpu": "H200", "tp_size": 8, "moe_a2a_backend": "mooncake"}, 139 * GiB, 20 * GiB)
GRAPH_JSON = json.dumps({"decode": {"backend": "breakable", "max_bs": 48},
                         "prefill": {"backend": "full", "max_seq_len": 4096, "full_prefill_max_req": 8}})

# (id, base, argv): every case moves SGLang's pools (checked below), so agreement is not vacuous
MODELLED_CASES = [
    ("h200-tp1-decode-bs-list", H200_1, ["--cuda-graph-bs-decode", "1", "2", "4", "8", "16", "400"]),
    ("b200-dpattn-bs-list-over-max-bs", B200_DP, ["--cuda-graph-bs-decode", "1", "8", "128",
                                                  "--cuda-graph-max-bs-decode", "32"]),
    ("h200-tp8-decode-backend-disabled", H200_8, ["--cuda-graph-backend-decode", "disabled"]),
    ("h200-tp8-decode-backend-over-disable", H200_8, ["--disable-cuda-graph", "--cuda-graph-backend-decode", "full"]),
    ("h200-tp8-prefill-backend-disabled", H200_8, ["--cuda-graph-backend-prefill", "disabled"]),
    ("h200-cp8-prefill-backend-locked", H200_CP, ["--cuda-graph-backend-prefill", "breakable"]),
    ("b200-deepep-prefill-full", B200_DEEPEP, ["--cuda-graph-backend-prefill", "full"]),
    ("h200-mooncake-prefill-full", H200_MOONCAKE, ["--cuda-graph-backend-prefill", "full"]),
    ("h200-mooncake-json", H200_MOONCAKE, ["--cuda-graph-max-bs-decode", "300", "--cuda-graph-config", GRAPH_JSON]),
    ("b200-dpattn-json-bs", B200_DP, ["--cuda-graph-bs-decode", "4", "--cuda-graph-config",
                                      json.dumps({"decode": {"bs": [1, 2, 200], "max_bs": 8}})]),
]
INERT_ARGV = [["--cuda-graph-max-bs-prefill", "1024"], ["--cuda-graph-bs-prefill", "128", "256", "512"],
              ["--cuda-graph-max-seq-len-prefill", "4096"], ["--cuda-graph-prefill-max-context", "8192"],
              ["--disable-cuda-graph-padding"], ["--enable-cudagraph-gc"], ["--enable-profile-cuda-graph"],
              ["--debug-cuda-graph"], ["--cuda-graph-backend-decode", "breakable"],
              ["--cuda-graph-config", json.dumps({"prefill": {"max_bs": 512, "max_context_size": 8192,
                                                              "full_prefill_prefix_chunk_tokens": 64}})]]


def sglang_kwargs(argv: list[str]) -> dict:
    """The ServerArgs kwargs SGLang's own parser makes of the fragment (only the dests it names)."""
    import flag_table as ft

    p = ft.parser()
    ns = p.parse_args(["--model-path", "unused", *argv])
    dests = {a.dest for a in p._actions for o in a.option_strings if o in argv}
    return {d: getattr(ns, d) for d in dests}


def sglang_side(base: dict, argv: list[str], pre: int, w: int) -> dict:
    import flag_table as ft

    out = ft.sizing(sglang_kwargs(argv), base, pre, w)
    assert "errors" not in out, (argv, out)
    c = out["capacity"]
    return {"mem_fraction_static": out["fraction"], "rest_bytes": c["rest_bytes"],
            "max_mamba_cache_size": c["max_mamba_cache_size"], "max_total_num_tokens": c["max_total_num_tokens"],
            "max_running_requests": c["max_running_requests"]}


def glm_kv_side(base: dict, argv: list[str], pre: int, w: int) -> dict:
    from glm_kv.inputs.launch import parse_launch_command
    from glm_kv.inputs.profile import make_profile
    from glm_kv.ledgers.plan import compute_plan

    fields, _ = parse_launch_command(LAUNCH + " " + shlex.join(argv), layout="0.5.23")
    fields = {k: v for k, v in fields.items() if k not in ("model", "weights_estimate")}
    plan = compute_plan(make_profile({**base, **fields, "pre_model_load_bytes": pre, "weights_bytes": w,
                                      "draft_weights_bytes": 0}))
    c = plan.capacity
    return {"mem_fraction_static": plan.memory.mem_fraction_static, "rest_bytes": c.available_bytes,
            "max_mamba_cache_size": c.max_mamba_cache_size, "max_total_num_tokens": c.max_total_num_tokens,
            "max_running_requests": c.max_running_requests_per_worker}


def mismatches(ours: dict, theirs: dict) -> list[str]:
    return [f"{k}: glm-kv {ours[k]!r}, SGLang 0.5.23 {v!r}" for k, v in theirs.items()
            if not (abs(ours[k] - v) <= 1 if k == "rest_bytes" else ours[k] == v)]


def disagreements() -> list[str]:
    bad = []
    for pid, (base, pre, w), argv in MODELLED_CASES:
        bad += [f"{pid}: {m}" for m in mismatches(glm_kv_side(base, argv, pre, w), sglang_side(base, argv, pre, w))]
    return bad


def test_graph_flags_agree_with_sglang(sglang_ready):
    bad = disagreements()
    assert not bad, "\n".join(bad)


def test_each_case_moves_sglangs_pools(sglang_ready):
    for pid, (base, pre, w), argv in MODELLED_CASES:
        assert sglang_side(base, argv, pre, w) != sglang_side(base, [], pre, w), pid


def test_inert_graph_flags_size_the_same_pools(sglang_ready):
    """SGLang sizes the same pools with each flag as without, on three profiles; glm-kv takes the flag
    and plans the same (it lists the flag inert, or folds it into nothing that moves)."""
    from glm_kv.inputs.launch import parse_launch_command

    for base, pre, w in (H200_1, B200_DP, B200_DEEPEP):
        plain = sglang_side(base, [], pre, w)
        ours_plain = glm_kv_side(base, [], pre, w)
        for argv in INERT_ARGV:
            assert sglang_side(base, argv, pre, w) == plain, (base, argv)
            assert glm_kv_side(base, argv, pre, w) == ours_plain, (base, argv)
            parse_launch_command(LAUNCH + " " + shlex.join(argv), layout="0.5.23")   # taken, not refused


def test_a_planted_bs_list_error_is_caught(sglang_ready, monkeypatch):
    """The smallest captured batch size kept as max_bs instead of the largest: the fraction moves."""
    import glm_kv.inputs.launch as launch

    monkeypatch.setattr(launch, "_graph_batch_sizes", lambda flag, where, v: min(v))
    bad = disagreements()
    assert any(b.startswith("h200-tp1-decode-bs-list: mem_fraction_static") for b in bad), bad


def test_a_planted_lock_error_is_caught(sglang_ready, monkeypatch):
    """An explicit prefill backend treated like the default (the auto-disable cascade still applied)."""
    import glm_kv.ledgers.memory as memory

    real = memory.fraction_inputs

    def planted(*a, **k):
        f = real(*a, **k)
        return memory.FractionInputs(**{**f.__dict__, "prefill_graph_backend": None})

    monkeypatch.setattr(memory, "fraction_inputs", planted)
    bad = disagreements()
    assert any(b.startswith("h200-cp8-prefill-backend-locked:") for b in bad), bad
    assert any(b.startswith("h200-mooncake-prefill-full:") for b in bad), bad


def test_a_planted_precedence_error_is_caught(sglang_ready, monkeypatch):
    """The legacy --disable-cuda-graph winning over --cuda-graph-backend-decode (SGLang: the backend wins)."""
    import glm_kv.ledgers.memory as memory

    real = memory.fraction_inputs

    def planted(p, *a, **k):
        f = real(p, *a, **k)
        return memory.FractionInputs(**{**f.__dict__, "decode_graph_disabled": f.decode_graph_disabled
                                        or p.disable_cuda_graph})

    monkeypatch.setattr(memory, "fraction_inputs", planted)
    bad = disagreements()
    assert any(b.startswith("h200-tp8-decode-backend-over-disable:") for b in bad), bad


@pytest.mark.parametrize("raw,words", [
    ("not json", "must be JSON"),
    ('["decode"]', "must be a JSON object"),
    ('{"verify": {}}', "unknown phase"),
    ('{"decode": {"max_context_size": 8}}', "unknown key"),
    ('{"prefill": {"backend": "tc_piecewise"}}', "backend must be one of"),
    ('{"decode": {"bs": []}}', "non-empty list of positive integers"),
])
def test_bad_graph_json_is_refused_as_sglang_refuses_it(sglang_ready, raw, words):
    """SGLang's parser refuses the same JSON (SystemExit from argparse); glm-kv names the flag."""
    from glm_kv.inputs.launch import parse_launch_command

    if words != "non-empty list of positive integers":   # SGLang's parser takes an empty list, then fails later
        with pytest.raises(SystemExit):
            sglang_kwargs(["--cuda-graph-config", raw])
    with pytest.raises(ProfileError) as e:
        parse_launch_command(f"{LAUNCH} --cuda-graph-config '{raw}'", layout="0.5.23")
    assert e.value.field == "--cuda-graph-config" and words in e.value.rule, e.value.rule
