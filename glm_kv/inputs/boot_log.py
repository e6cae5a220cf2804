"""Read an SGLang 0.5.23 server log: the lines that state memory and pool sizes, per rank.

Each pattern is the regex of one format string in the 0.5.23 wheel (file:line in ``PATTERNS``).
Units as SGLang prints them: device "GB" is GiB (``GB = 1024**3`` in memory_pool.py, and
``get_available_gpu_memory`` divides by 2^30); host-pool "GB" is 10^9. The prefix is
``configure_logger``'s ``[%Y-%m-%d %H:%M:%S{.ms}{ DPd}{ PPd}{ ATTN_CPd}{ MOE_DPd}{ TPd}{ EPd}]``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ProfileError

LOG_MAX_BYTES = 256 << 20

PREFIX = re.compile(r"^\[(?P<time>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?)(?P<ranks>(?: [A-Z_]+\d+)*)\] (?P<msg>.*)$")
RANK = re.compile(r"([A-Z_]+?)(\d+)")
NUM = r"(-?\d+(?:\.\d+)?)"

# name -> (regex over the message, where the format string lives in the 0.5.23 wheel)
PATTERNS: dict[str, tuple[re.Pattern, str]] = {
    "memory_baseline": (re.compile(rf"Memory baseline taken\. mem usage={NUM} GB"),
                        "srt/distributed/bootstrap.py:219"),
    "load_begin": (re.compile(rf"Load weight begin\. avail mem={NUM} GB"),
                   "srt/model_executor/model_runner.py:1273"),
    "load_end": (re.compile(rf"Load weight end\. elapsed={NUM} s, type=(\w+), (?:.*?, )?avail mem={NUM} GB, "
                            rf"mem usage={NUM} GB\."),
                 "srt/model_executor/model_runner.py:1372"),
    "mm_reserve": (re.compile(rf"Reserving {NUM} GB of the KV budget for post-sizing multimodal"),
                   "srt/mem_cache/kv_cache_configurator.py:214"),
    "mamba_cache": (re.compile(rf"Mamba Cache is allocated\. max_mamba_cache_size: (\d+), conv_state size: "
                               rf"{NUM}GB, ssm_state size: {NUM}GB"
                               rf"(?: intermediate_ssm_state_cache size: {NUM}GB intermediate_conv_window_cache "
                               rf"size: {NUM}GB)?"),
                    "srt/mem_cache/memory_pool.py:1004 (speculative: 983)"),
    # MLA / DSA pools print one KV size; MHA/GQA pools (Qwen3.5, Nemotron-H) print K and V sizes
    # (``_log_kv_size``: a tuple from get_kv_size_bytes); values: (label, dtype, tokens, KV or K + V, K, V)
    "kv_cache": (re.compile(rf"(?:(\S+) )?KV Cache is allocated\. dtype: (\S+), #tokens: (\d+), "
                            rf"(?:KV size: {NUM} GB|K size: {NUM} GB, V size: {NUM} GB)"),
                 "srt/mem_cache/memory_pool.py:2087 (K, V) / 2093 (KV)"),
    "mrr_capped": (re.compile(r"max_running_requests is capped to (\d+) by the mamba state cache "
                              r"\(max_mamba_cache_size=(\d+), (\d+) state slots per request\)"),
                   "srt/mem_cache/kv_cache_configurator.py:3140"),
    "mrr_reduced": (re.compile(r"max_running_requests was reduced from the requested (\d+) to (\d+)"),
                    "srt/mem_cache/kv_cache_configurator.py:3161"),
    "pool_end": (re.compile(rf"Memory pool end\. avail mem={NUM} GB"),
                 "srt/mem_cache/kv_cache_configurator.py:498"),
    "scheduler": (re.compile(rf"max_total_num_tokens=(\d+), chunked_prefill_size=(-?\d+), max_prefill_tokens=(\d+), "
                             rf"max_running_requests=(\d+), context_len=(\d+), available_gpu_mem={NUM} GB"),
                  "srt/managers/scheduler.py:1264"),
    "hicache_auto": (re.compile(rf"HiCache auto-sizing: ratio {NUM} -> {NUM}; {NUM} GiB host memory per rank "
                                rf"\(fraction {NUM}, (\d+) ranks on this host\), host pools {NUM} GiB\."),
                     "srt/mem_cache/hicache_auto_size.py:114"),
    "host_kv": (re.compile(rf"Allocating (\S+) hierarchical KV host pool: (\d+) tokens, {NUM} GB host memory"
                           rf"(?:, packed MTP KV layers: target_layers=(\d+), draft_layers=(\d+), "
                           rf"total_layers=(\d+))?"),
                "srt/mem_cache/pool_host/base.py:259"),
    "host_indexer": (re.compile(rf"Allocating {NUM} GB host memory for DSA indexer \(layout=([\w]+)\)"
                                rf"(?:, packed MTP layers: target_layers=(\d+), draft_layers=(\d+), "
                                rf"total_layers=(\d+))?"),
                     "srt/mem_cache/pool_host/dsa.py:229"),
    "host_mamba": (re.compile(rf"Allocating {NUM} GB host memory for hierarchical Mamba cache \((\d+) state slots, "
                              rf"layout=(\w+)\)"),
                   "srt/mem_cache/pool_host/mamba.py:194"),
    # hybrid sliding-window models (issue 32): HybridSWAPoolConfigurator's split (ratio path; the request-cap
    # path prints none) and SWAKVPool's total over both sub-pools (GiB); values: (full tokens, SWA tokens) and
    # (GiB, SWA size, full size). The sub-pools print "Full KV Cache ..." and "SWA KV Cache ..." (kv_cache)
    "swa_split": (re.compile(r"Use sliding window memory pool\. full_layer_tokens=(\d+), swa_layer_tokens=(\d+)"),
                  "srt/model_executor/pool_configurator.py:889"),
    "swa_pool": (re.compile(rf"SWAKVPool (?:mem usage|VA upper bound): {NUM} GB, swa size: (\d+), full size: (\d+)"),
                 "srt/mem_cache/swa_memory_pool.py:132"),
}


# What each kind of line looks like to a reader, for "nothing to verify" messages.
LOOKED_FOR: dict[str, str] = {
    "memory_baseline": "Memory baseline taken. mem usage=... GB",
    "load_begin": "Load weight begin. avail mem=... GB",
    "load_end": "Load weight end. ... avail mem=... GB, mem usage=... GB.",
    "mm_reserve": "Reserving ... GB of the KV budget for post-sizing multimodal allocations",
    "mamba_cache": "Mamba Cache is allocated. max_mamba_cache_size: ..., conv_state size: ...",
    "kv_cache": "KV Cache is allocated. dtype: ..., #tokens: ..., KV size: ... GB (or K size: ... GB, V size: ... GB)",
    "mrr_capped": "max_running_requests is capped to ... by the mamba state cache (...)",
    "mrr_reduced": "max_running_requests was reduced from the requested ... to ...",
    "pool_end": "Memory pool end. avail mem=... GB",
    "scheduler": "max_total_num_tokens=..., chunked_prefill_size=..., ..., context_len=..., available_gpu_mem=...",
    "hicache_auto": "HiCache auto-sizing: ratio ... -> ...; ... GiB host memory per rank (...)",
    "host_kv": "Allocating ... hierarchical KV host pool: ... tokens, ... GB host memory",
    "host_indexer": "Allocating ... GB host memory for DSA indexer (layout=...)",
    "host_mamba": "Allocating ... GB host memory for hierarchical Mamba cache (... state slots, layout=...)",
    "swa_split": "Use sliding window memory pool. full_layer_tokens=..., swa_layer_tokens=...",
    "swa_pool": "SWAKVPool mem usage: ... GB, swa size: ..., full size: ...",
}
# The kinds that state a pool the sizing decided: without one of them there is nothing to verify.
POOL_KINDS = ("mamba_cache", "kv_cache", "mrr_capped", "mrr_reduced", "scheduler", "host_kv", "host_indexer",
              "host_mamba", "hicache_auto", "swa_split", "swa_pool")


@dataclass(frozen=True)
class LogLine:
    """One recognised line: where it is, which rank printed it, and its fields."""

    line_no: int
    kind: str
    ranks: tuple[tuple[str, int], ...]
    values: tuple
    text: str

    @property
    def rank_label(self) -> str:
        return " ".join(f"{k}{v}" for k, v in self.ranks) or "-"

    @property
    def rank_key(self) -> tuple[tuple[str, int], ...]:
        return self.ranks


@dataclass(frozen=True)
class BootLog:
    source: str
    lines: tuple[LogLine, ...]
    total_lines: int
    ignored_lines: int = 0
    kinds: dict = field(default_factory=dict)

    def of(self, kind: str) -> list[LogLine]:
        return [ln for ln in self.lines if ln.kind == kind]


def _convert(raw: tuple) -> tuple:
    out = []
    for v in raw:
        if v is None:
            out.append(None)
        elif re.fullmatch(r"-?\d+", v):
            out.append(int(v))
        elif re.fullmatch(r"-?\d+\.\d+", v):
            out.append(float(v))
        else:
            out.append(v)
    return tuple(out)


def parse_boot_log(text: str, source: str = "<log>") -> BootLog:
    """Every recognised line of a server log (lines without SGLang's prefix are read too)."""
    lines: list[LogLine] = []
    all_lines = text.splitlines()
    for i, raw in enumerate(all_lines, start=1):
        m = PREFIX.match(raw.strip())
        ranks: tuple = ()
        msg = raw.strip()
        if m:
            msg = m.group("msg")
            ranks = tuple((k, int(v)) for k, v in RANK.findall(m.group("ranks")))
        for kind, (pattern, _where) in PATTERNS.items():
            hit = pattern.search(msg)
            if hit:
                values = _convert(hit.groups())
                if kind == "kv_cache" and values[3] is None:   # K and V printed: their sum is the pool
                    values = values[:3] + (round(values[4] + values[5], 2),) + values[4:]
                lines.append(LogLine(i, kind, ranks, values, msg))
                break
    return BootLog(source, tuple(lines), len(all_lines), kinds={k: sum(1 for ln in lines if ln.kind == k)
                                                               for k in PATTERNS})


def read_log_text(path: str, refuse_binary: bool = False) -> str:
    """A server log's text from disk (SGLang's or vLLM's): missing, unreadable, oversized, empty (and with
    ``refuse_binary``, NUL bytes in its first 64 KiB) is a one-line ProfileError on --boot-log (exit 2)."""
    p = Path(path)
    try:
        if p.stat().st_size > LOG_MAX_BYTES:
            raise ProfileError("--boot-log", f"{path!r} is larger than {LOG_MAX_BYTES >> 20} MiB")
        data = p.read_bytes()
    except FileNotFoundError:
        raise ProfileError("--boot-log", f"{path!r} does not exist") from None
    except (OSError, IsADirectoryError) as e:
        raise ProfileError("--boot-log", f"{path!r} is unreadable ({e.__class__.__name__})") from None
    if refuse_binary and b"\x00" in data[:1 << 16]:
        raise ProfileError("--boot-log", f"{path!r} is binary, not a server log")
    text = data.decode("utf-8", errors="replace")
    if not text.strip():
        raise ProfileError("--boot-log", f"{path!r} is empty")
    return text


def read_boot_log(path: str) -> BootLog:
    """A log file from disk; unreadable or unrecognisable input is a ProfileError (exit 2)."""
    text = read_log_text(path)
    # A log without any recognised line is not bad input: ``verify`` answers "nothing to verify"
    # (exit 3) and lists the lines it looked for (``LOOKED_FOR``).
    return parse_boot_log(text, path)
