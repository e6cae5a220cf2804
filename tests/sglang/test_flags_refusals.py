"""Issue 20: what SGLang 0.5.23 refuses at start-up for this model, glm-kv refuses the same way (exit 2,
the flag named, SGLang's own words), and what it takes without moving a pool is proven so.

SGLang's side: oracle_memory.sglang_memory (its ``ServerArgs`` resolution, validators and pool sizing
on the CPU) with the flag handed to ``ServerArgs``, on several profiles; each must fail, and the
message SGLang raises must be quoted in glm-kv's refusal. glm-kv's side: ``parse_launch_command``
(launch-level refusals) or ``make_profile`` -> ``compute_plan`` (validators of modelled flags).
"""
from __future__ import annotations

import contextlib

import pytest

from glm_kv.errors import ProfileError

GiB = 1 << 30
PROFILES = [
    ("h200-tp1", {"gpu": "H200", "tp_size": 1}, 139 * GiB, 70 * GiB),
    ("h200-tp8-eagle", {"gpu": "H200", "tp_size": 8, "speculative_algorithm": "EAGLE", "max_running_requests": 64},
     139 * GiB, 20 * GiB),
    ("b200-tp4-dpattn-eagle", {"gpu": "B200", "tp_size": 4, "dp_size": 4, "enable_dp_attention": True,
                               "speculative_algorithm": "EAGLE", "max_running_requests": 64}, 176 * GiB, 40 * GiB),
]
CMD = "python -m sglang.launch_server --model-path zai-org/GLM-5.3-Flash --tp-size 8 "


@contextlib.contextmanager
def extra_kwargs(extra: dict):
    import oracle_memory

    real = oracle_memory.kwargs_for
    oracle_memory.kwargs_for = lambda prof, raw: {**real(prof, raw), **extra}
    try:
        yield oracle_memory
    finally:
        oracle_memory.kwargs_for = real


def sglang_error(extra: dict, prof: dict, pre: int, w: int) -> str | None:
    with extra_kwargs(extra) as om:
        out = om.sglang_memory(dict(prof), {}, pre_model_load_bytes=pre, weights_bytes=w)
    return out["errors"]["message"] if "errors" in out else None


# (flag fragment of a launch command, the ServerArgs kwargs SGLang gets, message fragments SGLang must raise)
LAUNCH_REFUSALS = [
    ("--enable-unified-memory", {"enable_unified_memory": True}),
    ("--enable-page-major-kv-layout", {"enable_page_major_kv_layout": True}),
    ("--enable-linear-replayssm", {"enable_linear_replayssm": True}),
    ("--enable-linear-replayssm --mamba-radix-cache-strategy no_buffer",
     {"enable_linear_replayssm": True, "mamba_radix_cache_strategy": "no_buffer"}),
    ("--dcp-size 2", {"dcp_size": 2}),
    ("--decode-context-parallel-size 8", {"dcp_size": 8}),
    ("--dcp-size 0", {"dcp_size": 0}),
    ("--mamba-max-states-per-path 0", {"mamba_max_states_per_path": 0}),
    ("--mamba-max-states-per-path -3", {"mamba_max_states_per_path": -3}),
]


@pytest.mark.parametrize("fragment,kwargs", LAUNCH_REFUSALS, ids=[f for f, _ in LAUNCH_REFUSALS])
def test_launch_refusals_quote_sglang(sglang_ready, fragment, kwargs):
    from glm_kv.inputs.launch import parse_launch_command

    with pytest.raises(ProfileError) as ours:
        parse_launch_command(CMD + fragment, layout="0.5.23")
    assert ours.value.field == fragment.split()[0], (ours.value.field, fragment)
    for pid, prof, pre, w in PROFILES:
        theirs = sglang_error(kwargs, prof, pre, w)
        assert theirs is not None, (pid, fragment, "SGLang 0.5.23 started with it")
        head = theirs.split(". Got")[0].split(", got")[0].split(", but got")[0]
        assert head in ours.value.rule, (pid, fragment, head, ours.value.rule)


def _plan_cli(capsys, fragment: str) -> tuple:
    """``glm-kv plan --json --sglang-args CMD+fragment``: (exit code, stdout, stderr)."""
    from glm_kv import cli

    try:
        code = cli.main(["plan", "--json", "--sglang-args", CMD + fragment])
    except SystemExit as e:
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


def test_launch_refusals_exit_2_on_the_cli(sglang_ready, capsys):
    """``glm-kv plan --sglang-args``: exit 2, one line naming the flag, no traceback, no plan printed."""
    for fragment, _ in LAUNCH_REFUSALS:
        code, out, err = _plan_cli(capsys, fragment)
        assert code == 2, (fragment, code, out, err)
        assert fragment.split()[0] in err and "Traceback" not in err, err
        assert out.strip() == "", out


def test_a_planted_paraphrase_is_caught(sglang_ready, monkeypatch):
    """A refusal in glm-kv's own words instead of SGLang's fails the quote check."""
    import glm_kv.inputs.launch as launch

    monkeypatch.setitem(launch.REFUSED_BY_SGLANG, "enable_unified_memory",
                        "SGLang cannot start this model with unified memory (its backend is not allowed)")
    with pytest.raises(ProfileError) as ours:
        launch.parse_launch_command(CMD + "--enable-unified-memory", layout="0.5.23")
    pid, prof, pre, w = PROFILES[0]
    theirs = sglang_error({"enable_unified_memory": True}, prof, pre, w)
    assert theirs.split(". Got")[0] not in ours.value.rule


def test_values_sglang_takes_move_nothing(sglang_ready):
    """--dcp-size 1 and --mamba-max-states-per-path N (N = -1 or > 0): SGLang sizes the same pools, and the
    launch reader accepts them (it reads nothing into the profile)."""
    import flag_table as ft
    from glm_kv.inputs.launch import parse_launch_command

    for extra, fragment in (({"dcp_size": 1}, "--dcp-size 1"),
                            ({"mamba_max_states_per_path": 2}, "--mamba-max-states-per-path 2"),
                            ({"mamba_max_states_per_path": 64}, "--mamba-max-states-per-path 64")):
        for pid, prof, pre, w in PROFILES:
            base, got = ft.sizing({}, prof, pre, w), ft.sizing(extra, prof, pre, w)
            assert "errors" not in got and got == base, (pid, extra, got)
        plain, _ = parse_launch_command(CMD, layout="0.5.23")
        fields, _ = parse_launch_command(CMD + fragment, layout="0.5.23")
        assert fields == plain, fragment


# Validators of modelled flags: (profile overrides, field glm-kv names)
PLAN_REFUSALS = [
    ({"speculative_algorithm": "EAGLE", "speculative_num_steps": 3, "speculative_eagle_topk": 2,
      "speculative_num_draft_tokens": 4, "enable_linear_replayssm_spec": True}, "enable_linear_replayssm_spec"),
    ({"disaggregation_mode": "prefill", "enable_linear_replayssm_spec": True}, "enable_linear_replayssm_spec"),
]


@pytest.mark.parametrize("over,field", PLAN_REFUSALS, ids=["tree-verify", "pd-prefill"])
def test_replayssm_spec_validators(sglang_ready, over, field):
    from glm_kv.inputs.profile import make_profile
    from glm_kv.ledgers.plan import compute_plan

    for pid, prof, pre, w in PROFILES[:2]:
        theirs = sglang_error({k: v for k, v in over.items() if k == "enable_linear_replayssm_spec"},
                              {**prof, **{k: v for k, v in over.items() if k != "enable_linear_replayssm_spec"}},
                              pre, w)
        assert theirs is not None, pid
        with pytest.raises(ProfileError) as ours:
            compute_plan(make_profile({**prof, **over, "pre_model_load_bytes": pre, "weights_bytes": w}))
        assert ours.value.field == field
        assert theirs.split(" Got")[0] in ours.value.rule, (pid, theirs, ours.value.rule)


# EAGLE / NEXTN with --speculative-num-steps and no --speculative-eagle-topk: SGLang 0.5.23's
# _handle_eagle_family fills topk only when steps is unset, then compares it (`topk > 1`) and dies on a
# TypeError. glm-kv refuses it naming speculative_eagle_topk (rules.eagle_steps_need_topk); topk 1 starts.
STEPS_NO_TOPK = [
    {"speculative_algorithm": "EAGLE", "speculative_num_steps": 3},
    {"speculative_algorithm": "NEXTN", "speculative_num_steps": 3},
    {"speculative_algorithm": "EAGLE", "speculative_num_steps": 2, "speculative_num_draft_tokens": 3},
]


def steps_without_topk_disagreements() -> list:
    """Every (profile, overrides) where SGLang and glm-kv do not both refuse steps without topk (glm-kv
    naming speculative_eagle_topk and quoting SGLang's message), or do not both accept it with topk 1."""
    from glm_kv.inputs.profile import make_profile
    from glm_kv.ledgers.plan import compute_plan

    out = []
    for pid, prof, pre, w in PROFILES:
        for over in STEPS_NO_TOPK:
            for topk in (None, 1):
                extra = over if topk is None else {**over, "speculative_eagle_topk": topk}
                theirs = sglang_error({}, {**prof, **extra}, pre, w)
                try:
                    compute_plan(make_profile({**prof, **extra, "pre_model_load_bytes": pre, "weights_bytes": w}))
                    ours = None
                except ProfileError as e:
                    ours = e
                if topk is None:
                    ok = (theirs is not None and ours is not None and ours.field == "speculative_eagle_topk"
                          and theirs in ours.rule)
                else:
                    ok = theirs is None and ours is None
                if not ok:
                    out.append((pid, extra, theirs, ours and str(ours)))
    return out


def test_eagle_steps_without_topk_is_refused_as_sglang_refuses_it(sglang_ready):
    assert steps_without_topk_disagreements() == []


def test_eagle_steps_without_topk_exits_2_on_the_cli(sglang_ready, capsys):
    for fragment in ("--speculative-algorithm EAGLE --speculative-num-steps 3",
                     "--speculative-algorithm NEXTN --speculative-num-steps 3 --speculative-num-draft-tokens 4"):
        code, out, err = _plan_cli(capsys, fragment)
        assert code == 2, (fragment, code, out, err)
        assert "speculative_eagle_topk" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
        assert out.strip() == "", out
        code, out, err = _plan_cli(capsys, fragment + " --speculative-eagle-topk 1")
        assert code in (0, None) and out.strip().startswith("{"), (fragment, code, err)


def test_a_planted_missing_topk_refusal_is_caught(sglang_ready, monkeypatch):
    """With the 0.5.23 rule switched off (glm-kv takes topk as 1, as before), SGLang still refuses: the
    comparison reports every steps-without-topk launch and nothing else."""
    import dataclasses

    from glm_kv.inputs import rules

    monkeypatch.setitem(rules.RULES, "0.5.23", dataclasses.replace(rules.SGLANG_0_5_23, eagle_steps_need_topk=False))
    found = steps_without_topk_disagreements()
    assert len(found) == len(PROFILES) * len(STEPS_NO_TOPK), found
    assert all("speculative_eagle_topk" not in extra and theirs and ours is None
               for _, extra, theirs, ours in found), found
