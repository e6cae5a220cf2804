"""``glm-kv plan --json`` as a whole process, against a bare Python start (issue 23: <= 6 x).

Both are measured in the same run, in pairs (the order alternates within each pair, so a burst of
load hits both sides alike), and compared as medians. The CLI is started the way its console
script starts it (``from glm_kv.cli import main; sys.exit(main())``), with this checkout first on
``PYTHONPATH``; the bare start is ``python -c "import json"``. ``python -m benchmarks.cli_startup``
prints the figures; ``measure()`` is what ``python -m benchmarks --check`` calls.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_RATIO = 6.0
BARE = [sys.executable, "-c", "import json"]
CLI = [sys.executable, "-c", "import sys; from glm_kv.cli import main; sys.exit(main())",
       "plan", "--profile", "article", "--json"]


def _env() -> dict:
    env = dict(os.environ)
    # the warm-up below writes the .pyc a user's install has; a shell with PYTHONDONTWRITEBYTECODE set
    # would make every start recompile glm_kv (6.1 x instead of 4.1 x, 2026-12-05), timing the shell
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    return env


def _run(cmd: list[str], env: dict) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t


def measure(repeats: int = 15) -> dict:
    """Paired medians of ``repeats`` starts each: {"cli_s", "bare_s", "ratio", "paired_ratio", ...}.

    ``ratio`` is median(CLI) / median(bare); ``paired_ratio`` the median of the per-pair ratios
    (the two agree when the machine is quiet; the check uses ``ratio``).
    """
    env = _env()
    _run(CLI, env)   # warm the file cache (.pyc) once; not counted
    _run(BARE, env)
    cli, bare = [], []
    for i in range(repeats):
        if i % 2:
            bare.append(_run(BARE, env))
            cli.append(_run(CLI, env))
        else:
            cli.append(_run(CLI, env))
            bare.append(_run(BARE, env))
    cli_s, bare_s = statistics.median(cli), statistics.median(bare)
    return {"cli_s": cli_s, "bare_s": bare_s, "ratio": cli_s / bare_s,
            "paired_ratio": statistics.median(c / b for c, b in zip(cli, bare)),
            "repeats": repeats, "target_ratio": TARGET_RATIO, "ok": cli_s / bare_s <= TARGET_RATIO}


if __name__ == "__main__":
    r = measure(int(sys.argv[1]) if len(sys.argv) > 1 else 15)
    print(json.dumps(r, indent=1))
    print(f"glm-kv plan --json: {r['cli_s'] * 1e3:.1f} ms vs bare python {r['bare_s'] * 1e3:.1f} ms: "
          f"{r['ratio']:.2f} x (target <= {TARGET_RATIO:g} x)")
