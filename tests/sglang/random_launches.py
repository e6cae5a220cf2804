"""Random launch commands for GLM-5.3-Flash, read by SGLang 0.5.23's own parser and by glm-kv's (issue 30).

Each launch is a ``python -m sglang.launch_server ...`` command line over every flag the flag table marks
modelled (``glm_kv.inputs.launch.MODELLED``), plus the hardware readings the suite gives both sides (the
GPU, weights or bytes for the pools, the host's free RAM). Both sides read the *command*:

* SGLang: its argparse (``ServerArgs.add_cli_args``) parses the words, and the fields that differ from
  its defaults are the ``ServerArgs`` kwargs the oracles hand it (``sglang_kwargs``), nothing else;
* glm-kv: ``parse_launch_command`` (the CLI's ``--sglang-args``) gives the profile fields.

The first launches of every draw are one of each kind the issue names (DFLASH / DSPARK / ReplaySSM with
HiCache, a decode and a prefill server, a host-memory limit), with random values; the rest are random.
A decode server keeps its radix cache (--disaggregation-decode-enable-radix-cache) in about half the decode launches,
then sometimes with HiCache.
The seed is the run's (``tests.pytest_glm_kv.run_seed``), so every run draws other launches.
"""
from __future__ import annotations

import random
import shlex

GiB = 1 << 30
MODEL = "zai-org/GLM-5.3-Flash"
GPUS = {"H100": 80, "H200": 141, "B200": 180}
DSA_PREFILL = ("flashmla_sparse", "flashmla_kv", "fa3", "tilelang")
DSA_DECODE = ("flashmla_sparse", "flashmla_kv", "fa3", "tilelang")


def _spec(rng: random.Random, args: list, algo: str, drafts: dict) -> None:
    args += ["--speculative-algorithm", algo]
    if algo in ("EAGLE", "NEXTN"):
        r = rng.random()
        if r < 0.4:
            steps = rng.choice([1, 2, 3])
            args += ["--speculative-num-steps", str(steps), "--speculative-eagle-topk", "1",
                     "--speculative-num-draft-tokens", str(steps + 1)]
        elif r < 0.55:
            args += ["--speculative-num-steps", "3", "--speculative-eagle-topk", "2",
                     "--speculative-num-draft-tokens", "4"]
    elif algo == "DFLASH":
        args += ["--speculative-draft-model-path", drafts["dflash"]]
        if rng.random() < 0.4:
            args += ["--speculative-dflash-block-size", str(rng.choice([4, 5, 8]))]
    else:   # DSPARK
        args += ["--speculative-draft-model-path", drafts["dspark"]]
        if rng.random() < 0.4:
            args += ["--speculative-dspark-block-size", str(rng.choice([3, 5, 7]))]
        if rng.random() < 0.3:
            args += ["--speculative-dspark-align-verify-tokens-to-graph-tier"]
        if rng.random() < 0.2:   # SGLang: no effect with DSPARK
            args += ["--speculative-draft-window-size", str(rng.choice([8, 64]))]


def _hicache(rng: random.Random, args: list, hw: dict, limit: bool = False) -> None:
    args += [rng.choice(["--enable-hierarchical-cache", "--enable-hicache"])]
    r = rng.random()
    if r < 0.3:
        args += ["--hicache-ratio", str(round(rng.uniform(0.5, 3.0), 2))]
    elif r < 0.6:
        args += ["--hicache-size", str(rng.randrange(20, 400))]
    if rng.random() < 0.2:
        args += ["--hicache-mem-layout", rng.choice(["page_first", "page_first_direct"])]
    if rng.random() < 0.2:
        args += ["--hicache-io-backend", rng.choice(["kernel", "direct"])]
    if limit or rng.random() < 0.7:   # the host's free RAM: auto-size and the host-memory check read it
        hw["host_memory_bytes"] = rng.randrange(60, 3000) * 10**9
    # issue 30: the host memory mode, the storage backend and the auto-size fraction, from a stream of their own
    # keyed by the command so far (the main stream's draws stay what they were); buffer_only without a backend
    # (and on a decode server) is SGLang's refusal, which glm-kv must give too
    own = random.Random("hicache-mode " + shlex.join(args))
    if own.random() < 0.25:
        args += ["--hicache-host-memory-mode", "buffer_only"]
        if own.random() < 0.85:
            args += ["--hicache-storage-backend", own.choice(["file", "mooncake", "hf3fs", "nixl"])]
    elif own.random() < 0.1:
        args += ["--hicache-storage-backend", "file"]
    if own.random() < 0.2:
        args += ["--hicache-host-memory-fraction", str(round(own.uniform(0.05, 1.0), 2))]


def launch(rng: random.Random, drafts: dict, kind: str | None = None) -> tuple[str, dict]:
    """(command, hardware readings); ``kind`` forces one of the issue's kinds."""
    gpu = rng.choice(list(GPUS))
    tp = rng.choice([1, 2, 4, 8, 8])
    args = ["--model-path", MODEL, rng.choice(["--tp-size", "--tp"]), str(tp)]
    hw: dict = {"gpu": gpu}
    dpa = tp > 1 and rng.random() < 0.3 and kind not in ("dflash-hicache", "dspark-hicache")
    if dpa:
        dp = rng.choice([d for d in (2, 4, 8) if tp % d == 0])
        args += (["--dp-size", str(dp), "--enable-dp-attention"] if rng.random() < 0.7
                 else ["--attn-dp-size", str(dp)])
    algo = {"dflash-hicache": "DFLASH", "dspark-hicache": "DSPARK", "replayssm-hicache": None}.get(kind)
    if kind is None and rng.random() < 0.35:
        algo = rng.choice(["EAGLE", "NEXTN", "DFLASH", "DSPARK"] if not dpa else ["EAGLE", "NEXTN"])
    if kind == "replayssm-hicache" and rng.random() < 0.5:
        algo = "EAGLE"
    if algo:
        _spec(rng, args, algo, drafts)
    mode = {"decode": "decode", "prefill": "prefill"}.get(kind)
    if kind is None and rng.random() < 0.2:
        mode = rng.choice(["prefill", "decode"])
    if mode:
        args += ["--disaggregation-mode", mode]
        if mode == "decode" and rng.random() < 0.5:
            args += ["--disaggregation-decode-extra-slots", str(rng.choice([0, 3, 17, 64]))]
    elif rng.random() < 0.05:
        args += ["--disaggregation-decode-extra-slots", "7"]   # inert off a decode server
    replay = kind == "replayssm-hicache" or (kind is None and rng.random() < 0.1)
    if replay:
        args += ["--enable-linear-replayssm-spec"]
        if rng.random() < 0.5:
            args += ["--linear-replayssm-cache-len", str(rng.choice([8, 16, 32, 64]))]
    if kind in ("dflash-hicache", "dspark-hicache", "replayssm-hicache", "host-limit") or (
            kind is None and mode != "decode" and rng.random() < 0.35):
        _hicache(rng, args, hw, limit=kind == "host-limit")
    # the scalar flags, each now and then
    for p, words in (
        (0.5, ["--max-running-requests", str(rng.choice([8, 16, 32, 64, 256]))]),
        (0.3, ["--kv-cache-dtype", rng.choice(["auto", "bf16", "bfloat16", "fp8_e4m3"])]),
        (0.15, ["--context-length", str(rng.choice([8192, 32768, 131072]))]),
        (0.15, ["--chunked-prefill-size", str(rng.choice([-1, 2048, 4096, 8192]))]),
        (0.1, ["--max-prefill-tokens", str(rng.choice([8192, 32768]))]),
        (0.15, ["--mem-fraction-static", str(round(rng.uniform(0.7, 0.93), 3))]),
        (0.1, ["--max-mamba-cache-size", str(rng.randrange(50, 2000))]),
        (0.1, ["--mamba-full-memory-ratio", str(round(rng.uniform(0.3, 2.0), 2))]),
        (0.1, ["--max-total-tokens", str(rng.randrange(100, 3000) * 1024)]),
        (0.05, ["--page-size", "256"]),
        (0.1, ["--mamba-ssm-dtype", rng.choice(["float32", "bfloat16"])]),
        (0.05, ["--linear-attn-backend", rng.choice(["triton", "flashinfer"])]),
        (0.1, ["--mamba-radix-cache-strategy", rng.choice(["auto", "no_buffer", "extra_buffer", "extra_buffer_lazy"])]),
        (0.1, ["--disable-overlap-schedule"]),
        (0.08, ["--disable-radix-cache"]),
        (0.15, ["--cuda-graph-max-bs-decode", str(rng.choice([8, 64, 160, 512]))]),
        (0.08, ["--cuda-graph-bs-decode", *map(str, sorted(rng.sample([1, 2, 4, 8, 16, 32, 64], 3)))]),
        (0.05, ["--cuda-graph-config", '{"decode": {"max_bs": 96}}']),
        (0.05, ["--cuda-graph-backend-decode", rng.choice(["full", "breakable", "disabled"])]),
        (0.05, ["--cuda-graph-backend-prefill", rng.choice(["full", "breakable", "disabled"])]),
        (0.05, ["--disable-cuda-graph"]), (0.05, ["--disable-decode-cuda-graph"]),
        (0.05, ["--disable-prefill-cuda-graph"]),
        (0.1, ["--moe-a2a-backend", rng.choice(["none", "deepep"])]),
        (0.05, ["--dsa-prefill-backend", rng.choice(DSA_PREFILL)]),
        (0.05, ["--dsa-decode-backend", rng.choice(DSA_DECODE)]),
        (0.05, ["--dcp-size", "1"]),
        (0.05, ["--mamba-max-states-per-path", str(rng.choice([-1, 1, 64]))]),
        (0.08, ["--nnodes", str(rng.choice([n for n in (1, 2, 4) if tp % n == 0]))]),
        (0.02, ["--language-only"]), (0.02, ["--language-model-only"]),
    ):
        if rng.random() < p:
            args += words
    if tp > 1 and not dpa and mode != "decode" and rng.random() < 0.08:
        args += ["--attn-cp-size", str(tp), "--enable-prefill-cp", "--cp-strategy", "interleave"]
    # --enable-two-batch-overlap (issue 30) from a stream of its own, keyed by the command so far: every seed's
    # launches stay what they were, some now with TBO (refused without DP attention or an a2a backend)
    if random.Random(shlex.join(args)).random() < (0.25 if dpa else 0.06):
        args += ["--enable-two-batch-overlap"]
    # --disaggregation-decode-enable-radix-cache (issue 30) the same way, on decode servers mostly (inert
    # elsewhere), a decode server keeping it now and then with HiCache (which it allows there)
    own = random.Random("decode-radix " + shlex.join(args))
    if own.random() < (0.5 if mode == "decode" else 0.03):
        args += ["--disaggregation-decode-enable-radix-cache"]
        if mode == "decode" and "--enable-hierarchical-cache" not in args and "--enable-hicache" not in args \
                and own.random() < 0.4:
            _hicache(own, args, hw)
    # a decode server's retraction backup and what resolves it (issue 30 / 32 follow-up) from a stream of its own:
    # GLM-5.3-Flash keeps Mamba state, so SGLang resolves cpu_tensor, and refuses host_pool (given, or through a
    # host receive threshold below 1, on any server) in registry.create_unified_radix_cache's / kv_cache_hook's words
    own = random.Random("retraction " + shlex.join(args))
    if own.random() < (0.25 if mode == "decode" else 0.03):
        pick = own.choice(["backup", "threshold", "priority", "priority-off"])
        if pick == "backup":
            args += ["--disaggregation-decode-retraction-backup", own.choice(["cpu_tensor", "cpu_tensor", "host_pool", "none"])]
        elif pick == "threshold":
            args += ["--disaggregation-decode-host-receive-threshold", own.choice(["1", "0.5"])]
        else:
            args += ["--enable-priority-scheduling"] + (["--disable-priority-preemption"] if pick == "priority-off"
                                                        else [])
    if rng.random() < 0.6:
        hw["weights_bytes"] = rng.randrange(15, 60) * 10**9 // max(1, tp // 2)
    else:
        hw["available_bytes"] = rng.randrange(10, 120) * GiB + rng.randrange(0, GiB)
    return "python -m sglang.launch_server " + shlex.join(args), hw


KINDS = ("dflash-hicache", "dspark-hicache", "replayssm-hicache", "decode", "prefill", "host-limit")


def launches(seed: int, drafts: dict, n: int = 40) -> list[tuple[str, str, dict]]:
    """(id, command, hardware): one of each KINDS, then random launches."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        kind = KINDS[i] if i < len(KINDS) else None
        cmd, hw = launch(rng, drafts, kind)
        out.append((f"launch-{seed}-{i:02d}-{kind or 'random'}", cmd, hw))
    return out


def sglang_kwargs(command: str) -> dict:
    """The ``ServerArgs`` kwargs SGLang's own argparse reads off the command (fields that differ from its
    defaults; the model path is the oracle's)."""
    from flag_table import parser

    words = shlex.split(command)
    words = words[words.index("sglang.launch_server") + 1:]
    p = parser()
    ns, base = vars(p.parse_args(words)), vars(p.parse_args(["--model-path", MODEL]))
    return {k: v for k, v in ns.items() if v != base.get(k) and k != "model_path"}


def glm_kv_fields(command: str) -> dict:
    from glm_kv.inputs.launch import parse_launch_command

    fields, _inert = parse_launch_command(command, layout="0.5.23")
    return fields
