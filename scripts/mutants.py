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
]
KILLED = {1, 3, 37}          # a test failed (3: pytest internal error), or the type checker
SURVIVED = {0}
NO_TESTS = {5, 33}
TIMEOUT = {24, -24, 36, 152, 255}


def _module(name: str) -> str:
    name = name.removeprefix("glm_kv.").removesuffix(".py").replace("/", ".")
    if "." not in name:
        name = ("inputs." if name in {"resolve", "profile", "model", "launch", "workload_spec",
                                      "boot_log", "gpus"} else "ledgers.") + name
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


ADDED_TESTS = ["tests/ledgers/test_mutants_ledgers.py", "tests/inputs/test_mutants_inputs.py"]
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
    survivors = [k for m in modules for k, c in results(m).items() if c in SURVIVED]
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
        codes = {k: (1 if c in SURVIVED and rechecked.get(k) else c) for k, c in results(m).items()}
        t = tally(codes)
        t["added"] = sum(1 for k, c in results(m).items() if c in SURVIVED and rechecked.get(k))
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("modules", nargs="*", help="e.g. token ledgers.request inputs.resolve (default: "
                    + " ".join(DEFAULT_MODULES) + "); 'all' for every module")
    ap.add_argument("--report", action="store_true", help="only print the table of the stored results")
    ap.add_argument("--recheck", action="store_true",
                    help="re-try the survivors with the tests added against them, then report")
    ap.add_argument("--max-children", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--threshold", type=float, default=90.0)
    a = ap.parse_args(argv)
    modules = (ALL_MODULES if a.modules == ["all"] else [_module(m) for m in a.modules] or DEFAULT_MODULES)
    if a.recheck:
        os.environ.setdefault("GLM_KV_SEED", str(random.SystemRandom().randrange(1, 2**31)))
        recheck(modules)
    elif not a.report:
        seed = os.environ.get("GLM_KV_SEED", "").strip() or str(random.SystemRandom().randrange(1, 2**31))
        os.environ["GLM_KV_SEED"] = seed
        print(f"glm-kv seed: {seed}  (reproduce: make mutants SEED={seed})", flush=True)
        start = time.monotonic()
        cmd = [sys.executable, "-m", "mutmut", "run", "--max-children", str(a.max_children),
               *[f"glm_kv.{m}.*" for m in modules]]
        print("$", " ".join(cmd), flush=True)
        rc = subprocess.call(cmd)
        print(f"mutmut exit {rc} after {time.monotonic() - start:.0f} s", flush=True)
        if rc not in (0,):
            return rc
    text, s = report(modules)
    print(text)
    if s is None or s < a.threshold:
        print(f"mutation score {'-' if s is None else f'{s:.1f} %'} is under {a.threshold:.0f} %", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
