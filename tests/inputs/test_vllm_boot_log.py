"""Reading vLLM boot logs (glm_kv/inputs/vllm_boot_log.py): public logs of hybrid (and other) models as
posted in issues, and bad input.

The public lines are quoted only as far as the reader needs them, each with its source and the vLLM
build it came from. None of these launches can be reconstructed here (models not vendored, GPUs not
modelled, or the build unknown), so they test the reading only; the verdicts are tested on the lines
vLLM 0.33.0 itself printed (tests/ledgers/test_vllm_verify.py, tests/vllm/test_vllm_verify.py).
"""
from __future__ import annotations

import pytest

from glm_kv.errors import ProfileError
from glm_kv.inputs.vllm_boot_log import LOG_MAX_BYTES, PATTERNS, PREFIX, parse_vllm_boot_log, read_vllm_boot_log

# https://github.com/vllm-project/vllm/issues/40691 (vLLM 0.19.0, Qwen3.5-27B, H20): the two-line form,
# pasted without the process part; its tokens are the pre-fix figure (not int(concurrency x length))
ISSUE_40691 = """\
`INFO [kv_cache_utils.py:1319] GPU KV cache size: 290,864 tokens`
`INFO [kv_cache_utils.py:1324] Maximum concurrency for 32,768 tokens per request: 33.04x`
"""
# https://github.com/noonghunna/club-3090/issues/652 (vLLM 0.24.0, Qwen3.6-35B-A3B NVFP4, RTX 5090)
CLUB3090_652 = """\
(EngineCore pid=107) INFO 07-09 02:58:11 [gpu_worker.py:508] Available KV cache memory: 6.01 GiB
(EngineCore pid=107) INFO 07-09 02:58:11 [kv_cache_utils.py:2146] GPU KV cache size: 569,878 tokens
(EngineCore pid=107) INFO 07-09 02:58:11 [kv_cache_utils.py:2147] Maximum concurrency for 131,072 tokens per request: 4.35x
"""
# https://github.com/LMCache/LMCache/issues/1739 (build not stated, Oct 2025; Qwen3-14B): the DP-ranked engine core
LMCACHE_1739 = """\
(EngineCore_DP0 pid=1133552) INFO 10-03 16:22:17 [gpu_worker.py:298] Available KV cache memory: 6.51 GiB
(EngineCore_DP0 pid=1133552) INFO 10-03 16:22:17 [kv_cache_utils.py:864] GPU KV cache size: 42,656 tokens
(EngineCore_DP0 pid=1133552) INFO 10-03 16:22:17 [kv_cache_utils.py:868] Maximum concurrency for 32,768 tokens per request: 1.30x
"""
# https://github.com/MiaAI-Lab/GLM-5.3-Flash-EXL3-2x-DGX-Sparks/pull/94 (a vLLM fork, build not stated;
# GLM-5.3-Flash + DFlash2 drafter): the one-line form of 0.3x builds, quoted without the prefix
MIAAI_94 = "GPU KV cache size: 1,553,140 tokens, Maximum concurrency for 1,000,000 tokens per request: 1.55x\n"
# https://github.com/vllm-project/vllm/issues/49878 (v0.26 per the issue title, Gemma 4): launched with
# --kv-cache-memory-bytes; the engine failed to start after it (no capacity line)
ISSUE_49878 = ("(EngineCore pid=83) INFO 07-26 12:29:34 [gpu_worker.py:479] Initial free memory 93.88 GiB, reserved "
               "49.0 GiB memory for KV Cache as specified by kv_cache_memory_bytes config and skipped memory "
               "profiling. This does not respect the gpu_memory_utilization config.\n")
# https://github.com/vllm-project/vllm/issues/42911 (vLLM 0.19.1, Qwen3.6-27B-FP8): a TP x EP worker's prefix
ISSUE_42911 = ("(Worker_TP0_EP0 pid=10816) ERROR 06-15 08:40:03 [multiproc_executor.py:962] ValueError: Hybrid KV "
               "cache manager is disabled but failed to convert the KV cache specs to one unified type.")


def test_two_line_form_of_earlier_builds():
    log = parse_vllm_boot_log(ISSUE_40691)
    assert [ln.kind for ln in log.lines] == ["kv_size_line", "concurrency_line"]
    assert log.lines[0].values == ("GPU", 290864)
    assert log.lines[1].values == (32768, 33.04)
    assert log.lines[0].source_file == "kv_cache_utils.py:1319" and log.lines[0].process == ""


def test_engine_core_lines_with_memory():
    log = parse_vllm_boot_log(CLUB3090_652)
    assert [ln.kind for ln in log.lines] == ["available_kv", "kv_size_line", "concurrency_line"]
    assert log.of("available_kv")[0].values == (6.01,)
    size, conc = log.of("kv_size_line")[0], log.of("concurrency_line")[0]
    assert (size.process, size.pid, size.ranks) == ("EngineCore", 107, ())
    # a build after vllm#40694: tokens = int(concurrency x length), so tokens / length rounds to the print
    assert f"{size.values[1] / conc.values[0]:.2f}" == f"{conc.values[1]:.2f}"


def test_dp_ranked_engine_core():
    log = parse_vllm_boot_log(LMCACHE_1739)
    assert {ln.process for ln in log.lines} == {"EngineCore_DP0"}
    assert log.lines[0].ranks == (("DP", 0),) and log.lines[0].rank_label == "EngineCore_DP0"
    assert len(log.per_process()) == 1
    assert log.of("kv_size_line")[0].values[1] == 42656


def test_one_line_form():
    (ln,) = parse_vllm_boot_log(MIAAI_94).lines
    assert ln.kind == "kv_capacity" and ln.values == ("GPU", 1553140, 1000000, 1.55)


def test_reserved_memory_line():
    (ln,) = parse_vllm_boot_log(ISSUE_49878).lines
    assert ln.kind == "reserved_kv" and ln.values == (93.88, 49.0)
    assert ln.source_file == "gpu_worker.py:479"


def test_worker_prefix_ranks():
    m = PREFIX.match(ISSUE_42911)
    assert m and m.group("proc") == "Worker_TP0_EP0" and m.group("level") == "ERROR"
    from glm_kv.inputs.vllm_boot_log import _ranks

    assert _ranks("Worker_DP1_PP0_TP3_EP3") == (("DP", 1), ("PP", 0), ("TP", 3), ("EP", 3))
    assert parse_vllm_boot_log(ISSUE_42911).lines == ()


def test_colour_and_logging_prefix_are_read():
    coloured = ("MYPREFIX \x1b[0;36m(EngineCore pid=5)\x1b[0;0m \x1b[32mINFO\x1b[0m \x1b[90m12-03 15:56:11\x1b[0m "
                "\x1b[90m[kv_cache_utils.py:1147]\x1b[0m GPU KV cache size: 12,315,130 tokens, Maximum concurrency "
                "for 262,144 tokens per request: 46.98x")
    (ln,) = parse_vllm_boot_log(coloured).lines
    assert (ln.process, ln.pid, ln.values) == ("EngineCore", 5, ("GPU", 12315130, 262144, 46.98))


def test_every_pattern_names_its_place():
    for kind, (_, where) in PATTERNS.items():
        assert ".py:" in where or where.startswith("not in 0.33.0"), kind


def test_a_changed_message_is_not_read():
    # 0.33.0 prints "%.2fx"; a three-decimal concurrency is another format, not this one
    assert parse_vllm_boot_log("GPU KV cache size: 1 tokens, Maximum concurrency for 2 tokens per request: "
                               "0.500x").lines == ()


def test_bad_input(tmp_path):
    missing = tmp_path / "nope.log"
    with pytest.raises(ProfileError, match="does not exist"):
        read_vllm_boot_log(str(missing))
    with pytest.raises(ProfileError, match="unreadable"):
        read_vllm_boot_log(str(tmp_path))
    empty = tmp_path / "empty.log"
    empty.write_text("  \n")
    with pytest.raises(ProfileError, match="empty"):
        read_vllm_boot_log(str(empty))
    binary = tmp_path / "core.bin"
    binary.write_bytes(b"\x7fELF\x00\x00\x01" * 100)
    with pytest.raises(ProfileError, match="binary"):
        read_vllm_boot_log(str(binary))
    big = tmp_path / "big.log"
    with open(big, "wb") as f:
        f.truncate(LOG_MAX_BYTES + 1)   # sparse: the size check comes before any read
    with pytest.raises(ProfileError, match="larger than"):
        read_vllm_boot_log(str(big))
    for err in (ProfileError("--boot-log", "x"),):
        assert "\n" not in str(err)


def test_unrecognised_text_is_not_bad_input(tmp_path):
    p = tmp_path / "other.log"
    p.write_text("hello\nworld\n")
    log = read_vllm_boot_log(str(p))
    assert log.lines == () and log.total_lines == 2
