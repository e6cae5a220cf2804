"""Read a vLLM 0.33.0 server log: the lines that state the KV-cache memory and capacity, per process.

Each pattern is the regex of one format string in the 0.33.0 wheel (file:line, relative to ``vllm/``, in
``PATTERNS``), so a reworded line in another build is not silently read as this one; the two-line form
of builds before the one-line capacity message (e.g. v0.19.0 in vllm#40691, v0.24.0) is read too and
marked as such, since public logs are mostly from those builds.

Units as vLLM prints them: "GiB" is 2^30 bytes (``format_gib`` in utils/mem_utils.py:30-31 is
``round(bytes / GiB_bytes, 2)`` printed with ``str``, ``GiB_bytes = 1 << 30`` in utils/mem_constants.py:18),
so "59.5" means 59.50 +- 0.005 GiB; token counts carry thousands separators (``f"{n:,}"``); the
concurrency is ``%.2fx``.

The prefix is logger.py's ``_FORMAT`` (logger.py:28-32):
``{VLLM_LOGGING_PREFIX}(%(vllm_process_name)s pid=%(process)d) %(levelname)s %(asctime)s
[%(fileinfo)s:%(lineno)d] %(message)s`` with ``%m-%d %H:%M:%S`` dates; the process name is
``EngineCore`` / ``EngineCore_DP<r>`` (v1/engine/core.py:1476-1484), ``Worker[_DP<r>][_PP<r>][_PCP<r>]
[_TP<r>][_DCP<r>][_EP<r>]`` (v1/executor/multiproc_executor.py:1193-1229) or ``APIServer``. Colour codes
(logging_utils/formatter.py ``ColoredFormatter``) are stripped; lines without the prefix (excerpts pasted
into issues) are read too.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from .boot_log import LOG_MAX_BYTES, read_log_text  # noqa: F401 - LOG_MAX_BYTES: the same cap, re-exported

ANSI = re.compile(r"\x1b\[[0-9;]*m")
# "(EngineCore_DP0 pid=123) INFO 12-03 15:56:11 [kv_cache_utils.py:1147] msg"; older builds: no process
# part, "INFO 02-20 00:01:02 kv_cache_utils.py:522] msg"; excerpts: "INFO [kv_cache_utils.py:1319] msg"
PREFIX = re.compile(
    r"^(?:.*?\((?P<proc>[A-Za-z][\w.-]*) pid=(?P<pid>\d+)\) )?"
    r"(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) "
    r"(?:(?P<time>\d\d-\d\d \d\d:\d\d:\d\d)(?:\.\d+)? )?"
    r"\[?(?P<file>[\w./-]+\.py):(?P<lineno>\d+)\] (?P<msg>.*)$")
RANK = re.compile(r"_(DP|PP|PCP|TP|DCP|EP)(\d+)")
NUM = r"(\d+(?:\.\d+)?)"
TOKENS = r"(\d{1,3}(?:,\d{3})*)"

# name -> (regex over the message, where the format string lives in the 0.33.0 wheel)
PATTERNS: dict[str, tuple[re.Pattern, str]] = {
    # values: (pools, tokens, max_model_len, concurrency as printed)
    "kv_capacity": (re.compile(rf"((?:GPU|[A-Z]+)(?: \+ host)?) KV cache size: {TOKENS} tokens, "
                               rf"Maximum concurrency for {TOKENS} tokens per request: (\d+\.\d\d)x"),
                    "v1/core/kv_cache_utils.py:1147-1153 (update_kv_cache_capacity)"),
    # builds before the one-line message (not in 0.33.0): two lines from _report_kv_cache_config
    "kv_size_line": (re.compile(rf"^((?:GPU|[A-Z]+)) KV cache size: {TOKENS} tokens$"),
                     "not in 0.33.0: _report_kv_cache_config of earlier builds (vllm#13596 .. v0.2x)"),
    "concurrency_line": (re.compile(rf"^Maximum concurrency for {TOKENS} tokens per request: (\d+\.\d\d)x$"),
                         "not in 0.33.0: _report_kv_cache_config of earlier builds (vllm#12569 .. v0.2x)"),
    # values: (GiB)
    "available_kv": (re.compile(rf"Available KV cache memory: {NUM} GiB"),
                     "v1/worker/gpu_worker.py:772-775 (determine_available_memory, after the profile)"),
    # values: (initial free GiB, reserved GiB)
    "reserved_kv": (re.compile(rf"Initial free memory {NUM} GiB, reserved {NUM} GiB memory for KV Cache as "
                               r"specified by kv_cache_memory_bytes config"),
                    "v1/worker/gpu_worker.py:664-676 (kv_cache_memory_bytes: no profile)"),
    # values: (reserved GiB, raw-frame GiB, decoder GiB, API servers, per server GiB, remaining GiB)
    "mm_reduced": (re.compile(rf"Reserving {NUM} GiB of GPU memory for frontend multimodal decoding \({NUM} GiB "
                              rf"raw-frame semaphore budget, {NUM} GiB decoder\+CUDA-context across (\d+) API "
                              rf"server\(s\) @ {NUM} GiB/server\); KV cache memory reduced to {NUM} GiB\."),
                   "multimodal/gpu_ipc_memory.py:255-263 (reserve_mm_ipc_gpu_memory)"),
    # values: (blocks the memory gives, override)
    "blocks_override": (re.compile(r"Overriding num_gpu_blocks=(\d+) with num_gpu_blocks_override=(\d+)"),
                        "v1/core/kv_cache_planning.py:1525-1529 (get_kv_cache_configs)"),
    # values: (max_model_len, GiB) / (from, to, GiB)
    "auto_fit_full": (re.compile(rf"Auto-fit max_model_len: full model context length (\d+) fits in available "
                                 rf"KV cache memory \({NUM} GiB"),
                      "v1/core/kv_cache_planning.py:1395-1400 (_auto_fit_max_model_len)"),
    "auto_fit_reduced": (re.compile(rf"Auto-fit max_model_len: reduced from (\d+) to (\d+) to fit in available "
                                    rf"KV cache memory \({NUM} GiB"),
                         "v1/core/kv_cache_planning.py:1404-1410 (_auto_fit_max_model_len)"),
}

# What each kind of line looks like to a reader, for "nothing to verify" messages.
LOOKED_FOR: dict[str, str] = {
    "kv_capacity": "GPU KV cache size: ... tokens, Maximum concurrency for ... tokens per request: ...x",
    "kv_size_line": "GPU KV cache size: ... tokens (builds before 0.3x)",
    "concurrency_line": "Maximum concurrency for ... tokens per request: ...x (builds before 0.3x)",
    "available_kv": "Available KV cache memory: ... GiB",
    "reserved_kv": "Initial free memory ... GiB, reserved ... GiB memory for KV Cache as specified by "
                   "kv_cache_memory_bytes config ...",
    "mm_reduced": "Reserving ... GiB of GPU memory for frontend multimodal decoding (...); KV cache memory "
                  "reduced to ... GiB.",
    "blocks_override": "Overriding num_gpu_blocks=... with num_gpu_blocks_override=...",
    "auto_fit_full": "Auto-fit max_model_len: full model context length ... fits in available KV cache memory",
    "auto_fit_reduced": "Auto-fit max_model_len: reduced from ... to ... to fit in available KV cache memory",
}
# The kinds that state what the sizing decided: without one of them there is nothing to verify.
POOL_KINDS = ("kv_capacity", "kv_size_line", "concurrency_line", "blocks_override")
# The kinds that state the KV memory the sizing was given (an input when the launch did not set it).
MEMORY_KINDS = ("mm_reduced", "available_kv", "reserved_kv")


@dataclass(frozen=True)
class VllmLogLine:
    """One recognised line: where it is, which process printed it, and its fields (converted)."""

    line_no: int
    kind: str
    process: str          # "EngineCore_DP0", "Worker_TP1_EP1", ... ("" without vLLM's prefix)
    pid: int | None
    ranks: tuple[tuple[str, int], ...]
    values: tuple
    text: str
    source_file: str = ""     # the [file:line] vLLM printed ("" without it)

    @property
    def rank_label(self) -> str:
        return self.process or "-"

    @property
    def rank_key(self) -> tuple:
        """One key per printing process (a restarted process gets a new pid)."""
        return (self.process, self.pid)


@dataclass(frozen=True)
class VllmBootLog:
    source: str
    lines: tuple[VllmLogLine, ...]
    total_lines: int
    kinds: dict = field(default_factory=dict)

    def of(self, kind: str) -> list[VllmLogLine]:
        return [ln for ln in self.lines if ln.kind == kind]

    def per_process(self) -> dict[tuple, list[VllmLogLine]]:
        """The recognised lines of each printing process, in log order."""
        out: dict[tuple, list[VllmLogLine]] = {}
        for ln in self.lines:
            out.setdefault(ln.rank_key, []).append(ln)
        return out


def _convert(raw: tuple) -> tuple:
    out = []
    for v in raw:
        if v is None:
            out.append(None)
        elif re.fullmatch(r"\d{1,3}(?:,\d{3})+|\d+", v):
            out.append(int(v.replace(",", "")))
        elif re.fullmatch(r"\d+\.\d+", v):
            out.append(float(v))
        else:
            out.append(v)
    return tuple(out)


def _ranks(process: str) -> tuple[tuple[str, int], ...]:
    return tuple((k, int(v)) for k, v in RANK.findall(process))


def parse_vllm_boot_log(text: str, source: str = "<log>") -> VllmBootLog:
    """Every recognised line of a vLLM server log (lines without vLLM's prefix are read too)."""
    lines: list[VllmLogLine] = []
    all_lines = text.splitlines()
    for i, raw in enumerate(all_lines, start=1):
        plain = ANSI.sub("", raw).strip().strip("`").strip()
        m = PREFIX.match(plain)
        msg, process, pid, where = plain, "", None, ""
        if m:
            msg = m.group("msg").strip()
            process = m.group("proc") or ""
            pid = int(m.group("pid")) if m.group("pid") else None
            where = f"{m.group('file')}:{m.group('lineno')}"
        for kind, (pattern, _where) in PATTERNS.items():
            hit = pattern.search(msg)
            if hit:
                lines.append(VllmLogLine(i, kind, process, pid, _ranks(process), _convert(hit.groups()), msg,
                                         where))
                break
    return VllmBootLog(source, tuple(lines), len(all_lines),
                       kinds={k: sum(1 for ln in lines if ln.kind == k) for k in PATTERNS})


def read_vllm_boot_log(path: str) -> VllmBootLog:
    """A log file from disk; unreadable, binary or oversized input is a ProfileError (exit 2)."""
    text = read_log_text(path, refuse_binary=True)
    # A log without any recognised line is not bad input: ``verify`` answers "nothing to verify" (exit 3).
    return parse_vllm_boot_log(text, path)
