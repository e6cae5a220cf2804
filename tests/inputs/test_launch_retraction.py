"""A decode server's retraction-backup flags read from a pasted command (issue 30 / 32 follow-up); no SGLang needed.

The resolution and the host pools it builds are compared with SGLang 0.5.23's own code in
tests/sglang/test_decode_retraction_backup.py (every refusal there too, its message read off SGLang); here: the flags
become profile fields, bad values are one line naming the flag or field (exit 2), and the refusals stop the plan.
Planted error: the refusals switched off (``validate_retraction`` a no-op), which the refusal cases catch.
"""
from __future__ import annotations

import pytest

from glm_kv.cli import main
from glm_kv.inputs.launch import parse_launch_command

GPT = "python -m sglang.launch_server --model-path openai/gpt-oss-20b --disaggregation-mode decode "
QWEN = "python -m sglang.launch_server --model-path Qwen/Qwen3.5-35B-A3B --disaggregation-mode decode "


def test_flags_become_fields():
    fields, inert = parse_launch_command(GPT + "--disaggregation-decode-retraction-backup host_pool "
                                               "--disaggregation-decode-host-receive-threshold 0.5 "
                                               "--enable-priority-scheduling --disable-priority-preemption", "0.5.23")
    assert inert == []
    assert fields["disaggregation_decode_retraction_backup"] == "host_pool"
    assert fields["disaggregation_decode_host_receive_threshold"] == 0.5
    assert fields["enable_priority_scheduling"] is True and fields["disable_priority_preemption"] is True


def _plan(capsys, cmd: str, *sets: str) -> tuple[int, str, str]:
    args = ["plan", "--sglang-args", cmd, "--json"]
    for s in sets:
        args += ["--set", s]
    rc = main(args)
    out, err = capsys.readouterr()
    return rc, out, err


REFUSED = [
    (GPT + "--disaggregation-decode-retraction-backup bogus", "--disaggregation-decode-retraction-backup",
     "invalid choice"),
    (GPT + "--disaggregation-decode-host-receive-threshold 1.5", "disaggregation_decode_host_receive_threshold",
     "must be between 0 and 1"),
    (GPT + "--disaggregation-decode-host-receive-threshold 0.5 --disaggregation-decode-retraction-backup cpu_tensor",
     "disaggregation_decode_retraction_backup", "Decode host KV buffering requires host_pool retraction"),
    (GPT.replace("decode", "prefill") + "--disaggregation-decode-retraction-backup host_pool",
     "disaggregation_decode_retraction_backup", "only supported on a PD decode server"),
    (GPT + "--enable-priority-scheduling --disaggregation-decode-retraction-backup host_pool",
     "disaggregation_decode_retraction_backup", "requires --disable-priority-preemption"),
    (QWEN + "--disaggregation-decode-retraction-backup host_pool", "disaggregation_decode_retraction_backup",
     "Host-pool retraction does not support Mamba models."),
    (QWEN + "--disaggregation-decode-host-receive-threshold 0.25", "disaggregation_decode_host_receive_threshold",
     "Host-pool retraction does not support Mamba models."),
]


@pytest.mark.parametrize("cmd,field,words", REFUSED, ids=[r[2][:40] for r in REFUSED])
def test_refused_in_one_line_naming_the_field(capsys, cmd, field, words):
    rc, out, err = _plan(capsys, cmd, "weights_bytes=40000000000")
    assert rc == 2 and out == "" and err.count("\n") == 1 and field in err and words in err, err


def test_bad_profile_value_names_the_field(capsys):
    rc, out, err = _plan(capsys, GPT, "disaggregation_decode_retraction_backup=disk")
    assert rc == 2 and out == "" and "disaggregation_decode_retraction_backup" in err and "\n" == err[-1:], err


def test_a_planted_refusal_switch_off_is_caught(capsys, monkeypatch):
    """Planted: no refusal (validate_retraction a no-op): the refused launches plan, which the cases above catch."""
    import glm_kv.inputs.startup as startup

    monkeypatch.setattr(startup, "validate_retraction", lambda p, family: None)
    caught = 0
    for cmd, field, words in REFUSED[1:]:
        rc, _out, err = _plan(capsys, cmd, "weights_bytes=40000000000")
        caught += not (rc == 2 and words in err)
    assert caught >= 4, caught


def test_the_plan_says_the_backup_on_decode_servers_only(capsys):
    import json

    rc, out, _ = _plan(capsys, GPT, "weights_bytes=40000000000")
    host = json.loads(out)["host"]
    assert rc == 0 and host["retraction_backup"] == "host_pool" and host["kv_tokens"] > 0 and not host["enabled"]
    rc, out, _ = _plan(capsys, GPT + "--enable-priority-scheduling", "weights_bytes=40000000000")
    host = json.loads(out)["host"]
    assert rc == 0 and host["retraction_backup"] == "cpu_tensor" and host["kv_tokens"] is None
    rc, out, _ = _plan(capsys, GPT.replace("--disaggregation-mode decode ", ""), "weights_bytes=40000000000")
    assert rc == 0 and "retraction_backup" not in json.loads(out)["host"]
