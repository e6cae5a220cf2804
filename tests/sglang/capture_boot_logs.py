"""Compose SGLang 0.5.23 boot logs for `glm-kv verify`, from SGLang's own code where the CPU allows.

The pool lines (``Reserving ... GB``, ``Mamba Cache is allocated``, ``KV Cache is allocated``,
``max_running_requests is capped``, the HiCache auto-size and host-pool lines) are the messages
SGLang 0.5.23's own classes log while oracle_memory.py sizes and builds the pools at full size
(device pools on ``meta``, W8). The lines the CPU cannot produce (``Load weight begin/end`` need a
model on a GPU, the scheduler line needs a running scheduler) are composed from the wheel's
format strings (model_runner.py:1273/1372, scheduler.py:1264) with the values SGLang computed.
Every line gets configure_logger's prefix, pool lines once per rank (every rank prints them).

    GLM_KV_SGLANG=1 .venv-sglang/bin/python tests/sglang/capture_boot_logs.py   # rewrites the fixtures
"""
from __future__ import annotations

import sys
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
FIXTURES = HERE.parents[0] / "ledgers" / "boot_logs"
GiB = 1 << 30

# name -> (profile fields, measured pre-load free bytes (min over ranks), target weights, draft weights)
# Each states --context-length 131072: the scheduler line prints SGLang's resolved context_len, and a
# profile that omits it runs at the model's maximum in SGLang (see
# test_memory_agreement::test_verify_context_length_left_to_defaults).
CASES: dict[str, tuple[dict, int, int, int]] = {
    "h200-tp8-dp8-dpattn": ({"sglang_layout": "0.5.23", "gpu": "H200", "tp_size": 8, "dp_size": 8,
                             "enable_dp_attention": True, "max_running_requests": 64, "context_length": 131072},
                            147_386_122_240, 41_212_345_678, 0),
    "h200-tp1-mtp-hicache": ({"sglang_layout": "0.5.23", "gpu": "H200", "speculative_algorithm": "EAGLE",
                              "enable_hierarchical_cache": True, "hicache_ratio": 1.5,
                              "max_running_requests": 64, "context_length": 131072},
                             149_663_911_936, 70_021_000_000, 3_912_000_000),
    "h200-tp8-dpattn-hicache-auto": ({"sglang_layout": "0.5.23", "gpu": "H200", "tp_size": 8, "dp_size": 8,
                                      "enable_dp_attention": True, "enable_hierarchical_cache": True,
                                      "host_memory_bytes": 900_000_000_000, "ranks_per_host": 8,
                                      "max_running_requests": 128, "context_length": 131072},
                                     147_400_000_000, 45_100_000_000, 0),
    "b200-tp8-fp8-hicache-size": ({"sglang_layout": "0.5.23", "gpu": "B200", "tp_size": 8,
                                   "kv_cache_dtype": "fp8_e4m3", "enable_hierarchical_cache": True,
                                   "hicache_size": 200, "max_running_requests": 256, "context_length": 131072},
                                  188_900_000_000, 40_500_000_000, 0),
    "h200-tp1-auto-mrr": ({"sglang_layout": "0.5.23", "gpu": "H200", "max_running_requests": None, "context_length": 131072},
                          149_500_000_000, 75_000_000_000, 0),
}


def ranks(profile: dict) -> list[str]:
    """configure_logger prefixes: ' DP{d}' under DP attention, ' TP{r}' when tp > 1."""
    tp = profile.get("tp_size", 1)
    if tp == 1:
        return [""]
    attn_dp = profile.get("dp_size", 1) if profile.get("enable_dp_attention") else 1
    per = tp // attn_dp
    return [(f" DP{r // per}" if attn_dp > 1 else "") + f" TP{r}" for r in range(tp)]


def compose(name: str) -> tuple[str, dict]:
    from oracle_memory import sglang_memory
    from profiles import hardware

    fields, pre, target, draft = CASES[name]
    launch, _ = hardware(fields)  # the GPU a profile without one runs on, stated
    sg = sglang_memory(launch, launch, pre_model_load_bytes=pre, weights_bytes=target + draft, pool_log=True)
    if "errors" in sg:
        raise RuntimeError(f"{name}: SGLang refused: {sg['errors']}")
    return boot_log_text(fields, sg["log"], pre, target, draft, sg["capacity"], sg.get("resolved", {})), fields


POOL_LINE_KEYS = ("Reserving", "Mamba Cache is allocated", "KV Cache is allocated", "max_running_requests is capped",
                  "max_running_requests was reduced", "HiCache auto-sizing", "hierarchical KV host pool",
                  "host memory for DSA indexer", "hierarchical Mamba cache",
                  # hybrid SWA (issue 32): the configurator's split and SWAKVPool's total
                  "Use sliding window memory pool", "SWAKVPool")


def boot_log_text(fields: dict, sglang_log: list[str], pre: int, target: int, draft: int, cap: dict,
                  resolved: dict, arch: str = "Glm5NextForConditionalGeneration") -> str:
    """A boot log from SGLang's own pool messages (``sglang_log``, in order) plus the lines the CPU cannot
    produce, composed from the wheel's format strings with the values SGLang computed (``cap``: its
    max_total_num_tokens / max_running_requests; ``resolved``: its context_len, chunked_prefill_size)."""
    stamp = "[2026-11-30 12:00:{s:02d}{r}]"
    out: list[str] = []
    rk = ranks(fields)
    pool_lines = [m for m in sglang_log if any(k in m for k in POOL_LINE_KEYS)]
    for r in rk:
        out.append(stamp.format(s=1, r=r) + f" Load weight begin. avail mem={pre / GiB:.2f} GB")
    for r in rk:
        out.append(stamp.format(s=20, r=r) + f" Load weight end. elapsed=18.52 s, type={arch}, "
                   f"quant=fp8, fmt=e4m3, avail mem={(pre - target) / GiB:.2f} GB, mem usage={target / GiB:.2f} GB.")
    if draft:
        for r in rk:
            out.append(stamp.format(s=22, r=r) + f" Load weight begin. avail mem={(pre - target) / GiB:.2f} GB")
            out.append(stamp.format(s=24, r=r) + " Load weight end. elapsed=1.93 s, "
                       f"type={arch}NextN, avail mem={(pre - target - draft) / GiB:.2f} GB, "
                       f"mem usage={draft / GiB:.2f} GB.")
    for r in rk:
        for m in pool_lines:
            out.append(stamp.format(s=30, r=r) + " " + m)
    out.append(stamp.format(s=59, r=rk[0]) + f" max_total_num_tokens={cap['max_total_num_tokens']}, "
               f"chunked_prefill_size={resolved.get('chunked_prefill_size')}, max_prefill_tokens=16384, "
               f"max_running_requests={cap['max_running_requests']}, context_len={resolved['context_len']}, "
               f"available_gpu_mem=7.41 GB")
    return "\n".join(out) + "\n"


def main() -> None:
    sys.path.insert(0, str(HERE))
    FIXTURES.mkdir(parents=True, exist_ok=True)
    for name in CASES:
        text, fields = compose(name)
        (FIXTURES / f"{name}.log").write_text(text)
        (FIXTURES / f"{name}.yaml").write_text(
            "# profile of the server that printed " + name + ".log (composed by tests/sglang/capture_boot_logs.py)\n"
            + yaml.safe_dump({"name": name, **fields}, sort_keys=False))
        print(f"wrote {name}.log ({text.count(chr(10))} lines)")


if __name__ == "__main__":
    main()
