"""Issue 30: ``--disaggregation-ib-device``, planned for the target machine as SGLang 0.5.23 checks it there.

SGLang validates the devices while resolving a Mooncake prefill / decode launch (``validate_ib_devices``,
arg_groups/validation_hook.py): it lists ``/sys/class/infiniband`` on the machine it starts on. This CPU has
no such directory, so SGLang refuses every such launch here ("InfiniBand sysfs path not found"), which says
nothing about the machine the user plans for. glm-kv therefore plans and notes the check (decision: the
refusal is a fact of the machine, not of the launch), and refuses only what fails on every machine.

* SGLang's own ``validate_ib_devices`` over a fake sysfs directory holding mlx5_0..mlx5_3 (the target machine):
  on each value, SGLang refuses exactly where glm-kv refuses, with the message glm-kv quotes; where a named
  device is missing there, SGLang refuses and glm-kv's plan note names that check.
* Over the real (absent) directory SGLang's sizing refuses the decode launch, and glm-kv plans it with the note.
* With the fake directory SGLang's sizing of the decode server is the same with and without the flag.

Planted errors: the note left out and the empty-group refusal left out each fail.
"""
from __future__ import annotations

import contextlib
import json
import os

import pytest

import flag_table as ft

DEVICES = ("mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3")
VALUES = ["mlx5_0", "mlx5_0,mlx5_1", " mlx5_1 ", "mlx5_0,mlx5_0", ",", " , ", "mlx5_9", "mlx5_0,mlx5_9",
          '{"0": "mlx5_0", "1": "mlx5_1,mlx5_2"}', '{"0": ""}', '{"0": " , "}', '{"a": "mlx5_0"}', '{"0": 1}', "{}",
          "{bad", "[1]", '{"0": "mlx5_9"}', "@FILE_OK@", "@FILE_MISSING@", "@FILE_BAD@"]
LAUNCH = "python -m sglang.launch_server --model-path zai-org/GLM-5.3-Flash --tp 8 --disaggregation-mode decode"


@contextlib.contextmanager
def fake_sysfs(tmp_path):
    """``/sys/class/infiniband`` answered by a folder holding DEVICES (the machine SGLang would start on)."""
    sysfs = tmp_path / "infiniband"
    sysfs.mkdir(exist_ok=True)
    for d in DEVICES:
        (sysfs / d).mkdir(exist_ok=True)
    real_isdir, real_listdir = os.path.isdir, os.listdir
    os.path.isdir = lambda p: real_isdir(str(sysfs) if p == "/sys/class/infiniband" else p)
    os.listdir = lambda p=".": real_listdir(str(sysfs) if p == "/sys/class/infiniband" else p)
    try:
        yield
    finally:
        os.path.isdir, os.listdir = real_isdir, real_listdir


def _value(raw: str, tmp_path) -> str:
    files = {"@FILE_OK@": json.dumps({"0": "mlx5_0"}), "@FILE_MISSING@": None, "@FILE_BAD@": "{not json"}
    if raw not in files:
        return raw
    path = tmp_path / f"{raw.strip('@').lower()}.json"
    if files[raw] is not None:
        path.write_text(files[raw])
    return str(path)


def _glm_kv(value: str):
    import shlex

    from glm_kv.errors import ProfileError
    from glm_kv.inputs.launch import parse_launch_command
    from glm_kv.ledgers.plan import compute_plan
    from glm_kv.inputs.profile import make_profile

    try:
        fields, _ = parse_launch_command(f"{LAUNCH} --disaggregation-ib-device {shlex.quote(value)}", "0.5.23")
    except ProfileError as e:
        return None, str(e)
    return compute_plan(make_profile(fields)), None


@pytest.mark.parametrize("raw", VALUES)
def test_refused_where_sglang_refuses_on_a_machine_with_the_devices(sglang_ready, tmp_path, raw):
    from sglang.srt.arg_groups.validation_hook import validate_ib_devices

    value = _value(raw, tmp_path)
    with fake_sysfs(tmp_path):
        try:
            validate_ib_devices(value)
            said = None
        except (ValueError, RuntimeError) as e:
            said = str(e)
    plan, refused = _glm_kv(value)
    machine = said is not None and ("Invalid IB devices" in said or "does not exist" in said
                                    or "Failed to parse JSON content from file" in said)
    if said is None or machine:   # starts there, or refused by a fact of that machine: planned, noted
        assert refused is None, (value, said, refused)
        note = next(n for n in plan.notes if n.startswith("--disaggregation-ib-device"))
        assert "/sys/class/infiniband" in note and value.strip() in note, note
        if value.endswith(".json"):
            assert "JSON file" in note, note
    else:
        assert refused is not None and said in refused, (value, said, refused)


def test_sglang_refuses_here_and_glm_kv_plans_with_the_note(sglang_ready):
    """This machine has no /sys/class/infiniband: SGLang's resolution refuses the decode launch here (the proof
    profile's SGLang run), glm-kv plans it for the target machine and says what SGLang checks there."""
    assert not os.path.isdir("/sys/class/infiniband")
    _, prof, pre, w = next(p for p in ft.PROOF_PROFILES if p[0] == "h200-tp2-decode")
    sg = ft.sizing({"disaggregation_ib_device": "mlx5_0"}, prof, pre, w)
    assert "InfiniBand sysfs path not found" in sg["errors"]["message"], sg
    plan, refused = _glm_kv("mlx5_0")
    assert refused is None and any("InfiniBand" in n for n in plan.notes), (refused, plan.notes)


def test_no_pool_moves_on_a_machine_with_the_devices(sglang_ready, tmp_path):
    _, prof, pre, w = next(p for p in ft.PROOF_PROFILES if p[0] == "h200-tp2-decode")
    with fake_sysfs(tmp_path):
        base = ft.sizing({}, prof, pre, w)
        got = ft.sizing({"disaggregation_ib_device": "mlx5_0,mlx5_1"}, prof, pre, w)
    assert "errors" not in got and all(got[k] == base[k] for k in ft.COMPARED), (got, base)


def test_planted_note_left_out_is_caught(sglang_ready, tmp_path, monkeypatch):
    import glm_kv.ledgers.plan as plan

    monkeypatch.setattr(plan, "ib_devices_note", lambda value: "nothing to say")
    with pytest.raises(StopIteration):
        test_refused_where_sglang_refuses_on_a_machine_with_the_devices(True, tmp_path, "mlx5_0")


def test_planted_empty_group_accepted_is_caught(sglang_ready, tmp_path, monkeypatch):
    import glm_kv.inputs.ib_devices as ib

    monkeypatch.setattr(ib, "_groups", lambda value: [])
    with pytest.raises(AssertionError):
        test_refused_where_sglang_refuses_on_a_machine_with_the_devices(True, tmp_path, " , ")
