"""`glm-kv verify` against boot logs whose pool lines SGLang 0.5.23's own classes printed.

The fixtures in boot_logs/ are written by tests/sglang/capture_boot_logs.py: the pool, cap and
HiCache lines are the messages SGLang's code logged while sizing and building the pools (CPU,
device pools on meta); Load weight / scheduler lines are composed from the wheel's format strings
with the values SGLang computed. Expected verdicts are never taken from glm_kv: a clean log must
agree, and a log with one number corrupted must disagree on that line.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from glm_kv.cli import main
from glm_kv.inputs.boot_log import parse_boot_log

LOGS = Path(__file__).resolve().parent / "boot_logs"
CASES = sorted(p.stem for p in LOGS.glob("*.log"))


def run(capsys, *argv) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_fixtures_exist():
    assert len(CASES) >= 4, CASES


@pytest.mark.parametrize("name", CASES)
def test_sglang_emitted_log_agrees(capsys, name):
    rc, out, err = run(capsys, "verify", "--boot-log", str(LOGS / f"{name}.log"),
                       "--profile", str(LOGS / f"{name}.yaml"), "--json")
    assert rc == 0, out + err
    res = json.loads(out)
    checked = [r for r in res["lines"] if r["ok"] is not None]
    assert res["ok"] and len(checked) >= 8
    kinds = {r["quantity"] for r in checked}
    assert {"max_mamba_cache_size", "KV Cache #tokens", "max_total_num_tokens"} <= kinds
    assert res["inputs_from_log"]["pre_model_load_gib"] > 0


# (fixture, regex of the number to corrupt, replacement function): each hits a different line kind
CORRUPTIONS = [
    ("h200-tp8-dp8-dpattn", r"(#tokens: )(\d+)", lambda n: str(int(n) + 40 * 256)),
    ("h200-tp8-dp8-dpattn", r"(max_mamba_cache_size: )(\d+)", lambda n: str(int(n) + 1)),
    ("h200-tp8-dp8-dpattn", r"(ssm_state size: )([\d.]+)", lambda n: f"{float(n) + 0.02:.2f}"),
    ("h200-tp1-mtp-hicache", r"(capped to )(\d+)", lambda n: str(int(n) + 1)),
    ("h200-tp1-mtp-hicache", r"(KV host pool: )(\d+)", lambda n: str(int(n) + 20 * 256)),
    ("h200-tp1-mtp-hicache", r"(Allocating )([\d.]+)( GB host memory for hierarchical Mamba)",
     lambda n: f"{float(n) + 0.2:.2f}"),
    ("b200-tp8-fp8-hicache-size", r"(Allocating )([\d.]+)( GB host memory for DSA)", lambda n: f"{float(n) * 1.1:.2f}"),
    ("h200-tp8-dpattn-hicache-auto", r"(max_running_requests=)(\d+)", lambda n: str(int(n) - 1)),
    ("h200-tp8-dpattn-hicache-auto", r"(ratio 2\.000 -> )([\d.]+)", lambda n: f"{float(n) + 0.01:.3f}"),
    ("h200-tp1-auto-mrr", r"(max_total_num_tokens=)(\d+)", lambda n: str(int(n) + 100 * 256)),
]


@pytest.mark.parametrize("name,pattern,change", CORRUPTIONS, ids=[f"{c[0]}:{c[1][:24]}" for c in CORRUPTIONS])
def test_corrupted_number_disagrees(capsys, tmp_path, name, pattern, change):
    text = (LOGS / f"{name}.log").read_text()
    hits = list(re.finditer(pattern, text))
    assert hits, pattern
    m = hits[0]
    line_no = text[: m.start()].count("\n") + 1
    bad = text[: m.start(2)] + change(m.group(2)) + text[m.end(2):]
    path = tmp_path / "bad.log"
    path.write_text(bad)
    rc, out, _ = run(capsys, "verify", "--boot-log", str(path), "--profile", str(LOGS / f"{name}.yaml"), "--json")
    res = json.loads(out)
    assert rc == 1 and not res["ok"]
    failing = {r["log_line"] for r in res["lines"] if r["ok"] is False}
    assert line_no in failing, (line_no, failing)


def test_wrong_profile_disagrees(capsys):
    """The log of a DP-attention server does not fit a plan without DP attention."""
    rc, out, _ = run(capsys, "verify", "--boot-log", str(LOGS / "h200-tp8-dp8-dpattn.log"),
                     "--profile", "tp8", "--set", "sglang_layout=0.5.23", "--json")
    assert rc == 1 and not json.loads(out)["ok"]


@pytest.mark.parametrize("name", [c for c in CASES if "hicache" in c])
def test_log_with_host_pools_against_a_profile_without_hicache(capsys, name):
    """The server ran HiCache, the default profile does not: a disagreement per host line, no traceback."""
    rc, out, err = run(capsys, "verify", "--boot-log", str(LOGS / f"{name}.log"), "--json")
    assert rc == 1 and "Traceback" not in err, err
    rows = json.loads(out)["lines"]
    host_rows = [r for r in rows if r["quantity"].startswith("host")]
    assert host_rows and not any(r["ok"] for r in host_rows)


def test_table_output(capsys):
    rc, out, _ = run(capsys, "verify", "--boot-log", str(LOGS / "h200-tp1-auto-mrr.log"),
                     "--profile", str(LOGS / "h200-tp1-auto-mrr.yaml"))
    assert rc == 0 and "agrees" in out and "OK: every checked line agrees" in out


@pytest.mark.parametrize("content", [None, "", "just some text\nno sglang here\n"])
def test_unreadable_input_exits_2(capsys, tmp_path, content):
    path = tmp_path / "x.log"
    if content is not None:
        path.write_text(content)
    rc, out, err = run(capsys, "verify", "--boot-log", str(path), "--profile", "h200-0.5.23")
    assert rc == 2 and out == "" and err.count("\n") == 1 and "--boot-log" in err


def test_log_without_load_lines_needs_profile_memory(capsys, tmp_path):
    lines = [ln for ln in (LOGS / "h200-tp1-auto-mrr.log").read_text().splitlines() if "Load weight" not in ln]
    path = tmp_path / "no-load.log"
    path.write_text("\n".join(lines) + "\n")
    rc, _, err = run(capsys, "verify", "--boot-log", str(path), "--profile", str(LOGS / "h200-tp1-auto-mrr.yaml"))
    assert rc == 2 and "Load weight" in err


def test_prefix_and_units_parsed():
    log = parse_boot_log(
        "[2026-10-05 12:00:00.123 DP3 TP3 EP3] KV Cache is allocated. dtype: torch.float8_e4m3fn, "
        "#tokens: 1024, KV size: 1.50 GB\n"
        "[2026-10-05 12:00:01 TP0] Allocating kv hierarchical KV host pool: 2560 tokens, 0.03 GB host memory.\n"
        "unrelated line\n")
    kv, host = log.lines
    assert kv.ranks == (("DP", 3), ("TP", 3), ("EP", 3)) and kv.values[1:] == ("torch.float8_e4m3fn", 1024, 1.5)
    assert host.kind == "host_kv" and host.values[1:3] == (2560, 0.03)
