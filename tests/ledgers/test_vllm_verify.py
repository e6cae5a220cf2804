"""glm-kv's vLLM verify (glm_kv/ledgers/vllm_verify.py) on boot lines vLLM 0.33.0 itself printed.

The fixtures in vllm_boot_logs/ are vLLM's own ``GPU KV cache size ... Maximum concurrency ...`` lines,
collected by tests/vllm/oracle.py (``_vllm_log``: vLLM's formatter, while vLLM sized the launch in the
.json beside each; ``vllm_said`` there is vLLM's answer, kept for the reader, never read by the verify).
Expected verdicts never come from glm_kv: a clean log must agree, and a log with one number changed
must disagree on that line. ``Available KV cache memory`` lines are composed from the 0.33.0 format
string (v1/worker/gpu_worker.py:772-775: the profile run that prints them cannot run on a CPU).
"""
from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from glm_kv.errors import ProfileError
from glm_kv.inputs.hf_config import load_hf_config
from glm_kv.inputs.vllm_boot_log import parse_vllm_boot_log
from glm_kv.ledgers.verify import NothingToVerify
from glm_kv.ledgers.vllm import VllmArgs
from glm_kv.ledgers.vllm_verify import format_gib, verify_vllm_boot_log

LOGS = Path(__file__).resolve().parent / "vllm_boot_logs"
CASES = sorted(p.stem for p in LOGS.glob("*.log"))


def case(name: str) -> tuple:
    meta = json.loads((LOGS / f"{name}.json").read_text())
    launch = meta["launch"]
    return load_hf_config(launch["model"]), VllmArgs.from_launch(launch), (LOGS / f"{name}.log").read_text()


def rows_of(res) -> dict:
    return {r.quantity: r for r in res.rows}


def memory_line(gib: float, proc: str = "Worker_TP0", pid: int = 1) -> str:
    return f"({proc} pid={pid}) INFO 01-01 00:00:00 [gpu_worker.py:772] Available KV cache memory: {gib} GiB"


def test_fixtures_exist():
    assert len(CASES) >= 3, CASES


@pytest.mark.parametrize("name", CASES)
def test_vllm_printed_lines_agree(name):
    cfg, args, text = case(name)
    res = verify_vllm_boot_log(cfg, args, parse_vllm_boot_log(text, name))
    checked = [r for r in res.rows if r.ok is not None]
    assert res.ok and len(checked) == 4, [(r.quantity, r.predicted, r.logged) for r in res.rows]
    assert all(r.predicted_range is None for r in checked)   # exact memory: exact predictions
    assert res.to_dict()["server"] == "vllm 0.33.0"


@pytest.mark.parametrize("name", CASES)
def test_memory_read_off_the_log(name):
    cfg, args, text = case(name)
    log = parse_vllm_boot_log(memory_line(format_gib(args.kv_cache_memory_bytes)) + "\n" + text)
    res = verify_vllm_boot_log(cfg, replace(args, kv_cache_memory_bytes=0), log)
    assert res.ok, [(r.quantity, r.predicted_range, r.logged) for r in res.rows]
    assert res.inputs_from_log["kv_cache_memory_gib"] == format_gib(args.kv_cache_memory_bytes)
    assert any("read off the log" in n for n in res.notes)
    assert rows_of(res)["Available KV cache memory (input)"].ok is None


# (fixture, regex of the number to change, replacement, the row that must disagree)
CORRUPTIONS = [
    ("glm-5.3-flash-h200-tp8", r"(cache size: )([\d,]+)", lambda n: f"{int(n.replace(',', '')) + 1:,}",
     "GPU KV cache size"),
    ("qwen3.5-h200-tp8-fp8", r"(per request: )([\d.]+)", lambda n: f"{float(n) + 0.01:.2f}", "Maximum concurrency"),
    ("kimi-k3-h200-tp4-131k", r"(concurrency for )([\d,]+)", lambda n: "262,144", "max_model_len (tokens per request)"),
    ("kimi-k3-h200-tp4-131k", r"(\] )(GPU)", lambda n: "GPU + host", "KV cache pools"),
]


@pytest.mark.parametrize("name,pattern,change,quantity", CORRUPTIONS)
def test_a_changed_number_disagrees(name, pattern, change, quantity):
    cfg, args, text = case(name)
    bad = re.sub(pattern, lambda m: m.group(1) + change(m.group(2)), text, count=1)
    assert bad != text
    res = verify_vllm_boot_log(cfg, args, parse_vllm_boot_log(bad))
    assert not res.ok
    assert [r.quantity for r in res.rows if r.ok is False] == [quantity], res.rows


def test_a_plan_one_block_short_disagrees():
    cfg, args, text = case("glm-5.3-flash-h200-tp8")
    good = verify_vllm_boot_log(cfg, args, parse_vllm_boot_log(text))
    short = replace(args, kv_cache_memory_bytes=args.kv_cache_memory_bytes - good.plan.bytes_per_block)
    res = verify_vllm_boot_log(cfg, short, parse_vllm_boot_log(text))
    row = rows_of(res)["GPU KV cache size"]
    assert not res.ok and row.ok is False and row.predicted < row.logged
    assert "blocks" in row.note and f"{good.plan.num_blocks:,}" in row.note   # the log implies the right count


def test_memory_far_from_the_log_disagrees():
    cfg, args, text = case("qwen3.5-h200-tp8-fp8")
    log = parse_vllm_boot_log(memory_line(format_gib(args.kv_cache_memory_bytes) - 0.5) + "\n" + text)
    res = verify_vllm_boot_log(cfg, replace(args, kv_cache_memory_bytes=0), log)
    assert not res.ok and rows_of(res)["GPU KV cache size"].ok is False


def test_the_least_memory_over_processes_is_the_input():
    cfg, args, text = case("qwen3.5-h200-tp8-fp8")
    gib = format_gib(args.kv_cache_memory_bytes)
    lines = [memory_line(gib + 1.0, "Worker_TP0", 1), memory_line(gib, "Worker_TP4", 2), text]
    res = verify_vllm_boot_log(cfg, replace(args, kv_cache_memory_bytes=0), parse_vllm_boot_log("\n".join(lines)))
    assert res.ok and res.inputs_from_log["kv_cache_memory_gib"] == gib
    assert "2 process(es)" in res.notes[0]


def test_launch_memory_is_checked_against_the_reserved_line():
    cfg, args, text = case("kimi-k3-h200-tp4-131k")
    gib = format_gib(args.kv_cache_memory_bytes)
    reserved = ("(Worker_TP0 pid=3) INFO 01-01 00:00:00 [gpu_worker.py:676] Initial free memory 120.5 GiB, "
                f"reserved {gib} GiB memory for KV Cache as specified by kv_cache_memory_bytes config and skipped "
                "memory profiling.")
    assert verify_vllm_boot_log(cfg, args, parse_vllm_boot_log(reserved + "\n" + text)).ok
    other = reserved.replace(f"reserved {gib} GiB", f"reserved {gib + 1} GiB")
    res = verify_vllm_boot_log(cfg, args, parse_vllm_boot_log(other + "\n" + text))
    assert not res.ok and "differs" in rows_of(res)["KV memory reserved (--kv-cache-memory-bytes)"].note


def test_two_line_form_is_checked_with_a_note():
    cfg, args, text = case("qwen3.5-h200-tp8-fp8")
    two = ("INFO 01-01 00:00:00 [kv_cache_utils.py:1319] GPU KV cache size: 12,315,130 tokens\n"
           "INFO 01-01 00:00:00 [kv_cache_utils.py:1324] Maximum concurrency for 262,144 tokens per request: 46.98x\n")
    res = verify_vllm_boot_log(cfg, args, parse_vllm_boot_log(two))
    assert res.ok and "vllm#40691" in rows_of(res)["GPU KV cache size"].note


def test_nothing_to_verify():
    # vllm#49878 (v0.26): the memory line only; the engine failed before the capacity line
    only_memory = ("(EngineCore pid=83) INFO 07-26 12:29:34 [gpu_worker.py:479] Initial free memory 93.88 GiB, "
                   "reserved 49.0 GiB memory for KV Cache as specified by kv_cache_memory_bytes config and skipped "
                   "memory profiling.")
    cfg, args, _ = case("qwen3.5-h200-tp8-fp8")
    for text, found in ((only_memory, {"reserved_kv": 1}), ("hello", {})):
        with pytest.raises(NothingToVerify) as e:
            verify_vllm_boot_log(cfg, args, parse_vllm_boot_log(text))
        assert "GPU KV cache size" in str(e.value) and "SGLang" not in str(e.value)
        assert e.value.found == found
    assert "no vLLM memory line at all" in str(e.value)


def test_no_memory_anywhere_is_bad_input():
    cfg, args, text = case("qwen3.5-h200-tp8-fp8")
    with pytest.raises(ProfileError, match="nothing to size from"):
        verify_vllm_boot_log(cfg, replace(args, kv_cache_memory_bytes=0), parse_vllm_boot_log(text))
