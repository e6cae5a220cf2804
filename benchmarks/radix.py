"""``python -m benchmarks.radix``: glm-kv's RadixTree vs SGLang 0.5.23's UnifiedRadixCache, same ops.

Runs inside ``.venv-sglang`` (SGLang's Python tree core, ``tree_core_backend="python"``, on the CPU,
driven by ``tests/sglang/radix_driver.py`` exactly as the radix differential drives it):

    PYTHONPATH=$PWD GLM_KV_SGLANG=1 .venv-sglang/bin/python -m benchmarks.radix

The operations are the differential's (``tests/sglang/test_radix_differential.py``: its op kinds
and weights, prompts, decode lengths, eviction sizes, and its ``_apply`` on each side), with the
prompt pool scaled to the tree: ``pages // 3`` distinct 6-page bases instead of 3, and state slots
scaled with the pages (10 per 16). Per pool size, each side alone: fill the cache with distinct
prompts (not timed), then time the op sequence; the median of ``--repeats`` runs. Prints ops/s of
both sides (CPU time), the ratio, and how glm-kv's (and SGLang's) time per op grows from the smallest pool to
the largest. Goals: ratio >= 2 at every size, glm-kv's growth < 1.5x.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GOAL_RATIO, GOAL_GROWTH = 2.0, 1.5


def _import_differential():
    sys.path.insert(0, str(ROOT / "tests" / "sglang"))
    import test_radix_differential as d  # noqa: E402  (the differential's generator and _apply)

    return d


def scaled_ops(d, seed: int, n: int, pages: int, slots: int) -> list[tuple]:
    """``generate_ops`` with the prompt pool scaled to the tree (``pages // 3`` bases of 6 pages,
    at least the differential's 3) and prompts weighted 3x (so the cache stays full). Every op's own size stays the differential's: evictions of
    1 to 6 pages, ``ensure_mamba`` of 1 to 10 states (scaled with the slots it would flush the
    whole tree each time, and the large trees would never be large). ``slots`` is kept in the
    signature for the record. A fill of distinct 6-page prompts comes first (``("mark",)`` ends it)."""
    rng = random.Random(seed)
    page = d.PAGE
    n_bases = max(3, pages // 3)
    bases: dict[int, list[int]] = {}

    def base(i: int) -> list[int]:
        if i not in bases:
            r = random.Random(seed * 1_000_003 + i)
            bases[i] = [r.randrange(1, 50000) for _ in range(6 * page)]
        return bases[i]

    def prompt() -> tuple:
        b = base(rng.randrange(n_bases))
        share = rng.choice([0, page // 2, page, 2 * page, 2 * page, 3 * page, 4 * page, 6 * page])
        n_tok = rng.randrange(page // 2, 6 * page)
        t0 = rng.randrange(1, 8)
        tail = [(t0 * 7919 + j * 31) % 50000 + 1 for j in range(max(0, n_tok - share))]
        return tuple(b[:share] + tail if share < n_tok else b[:n_tok])

    def gen(k: int) -> tuple:
        s = rng.randrange(1, 50000)
        return tuple((s + 7 * j) % 50000 + 1 for j in range(k))

    kinds = ["prefill", "prefill", "prefill_decode", "start", "decode", "finish", "match", "match",
             "evict_tokens", "evict_mamba", "evict_both", "alloc_tokens", "ensure_mamba", "lock", "unlock"]
    # the differential's explicit evictions free a fixed amount each: on a large pool they outrun
    # its three prompt kinds and drain the tree; three times the prompts keep it full at every size
    kinds += ["prefill"] * 4 + ["prefill_decode"] * 2
    ops = []
    for _ in range(n):
        k = rng.choice(kinds)
        if k == "prefill":
            ops.append(("prefill", prompt(), ()))
        elif k == "prefill_decode":
            ops.append(("prefill", prompt(), gen(rng.randrange(1, 2 * page))))
        elif k == "start":
            ops.append(("start", prompt()))
        elif k == "decode":
            ops.append(("decode", rng.randrange(d.MAX_RUNNING), gen(rng.randrange(1, 2 * page))))
        elif k == "finish":
            ops.append(("finish", rng.randrange(d.MAX_RUNNING)))
        elif k == "match":
            ops.append(("match", prompt()))
        elif k == "evict_tokens":
            ops.append(("evict", rng.choice([1, page, 2 * page, 4 * page]), 0))
        elif k == "evict_mamba":
            ops.append(("evict", 0, rng.choice([1, 1, 2])))
        elif k == "evict_both":
            ops.append(("evict", rng.choice([page, 2 * page]), rng.choice([1, 2])))
        elif k == "alloc_tokens":
            ops.append(("evict_for_alloc", rng.choice([page, 3 * page, 6 * page]), 0))
        elif k == "ensure_mamba":
            ops.append(("ensure_mamba", rng.randrange(1, d.MAMBA_SLOTS + 1)))
        elif k == "lock":
            ops.append(("lock", prompt()))
        else:
            ops.append(("unlock", rng.randrange(d.MAX_LOCKS)))
    fill = [("prefill", tuple(base(i)), ()) for i in range(min(n_bases, -(-pages // 6) + 2))]
    return fill + [("mark",)] + ops


@contextlib.contextmanager
def _sizes(d, pages: int, slots: int):
    """The differential's GlmKvSide reads its pool sizes from module constants."""
    old = d.TOKEN_PAGES, d.MAMBA_SLOTS
    d.TOKEN_PAGES, d.MAMBA_SLOTS = pages, slots
    try:
        yield
    finally:
        d.TOKEN_PAGES, d.MAMBA_SLOTS = old


def _timed(d, side, ops: list[tuple]) -> tuple[float, int, list]:
    """Run the fill untimed, then time the ops; returns (CPU seconds, ops timed, locks left).

    CPU time of this process (``time.process_time``; torch runs one thread), not wall time: on a
    shared machine the wall clock also counts the time the process waits for a core."""
    running, locks = [], []
    it = iter(ops)
    for op in it:
        if op[0] == "mark":
            break
        d._apply(side, op, running, locks)
    rest = list(it)
    t = time.process_time()
    for op in rest:
        d._apply(side, op, running, locks)
    return time.process_time() - t, len(rest), locks


def bench(sizes=(16, 1024, 16384), n_ops: int = 10_000, repeats: int = 3, seed: int = 0) -> dict:
    import torch

    from glm_kv.tensors.memory_pool import write_reduced_model_config

    d = _import_differential()
    from radix_driver import SGLangRadix  # noqa: E402  (on sys.path after the import above)

    torch.set_num_threads(1)
    # glm-kv's pools are torch.empty (never touched here); lift its 4 GiB allocation guard
    os.environ.setdefault("GLM_KV_BUDGET_BYTES", str(64 << 30))
    out = {"ops": n_ops, "repeats": repeats, "seed": seed, "sizes": []}
    with tempfile.TemporaryDirectory() as tmp:
        config = write_reduced_model_config(Path(tmp) / "config.json", full_layers=1)
        for pages in sizes:
            slots = max(d.MAMBA_SLOTS, d.MAMBA_SLOTS * pages // 16)
            ops = scaled_ops(d, seed, n_ops, pages, slots)
            sg = d.SGLangSide(SGLangRadix(token_pages=pages, mamba_slots=slots, max_reqs=4,
                                          request_slots=False, config_path=config))
            ours_t, theirs_t = [], []
            try:
                for _ in range(repeats):
                    with _sizes(d, pages, slots):
                        ours = d.GlmKvSide(config)
                    s, n, _ = _timed(d, ours, ops)
                    ours_t.append(s / n)
                    tree = {"nodes": sum(1 for _ in ours.tree.nodes()) - 1,
                            "device_pages": ours.tree.device_tokens() // d.PAGE}
                    del ours
                    s, n, locks = _timed(d, sg, ops)
                    theirs_t.append(s / n)
                    sg.drain(locks)
            finally:
                sg.d.close()
            o, t = statistics.median(ours_t), statistics.median(theirs_t)
            row = {"pages": pages, "state_slots": slots, "glm_kv_ops_per_s": 1 / o,
                   "sglang_ops_per_s": 1 / t, "ratio": t / o, "glm_kv_us_per_op": o * 1e6,
                   "sglang_us_per_op": t * 1e6, "tree_at_end": tree}
            out["sizes"].append(row)
            print(f"  {pages:>6} pages, {slots:>6} slots: glm-kv {1 / o:8.0f} ops/s, SGLang {1 / t:8.0f} ops/s, "
                  f"ratio {t / o:5.2f}x; tree at the end: {tree['nodes']} nodes, {tree['device_pages']} pages on device",
                  file=sys.stderr, flush=True)
    first, last = out["sizes"][0], out["sizes"][-1]
    out["glm_kv_growth"] = last["glm_kv_us_per_op"] / first["glm_kv_us_per_op"]
    out["sglang_growth"] = last["sglang_us_per_op"] / first["sglang_us_per_op"]
    out["min_ratio"] = min(r["ratio"] for r in out["sizes"])
    out["goals_met"] = out["min_ratio"] >= GOAL_RATIO and out["glm_kv_growth"] < GOAL_GROWTH
    return out


def run_in_sglang_venv(quick: bool = False) -> dict | None:
    """For ``python -m benchmarks --radix``: this benchmark in ``.venv-sglang``, if it exists."""
    import subprocess

    py = ROOT / ".venv-sglang" / "bin" / "python"
    if not py.exists():
        return None
    env = {**os.environ, "PYTHONPATH": str(ROOT), "GLM_KV_SGLANG": "1"}
    args = [str(py), "-m", "benchmarks.radix", "--json"] + (["--ops", "2000", "--repeats", "1"] if quick else [])
    p = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True)  # exit 1: a goal missed
    return json.loads(p.stdout) if p.stdout.strip() else {"error": p.stderr.strip().splitlines()[-1:]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.radix", description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[16, 1024, 16384], help="pool sizes, pages")
    ap.add_argument("--ops", type=int, default=10_000, help="timed operations per run")
    ap.add_argument("--repeats", type=int, default=3, help="runs per size and side (median)")
    ap.add_argument("--seed", type=int, default=int(os.environ.get("GLM_KV_SEED", "0")))
    ap.add_argument("--json", action="store_true", help="print only the JSON object")
    args = ap.parse_args(argv)
    res = bench(tuple(args.sizes), args.ops, args.repeats, args.seed)
    print(json.dumps(res, indent=2))
    if not args.json:
        print(f"\n{'pages':>7} {'slots':>7} {'glm-kv ops/s':>13} {'SGLang ops/s':>13} {'ratio':>7}")
        for r in res["sizes"]:
            print(f"{r['pages']:>7} {r['state_slots']:>7} {r['glm_kv_ops_per_s']:>13.0f} "
                  f"{r['sglang_ops_per_s']:>13.0f} {r['ratio']:>6.2f}x")
        print(f"per-op time growth {res['sizes'][0]['pages']} -> {res['sizes'][-1]['pages']} pages: "
              f"glm-kv {res['glm_kv_growth']:.2f}x (goal < {GOAL_GROWTH}x), SGLang {res['sglang_growth']:.2f}x; "
              f"min ratio {res['min_ratio']:.2f}x (goal >= {GOAL_RATIO}x)")
    return 0 if res["goals_met"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
