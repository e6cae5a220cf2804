"""`make mutants`: mutmut 3 over glm_kv/inputs and glm_kv/ledgers, killed by the fast tests.

Why a driver: the whole set is ~9,600 mutants and a 2-core CI box tries about one a second at
best, so the run is scoped by module (``MODULES="token request"``), the arithmetic ledgers
first. mutmut keeps every result under ``mutants/``, so runs add up; ``--report`` only reads
them. The table printed at the end (per module: killed, survived, no tests, timeout, score) is
what ``benchmarks/mutants.md`` records. Exit 1 when the modules asked for score under
``--threshold`` (90 %), so a survivor shows as a failure, not as a number nobody reads.

Run from the repository root with the mutants venv's python (the Makefile does). The seed of the
fast tests comes from ``GLM_KV_SEED`` (drawn here and printed when not given) and is the same for
every mutant, so a run reproduces with ``make mutants SEED=N``.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import random
import subprocess
import sys
import time
from pathlib import Path

# Order of the brief: the arithmetic ledgers first, then the inputs that feed them.
DEFAULT_MODULES = [
    "ledgers.token", "ledgers.request", "ledgers.tail", "ledgers.capacity", "ledgers.host",
    "ledgers.memory", "ledgers.parallel", "ledgers.advise", "ledgers.sweep",
    "inputs.resolve", "inputs.profile",
]
ALL_MODULES = DEFAULT_MODULES + [
    "ledgers.structure", "ledgers.workload", "ledgers.plan", "ledgers.derivations", "ledgers.verify",
    "inputs.model", "inputs.launch", "inputs.workload_spec", "inputs.boot_log", "inputs.gpus",
    "inputs.draft", "inputs.weights",
]
# Added to glm_kv after ALL_MODULES was written (issue 19 deliverable 5, round 4). Kept at the end:
# each module's permutation is seeded by its own name, so adding strata only shrinks the older
# modules' shares (round(n * size / total) with a larger total) to a prefix of what was drawn before.
ALL_MODULES += [
    "inputs.hf_config", "inputs.rules", "ledgers.layers", "ledgers.model_layers",
]
# issue 31: ledgers.model_plan folded into the one plan; ledgers.model_weights (any model's weight estimate)
ALL_MODULES += ["ledgers.model_weights", "inputs.startup", "ledgers.vllm"]
# issue 33: vLLM's launch command, profile file and boot log, the verify and the comparison; issue 32: the catalog
ALL_MODULES += ["inputs.vllm_launch", "inputs.vllm_profile", "inputs.vllm_boot_log", "ledgers.vllm_verify",
                "ledgers.compare", "inputs.catalog"]
# issue 32: the hybrid sliding-window models' refusals (gpt-oss)
ALL_MODULES += ["inputs.swa"]
# issue 30: --enable-hisparse's ratio, backends and refusals
ALL_MODULES += ["inputs.hisparse", "inputs.load_publish", "inputs.ib_devices"]
# issue 30: a decode server's retraction backup; issue 32: DeepSeek-V4's pools and plan; issue 33: vLLM's DCP rules
# and its two refusal types
ALL_MODULES += ["inputs.retraction", "ledgers.dsv4", "ledgers.dsv4_plan", "ledgers.vllm_dcp", "ledgers.vllm_refusals"]
# issue 32: DeepSeek-V4's weights per rank (checked against SGLang's own model class)
ALL_MODULES += ["ledgers.dsv4_weights"]
# issue 32: DeepSeek-V4's HiCache host pools
ALL_MODULES += ["ledgers.dsv4_host"]
KILLED = {1, 3, 37}          # a test failed (3: pytest internal error), or the type checker
SURVIVED = {0}
NO_TESTS = {5, 33}
TIMEOUT = {24, -24, 36, 152, 255}


def _module(name: str) -> str:
    name = name.removeprefix("glm_kv.").removesuffix(".py").replace("/", ".")
    if "." not in name:
        inputs = {m.split(".", 1)[1] for m in ALL_MODULES if m.startswith("inputs.")}   # one list of modules
        name = ("inputs." if name in inputs else "ledgers.") + name
    return name


def results(module: str) -> dict[str, int | None]:
    meta = Path("mutants/glm_kv") / (module.replace(".", "/") + ".py.meta")
    if not meta.exists():
        return {}
    return json.loads(meta.read_text())["exit_code_by_key"]


def tally(codes: dict[str, int | None]) -> dict[str, int]:
    t = {"mutants": len(codes), "killed": 0, "survived": 0, "no_tests": 0, "timeout": 0,
         "not_checked": 0, "other": 0}
    for code in codes.values():
        key = ("not_checked" if code is None else "killed" if code in KILLED else
               "survived" if code in SURVIVED else "no_tests" if code in NO_TESTS else
               "timeout" if code in TIMEOUT else "other")
        t[key] += 1
    return t


def score(t: dict[str, int]) -> float | None:
    """Killed (a timeout counts as killed, as mutmut counts it) over the mutants that were tried."""
    tried = t["killed"] + t["survived"] + t["no_tests"] + t["timeout"] + t["other"]
    return None if not tried else 100.0 * (t["killed"] + t["timeout"]) / tried


ADDED_TESTS = ["tests/ledgers/test_mutants_ledgers.py", "tests/inputs/test_mutants_inputs.py",
               "tests/models/test_mutants_models.py"]
RECHECK = Path("mutants/recheck.json")


def recheck(modules: list[str]) -> dict[str, int]:
    """Run the tests added against survivors (ADDED_TESTS) on each survivor of ``modules``.

    mutmut only runs a test on a mutant when its stats say the test reaches the mutated
    function, and its stats come from the run that found the survivors; a test written since is
    unknown to them until a full re-run (stats again, every mutant again). This re-tries each
    survivor alone with the added tests, in a child forked per mutant (as mutmut's own workers
    do), after checking that they pass on the unmutated code. Exit codes land in
    mutants/recheck.json; ``report`` counts a non-zero one as killed by an added test.
    """
    files = [f for f in ADDED_TESTS if Path(f).exists()]
    # a mutant no test reached (33) is re-tried too: a test added since may reach it
    survivors = [k for m in modules for k, c in results(m).items() if c in SURVIVED | NO_TESTS]
    os.chdir("mutants")
    sys.path.insert(0, os.getcwd())
    import pytest  # noqa: PLC0415 (the mutants venv's)

    for f in files:  # the copy mutmut made may predate the test
        Path(f).write_bytes((Path("..") / f).read_bytes())
    args = ["-q", "-x", "-p", "no:randomly", "-p", "no:cacheprovider", "-W", "ignore::DeprecationWarning", *files]

    def run(mutant: str) -> int:
        pid = os.fork()
        if pid == 0:
            os.environ["MUTANT_UNDER_TEST"] = mutant
            with open(os.devnull, "w") as null:
                os.dup2(null.fileno(), 1)
                os.dup2(null.fileno(), 2)
                os._exit(int(pytest.main(args)))
        return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])

    if run("") != 0:
        raise SystemExit(f"the added tests fail on the unmutated code: pytest {' '.join(args)}")
    done = json.loads(Path("recheck.json").read_text()) if Path("recheck.json").exists() else {}
    for i, name in enumerate(survivors, 1):
        if done.get(name):  # killed by an added test in an earlier recheck; tests are only added
            continue
        done[name] = run(name)
        print(f"[{i}/{len(survivors)}] {name}: {'killed' if done[name] else 'survived'}", flush=True)
        Path("recheck.json").write_text(json.dumps(done, indent=1, sort_keys=True))
    os.chdir("..")
    return done


def report(modules: list[str]) -> tuple[str, float | None]:
    rows = ["| module | mutants | killed | of which by added tests | timeout | survived | no tests | not checked | score |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    total = {k: 0 for k in [*tally({}), "added"]}
    survivors: list[str] = []
    rechecked = json.loads(RECHECK.read_text()) if RECHECK.exists() else {}
    for m in modules:
        # a survivor that an added test kills (recheck) counts as killed
        codes = {k: (1 if c in SURVIVED | NO_TESTS and rechecked.get(k) else c) for k, c in results(m).items()}
        t = tally(codes)
        t["added"] = sum(1 for k, c in results(m).items() if c in SURVIVED | NO_TESTS and rechecked.get(k))
        for k in total:
            total[k] += t[k]
        s = score(t)
        rows.append(f"| {m} | {t['mutants']} | {t['killed']} | {t['added']} | {t['timeout']} | {t['survived']} | "
                    f"{t['no_tests']} | {t['not_checked']} | {'-' if s is None else f'{s:.1f} %'} |")
        survivors += [k for k, c in codes.items() if c in SURVIVED or c in NO_TESTS or
                      (c is not None and c not in KILLED | TIMEOUT)]
    s = score(total)
    rows.append(f"| **all** | {total['mutants']} | {total['killed']} | {total['added']} | {total['timeout']} | "
                f"{total['survived']} | {total['no_tests']} | {total['not_checked']} | "
                f"{'-' if s is None else f'{s:.1f} %'} |")
    text = "\n".join(rows)
    if survivors:
        text += "\n\nSurvivors (`mutmut show NAME` prints the diff):\n" + "\n".join(f"- {n}" for n in survivors)
    return text, s


def all_mutants(modules: list[str]) -> dict[str, list[str]]:
    """Every generated mutant name per module (mutmut's .meta files; ``mutmut run`` makes them)."""
    return {m: sorted(results(m)) for m in modules}


def draw_sample(modules: list[str], n: int, seed: int, floor: int = 8) -> dict[str, list[str]]:
    """A uniform random sample stratified by module: each module gets its share of ``n``
    (proportional to its mutant count, at least ``floor`` or all it has), the first ones of a
    permutation drawn with ``random.Random(f"{seed}:{module}")``. Same seed, same mutants; a
    larger ``n`` extends the same sample (the prefix stays), so a run that was cut short grows."""
    names = all_mutants(modules)
    total = sum(len(v) for v in names.values())
    if not total:
        raise SystemExit("no mutants generated yet: run `mutmut run` once (it generates them all first)")
    out = {}
    for m in modules:
        perm = list(names[m])
        random.Random(f"{seed}:{m}").shuffle(perm)
        share = max(floor, round(n * len(perm) / total))
        out[m] = perm[:share]
    return out


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95 % Wilson score interval of a proportion k/n (sound at 0 and n, unlike k/n +/- 2 se)."""
    if not n:
        return (0.0, 1.0)
    p = k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return (max(0.0, c - h), min(1.0, c + h))


def stratified(cells: list[tuple[int, int, int]]) -> tuple[float, float, float] | None:
    """Stratified estimate over (module size, tried, killed) cells: sum_h W_h p_h with W_h the
    module's share of the mutants of the modules that were tried at all; its 95 % interval from
    the stratified variance (finite-population corrected), widened to at least the Wilson interval
    of the pooled sample. None when nothing was tried."""
    cells = [c for c in cells if c[1]]
    if not cells:
        return None
    total = sum(size for size, _, _ in cells)
    est = var = 0.0
    for size, n, k in cells:
        w, p = size / total, k / n
        est += w * p
        if n > 1:
            var += w * w * p * (1 - p) / (n - 1) * (1 - n / size)
    lo_w, hi_w = wilson(sum(c[2] for c in cells), sum(c[1] for c in cells))
    half = 1.96 * math.sqrt(var)
    return est, max(0.0, min(lo_w, est - half)), min(1.0, max(hi_w, est + half))


def estimate(sample: dict[str, list[str]]) -> tuple[str, float | None, list[str]]:
    """Per module: killed / tried in the sample, the score and its 95 % Wilson interval; per package
    (inputs, ledgers) and overall: the stratified estimate (``stratified``). Untried sample
    mutants are listed, not counted."""
    rechecked = json.loads(RECHECK.read_text()) if RECHECK.exists() else {}
    rows = ["| module | mutants | sampled | tried | killed | survived | score | 95 % interval |",
            "|---|---:|---:|---:|---:|---:|---:|---|"]
    cells: dict[str, tuple[int, int, int]] = {}
    survivors: list[str] = []
    for m, names in sample.items():
        codes = results(m)
        tried = [x for x in names if codes.get(x) is not None]
        killed = [x for x in tried if codes[x] in KILLED | TIMEOUT or
                  (codes[x] in SURVIVED | NO_TESTS and rechecked.get(x))]
        survivors += [x for x in tried if x not in killed]
        k, n = len(killed), len(tried)
        cells[m] = (len(codes), n, k)
        lo, hi = wilson(k, n)
        rows.append(f"| {m} | {len(codes)} | {len(names)} | {n} | {k} | {n - k} | "
                    f"{'-' if not n else f'{100 * k / n:.1f} %'} | {100 * lo:.1f}-{100 * hi:.1f} % |")
    overall = None
    for label, group in [(f"**{pkg} (stratified)**", [m for m in cells if m.startswith(pkg + ".")])
                         for pkg in ("inputs", "ledgers")] + [("**all (stratified)**", list(cells))]:
        if not group:
            continue
        r = stratified([cells[m] for m in group])
        size, n, k = (sum(cells[m][i] for m in group) for i in range(3))
        sampled = sum(len(sample[m]) for m in group)
        if r is None:
            rows.append(f"| {label} | {size} | {sampled} | 0 | 0 | 0 | - | - |")
            continue
        est, lo, hi = r
        rows.append(f"| {label} | {size} | {sampled} | {n} | {k} | {n - k} | {100 * est:.1f} % | "
                    f"{100 * lo:.1f}-{100 * hi:.1f} % |")
        overall = 100 * est
    return "\n".join(rows), overall, survivors


SAMPLE = Path("mutants/sample.json")


def generate() -> None:
    """Generate every mutant (mutmut's first step, without its stats or test runs), so that a
    sample can be drawn from the names before ``mutmut run`` is given them. mutmut skips files
    whose mutants are newer than their source, so the run that follows does not redo it."""
    code = ("from pathlib import Path\n"
            "from mutmut.__main__ import create_mutants\n"
            "from mutmut.mutation.trampoline import set_mutant_under_test\n"
            "from mutmut.utils.file_utils import copy_also_copy_files, copy_src_dir, setup_source_paths\n"
            "set_mutant_under_test('mutant_generation'); Path('mutants').mkdir(exist_ok=True)\n"
            "copy_src_dir(); copy_also_copy_files(); setup_source_paths(); print(create_mutants(2))\n")
    subprocess.check_call([sys.executable, "-c", code], stdout=subprocess.DEVNULL)


def run_mutmut(names_or_globs: list[str], max_children: int) -> int:
    seed = os.environ.get("GLM_KV_SEED", "").strip() or str(random.SystemRandom().randrange(1, 2**31))
    os.environ["GLM_KV_SEED"] = seed
    print(f"glm-kv seed: {seed}  (reproduce: make mutants SEED={seed})", flush=True)
    start = time.monotonic()
    cmd = [sys.executable, "-m", "mutmut", "run", "--max-children", str(max_children), *names_or_globs]
    shown = cmd if len(cmd) < 12 else [*cmd[:8], f"... ({len(names_or_globs)} mutants)"]
    print("$", " ".join(shown), flush=True)
    rc = subprocess.call(cmd)
    print(f"mutmut exit {rc} after {time.monotonic() - start:.0f} s", flush=True)
    return rc


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("modules", nargs="*", help="e.g. token ledgers.request inputs.resolve (default: "
                    + " ".join(DEFAULT_MODULES) + "); 'all' for every module")
    ap.add_argument("--report", action="store_true", help="only print the table of the stored results")
    ap.add_argument("--recheck", action="store_true",
                    help="re-try the survivors with the tests added against them, then report")
    ap.add_argument("--sample", type=int, metavar="N",
                    help="a uniform random sample of about N mutants, stratified by module (--seed); "
                         "runs the ones not tried yet and reports the estimated score with 95 %% intervals")
    ap.add_argument("--seed", type=int, default=None, help="the sample's seed (printed when drawn)")
    ap.add_argument("--floor", type=int, default=8,
                    help="at least this many sampled mutants per module (default 8); a smaller --sample/--floor "
                         "draws a prefix of the larger one's, so a first round can be extended")
    ap.add_argument("--max-children", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--threshold", type=float, default=90.0)
    a = ap.parse_args(argv)
    modules = (ALL_MODULES if a.modules == ["all"] else [_module(m) for m in a.modules] or DEFAULT_MODULES)
    if a.sample:
        if not all(results(m) for m in modules):
            generate()
        seed = a.seed if a.seed is not None else random.SystemRandom().randrange(1, 2**31)
        sample = draw_sample(modules, a.sample, seed, a.floor)
        SAMPLE.write_text(json.dumps({"seed": seed, "n": a.sample, "floor": a.floor, "mutants": sample}, indent=1))
        print(f"sample seed: {seed}  ({sum(map(len, sample.values()))} mutants over {len(modules)} modules; "
              f"reproduce: scripts/mutants.py --sample {a.sample} --floor {a.floor} --seed {seed})", flush=True)
        todo = [x for m in modules for x in sample[m] if results(m).get(x) is None]
        if not a.report and todo:
            rc = run_mutmut(todo, a.max_children)
            if rc != 0:
                return rc
        if a.recheck:   # the sample's survivors, each re-tried alone with the added tests
            os.environ.setdefault("GLM_KV_SEED", str(random.SystemRandom().randrange(1, 2**31)))
            recheck(modules)
        text, s, survivors = estimate(sample)
        print(text)
        if survivors:
            print("\nSurvivors (`mutmut show NAME` prints the diff):\n" + "\n".join(f"- {n}" for n in survivors))
    else:
        if a.recheck:
            os.environ.setdefault("GLM_KV_SEED", str(random.SystemRandom().randrange(1, 2**31)))
            recheck(modules)
        elif not a.report:
            rc = run_mutmut([f"glm_kv.{m}.*" for m in modules], a.max_children)
            if rc != 0:
                return rc
        text, s = report(modules)
        print(text)
    if s is None or s < a.threshold:
        print(f"mutation score {'-' if s is None else f'{s:.1f} %'} is under {a.threshold:.0f} %", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
