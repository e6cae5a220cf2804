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


@pytest.mark.parametrize("content", [None, ""])
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
    assert kv.ranks == (("DP", 3), ("TP", 3), ("EP", 3)) and kv.values[1:4] == ("torch.float8_e4m3fn", 1024, 1.5)
    assert kv.values[4:] == (None, None)   # one KV size: an MLA pool
    assert host.kind == "host_kv" and host.values[1:3] == (2560, 0.03)


def test_mha_pool_line_reads_k_plus_v():
    """memory_pool.py:2087 (an MHA/GQA pool): "K size: A GB, V size: B GB" is a pool of A + B GB."""
    (kv,) = parse_boot_log("[2026-10-05 12:00:00 TP0] KV Cache is allocated. dtype: torch.bfloat16, "
                           "#tokens: 3808256, K size: 9.08 GB, V size: 9.07 GB\n").lines
    assert kv.kind == "kv_cache" and kv.values[1:] == ("torch.bfloat16", 3808256, 18.15, 9.08, 9.07)


# --- issue 20: honest verify ------------------------------------------------------------------

# An excerpt like the one in sglang #40558: weights loaded, the multimodal reservation, the pool end,
# but no line that states a pool. The old verify compared the multimodal reservation and said "agrees".
NO_POOL_EXCERPT = """\
[2026-11-30 12:00:01] Load weight begin. avail mem=139.23 GB
[2026-11-30 12:00:20] Load weight end. elapsed=18.52 s, type=Glm5NextForConditionalGeneration, quant=fp8, \
fmt=e4m3, avail mem=69.38 GB, mem usage=69.85 GB.
[2026-11-30 12:00:30] Reserving 0.10 GB of the KV budget for post-sizing multimodal allocations (feature-transport \
pools + embedding cache).
[2026-11-30 12:00:31] Memory pool end. avail mem=9.50 GB
"""


@pytest.mark.parametrize("text", [NO_POOL_EXCERPT, "just some text\nno sglang here\n"], ids=["inputs-only", "no-line"])
@pytest.mark.parametrize("json_out", [False, True])
def test_no_pool_line_is_nothing_to_verify(capsys, tmp_path, text, json_out):
    path = tmp_path / "excerpt.log"
    path.write_text(text)
    rc, out, err = run(capsys, "verify", "--boot-log", str(path), "--profile", str(LOGS / "h200-tp1-auto-mrr.yaml"),
                       *(["--json"] if json_out else []))
    assert rc == 3, (rc, out, err)
    assert err.count("\n") == 1 and "nothing to verify" in err and "agree" not in out
    assert "KV Cache is allocated" in err and "Mamba Cache is allocated" in err    # what it looked for
    if "Load weight" in text:
        assert "1 x 'Load weight begin" in err and "1 x 'Reserving" in err          # what it found
    else:
        assert "no SGLang memory line at all" in err
    if json_out:
        d = json.loads(out)
        assert d["ok"] is None and d["nothing_to_verify"] and len(d["looked_for"]) >= 5


def test_nothing_to_verify_catches_the_old_behaviour(capsys, tmp_path, monkeypatch):
    """Planted error: without the pool-line rule the excerpt 'agrees' again (what sglang #40558 showed)."""
    import glm_kv.ledgers.verify as verify

    monkeypatch.setattr(verify, "POOL_KINDS", tuple(verify.LOOKED_FOR))
    path = tmp_path / "excerpt.log"
    path.write_text(NO_POOL_EXCERPT)
    rc, out, _ = run(capsys, "verify", "--boot-log", str(path), "--profile", str(LOGS / "h200-tp1-auto-mrr.yaml"),
                     "--json")
    assert rc == 0 and json.loads(out)["ok"]   # the symptom: agreement on nothing


def test_every_pattern_has_a_reader_description():
    from glm_kv.inputs.boot_log import LOOKED_FOR, PATTERNS, POOL_KINDS

    assert set(LOOKED_FOR) == set(PATTERNS) and set(POOL_KINDS) <= set(PATTERNS)


@pytest.mark.parametrize("name", CASES)
def test_every_compared_quantity_is_listed(capsys, name):
    rc, out, _ = run(capsys, "verify", "--boot-log", str(LOGS / f"{name}.log"),
                     "--profile", str(LOGS / f"{name}.yaml"), "--json")
    res = json.loads(out)
    checked = [r for r in res["lines"] if r["ok"] is not None]
    assert all(r["predicted"] is not None and r["logged"] is not None for r in checked)
    summary = [n for n in res["notes"] if n.startswith("compared ")]
    assert summary == [f"compared {len(checked)} quantities: {len(checked)} agree, 0 disagree"]


# (fixture, regex, change, words the explanation must hold)
EXPLAINED = [
    ("h200-tp1-auto-mrr", r"(#tokens: )(\d+)", lambda n: str(int(n) + 400 * 256),
     ("GiB more", "weights_bytes", "mem_fraction_static", "pre_model_load_bytes")),
    ("h200-tp1-auto-mrr", r"(max_mamba_cache_size: )(\d+)", lambda n: str(int(n) - 3),
     ("GiB less", "weights_bytes", "mem_fraction_static")),
    ("h200-tp1-auto-mrr", r"(dtype: )(torch\.bfloat16)", lambda n: "torch.float8_e4m3fn", ("kv_cache_dtype",)),
    ("h200-tp1-auto-mrr", r"(context_len=)(\d+)", lambda n: "65536", ("context_length",)),
    ("h200-tp1-auto-mrr", r"(, )(5)( state slots)", lambda n: "4", ("mamba_scheduler_strategy",)),
]


@pytest.mark.parametrize("name,pattern,change,words", EXPLAINED, ids=[e[1][:20] for e in EXPLAINED])
def test_disagreement_names_the_input(capsys, tmp_path, name, pattern, change, words):
    text = (LOGS / f"{name}.log").read_text()
    m = re.search(pattern, text)
    assert m, pattern
    path = tmp_path / "bad.log"
    path.write_text(text[: m.start(2)] + change(m.group(2)) + text[m.end(2):])
    rc, out, _ = run(capsys, "verify", "--boot-log", str(path), "--profile", str(LOGS / f"{name}.yaml"), "--json")
    res = json.loads(out)
    bad = [r for r in res["lines"] if r["ok"] is False]
    assert rc == 1 and bad
    notes = " ".join(r["note"] for r in bad)
    for w in words:
        assert w in notes, (w, notes)
