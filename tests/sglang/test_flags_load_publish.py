"""Issue 30: ``--load-publish-endpoint`` beside ``--kv-events-config``, checked as SGLang 0.5.23 checks it.

The pair moves no pool byte (test_flags_table.py's companion proof runs SGLang's sizing on every proof
profile). SGLang refuses a launch whose load range it cannot publish (arg_groups/validation_hook.py
``check_load_publish_args``): glm-kv's ``inputs/load_publish.py`` reproduces it, and here

* ``load_pub_range`` answers as SGLang's ``resolve_load_pub_range`` (disaggregation/kv_events.py) on a grid
  of KV / replay endpoints, DP sizes and modes, and on random ones (the run's seed);
* ``kv_events_config`` takes and refuses the JSON SGLang's ``KVEventsConfig.from_cli`` takes and refuses;
* whole launches: SGLang's ServerArgs resolution (``flag_table.sizing``, its validators included) and
  glm-kv's ``parse_launch_command`` start or refuse alike, glm-kv quoting SGLang's message.

Planted errors: the overlap check off by one port and the u16 ceiling moved each fail the grid.
"""
from __future__ import annotations

import itertools
import random

import pytest

import flag_table as ft
from tests.pytest_glm_kv import run_seed

ENDPOINTS = [None, "", "tcp://*:5557", "tcp://0.0.0.0:5557", "tcp://[::]:6000", "tcp://127.0.0.1:5557",
             "tcp://*:65535", "tcp://*:65534", "tcp://*:0", "tcp://*:70000", "tcp://*", "tcp://:5557", "ipc:///tmp/x",
             "tcp://::1:5557", "tcp://[::1]:5557", "tcp://host:abc", "tcp://*:5558", "tcp://*:5559", "tcp://[::]:"]
MODES = ["auto", "AUTO", "off", "", " ", "tcp://*:5558", "tcp://*:5557", "tcp://*:6000", "tcp://127.0.0.1:6000",
         "tcp://*:65535", "tcp://[::]:5560", "garbage", "tcp://*:5556"]
DPS = [1, 2, 4, 8]


def _sglang_range(kv, replay, dp, mode):
    from sglang.srt.disaggregation.kv_events import resolve_load_pub_range

    return resolve_load_pub_range(kv_endpoint=kv, replay_endpoint=replay, dp_size=dp, load_publish_endpoint=mode)


def _grid_mismatches():
    from glm_kv.inputs.load_publish import load_pub_range

    bad = []
    for kv, replay, dp, mode in itertools.product(ENDPOINTS, [None, "tcp://*:5558", "tcp://*:5559"], DPS, MODES):
        if load_pub_range(kv, replay, dp, mode) != _sglang_range(kv, replay, dp, mode):
            bad.append((kv, replay, dp, mode))
    return bad


def test_load_range_is_sglangs_on_a_grid(sglang_ready):
    assert _grid_mismatches() == []


def test_load_range_is_sglangs_on_random_ports(sglang_ready):
    from glm_kv.inputs.load_publish import load_pub_range

    rng = random.Random(run_seed())
    for _ in range(3000):
        host = rng.choice(["*", "0.0.0.0", "[::]", "10.0.0.1", "[::1]", "h"])
        kv = f"tcp://{host}:{rng.randrange(0, 66000)}"
        replay = rng.choice([None, f"tcp://*:{rng.randrange(0, 66000)}"])
        mode = rng.choice(["auto", f"tcp://{rng.choice(['*', '[::]', '1.2.3.4'])}:{rng.randrange(0, 66000)}"])
        dp = rng.choice([1, 2, 3, 4, 8, 16, 64])
        assert load_pub_range(kv, replay, dp, mode) == _sglang_range(kv, replay, dp, mode), (kv, replay, dp, mode)


CONFIGS = ['{}', '{"publisher": "zmq"}', '{"publisher": "zmq", "endpoint": ""}', '{"publisher": 1}',
           '{"endpoint": null}', '{"replay_endpoint": null}', '{"replay_endpoint": 5}', '{"hwm": "5"}',
           '{"hwm": 5.0}', '{"hwm": 5.5}', '{"hwm": true}', '{"bind": "yes"}', '{"bind": 2}', '{"bind": null}',
           '{"format": "dynamo"}', '{"format": "x"}', '{"unknown": 1}', '[]', 'x', '', '{"topic": null}',
           '{"buffer_steps": null}', '{"publisher": "zmq", "endpoint": "tcp://*:6000", "replay_endpoint": "tcp://*:6001"}']


@pytest.mark.parametrize("raw", CONFIGS)
def test_kv_events_config_is_read_as_sglangs_model(sglang_ready, raw):
    from sglang.srt.disaggregation.kv_events import KVEventsConfig

    from glm_kv.inputs.load_publish import kv_events_config

    try:
        theirs = KVEventsConfig.from_cli(raw)
    except Exception:   # noqa: BLE001 - SGLang's model refuses it
        theirs = None
    try:
        mine = kv_events_config(raw)
    except ValueError:
        mine = None
    assert (mine is None) == (theirs is None), (raw, mine, theirs)
    if theirs is not None:
        assert mine == {k: getattr(theirs, k) for k in mine}, (raw, mine, theirs)


ZMQ = '{"publisher": "zmq"}'
LAUNCHES = [
    ([], "h200-tp1"),
    (["--load-publish-endpoint", "auto"], "h200-tp1"),
    (["--load-publish-endpoint", "off"], "h200-tp1"),
    (["--load-publish-endpoint", "auto", "--kv-events-config", ZMQ], "h200-tp1"),
    (["--load-publish-endpoint", "auto", "--kv-events-config", ZMQ], "b200-tp4-dpattn-mtp"),
    (["--load-publish-endpoint", "auto", "--kv-events-config", '{"publisher": "zmq", "endpoint": "tcp://*:65533"}'],
     "b200-tp4-dpattn-mtp"),
    (["--load-publish-endpoint", "auto", "--kv-events-config", '{"publisher": "zmq", "endpoint": "tcp://*:65533"}'],
     "h200-tp1"),
    (["--load-publish-endpoint", "tcp://*:5559", "--kv-events-config", ZMQ], "b200-tp4-dpattn-mtp"),
    (["--load-publish-endpoint", "tcp://*:5561", "--kv-events-config", ZMQ], "b200-tp4-dpattn-mtp"),
    (["--load-publish-endpoint", "tcp://10.0.0.1:6000", "--kv-events-config", ZMQ], "h200-tp1"),
    (["--load-publish-endpoint", "auto", "--kv-events-config", "{}"], "h200-tp1"),
    (["--load-publish-endpoint", "auto", "--kv-events-config", '{"publisher": "zmq", "endpoint": "ipc:///tmp/k"}'],
     "h200-tp1"),
    (["--load-publish-endpoint", "auto", "--kv-events-config", "x"], "h200-tp1"),
    (["--load-publish-endpoint", "auto", "--kv-events-config",
      '{"publisher": "zmq", "endpoint": "tcp://*:6000", "replay_endpoint": "tcp://*:6001"}'], "b200-tp4-dpattn-mtp"),
]
COMMAND = {"h200-tp1": "--tp 1", "b200-tp4-dpattn-mtp": "--tp 4 --dp 4 --enable-dp-attention"}


@pytest.mark.parametrize("argv,pid", LAUNCHES, ids=[f"{i}" for i in range(len(LAUNCHES))])
def test_launch_starts_or_is_refused_as_in_sglang(sglang_ready, argv, pid):
    import shlex

    from glm_kv.errors import ProfileError
    from glm_kv.inputs.launch import parse_launch_command

    ns = ft.parser().parse_args(["--model-path", "unused", *argv])
    kw = {k: getattr(ns, k) for k in ("load_publish_endpoint", "kv_events_config") if getattr(ns, k) is not None}
    _, prof, pre, w = next(p for p in ft.PROOF_PROFILES if p[0] == pid)
    sg = ft.sizing(kw, prof, pre, w)
    cmd = f"python -m sglang.launch_server --model-path zai-org/GLM-5.3-Flash {COMMAND[pid]} {shlex.join(argv)}"
    try:
        parse_launch_command(cmd, layout="0.5.23")
        mine = None
    except ProfileError as e:
        mine = str(e)
    if "errors" not in sg:
        assert mine is None, (argv, pid, mine)
        return
    said = " ".join(sg["errors"]["message"].split())
    assert mine is not None, (argv, pid, "SGLang refuses:", said)
    # SGLang's words; a config its model refuses is quoted by its prefix (pydantic's report follows it there)
    assert (said in mine) or (said.startswith("--kv-events-config is not parseable:")
                              and "--kv-events-config is not parseable:" in mine), (said, mine)


def test_planted_overlap_off_by_one_is_caught(sglang_ready, monkeypatch):
    import glm_kv.inputs.load_publish as lp

    real = lp.load_pub_range

    def planted(kv, replay, dp, mode):
        return real(kv, replay, dp + 1 if (mode or "").startswith("tcp") else dp, mode)
    monkeypatch.setattr(lp, "load_pub_range", planted)
    assert _grid_mismatches() != []


def test_planted_u16_ceiling_is_caught(sglang_ready, monkeypatch):
    import glm_kv.inputs.load_publish as lp

    monkeypatch.setattr(lp, "PORT_MAX", 65536)
    assert _grid_mismatches() != []


@pytest.mark.parametrize("raw", [c for c in CONFIGS if c])
def test_kv_events_config_alone_is_refused_where_sglangs_scheduler_fails(sglang_ready, raw):
    """Without --load-publish-endpoint the config is still read by every scheduler at start-up
    (``uses_dynamo_format``): glm-kv refuses exactly the values that raise there."""
    import shlex

    from sglang.srt.disaggregation.kv_events import uses_dynamo_format

    from glm_kv.errors import ProfileError
    from glm_kv.inputs.launch import parse_launch_command

    try:
        uses_dynamo_format(raw)
        fails = False
    except Exception:   # noqa: BLE001 - the scheduler's start-up failure
        fails = True
    cmd = f"python -m sglang.launch_server --model-path zai-org/GLM-5.3-Flash --kv-events-config {shlex.quote(raw)}"
    try:
        parse_launch_command(cmd, layout="0.5.23")
        refused = False
    except ProfileError as e:
        refused = e.field == "--kv-events-config"
    assert refused == fails, (raw, fails)
