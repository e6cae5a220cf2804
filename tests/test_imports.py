"""Issue 23: ``glm-kv plan`` starts fast because it imports only what it needs.

Each command runs in a fresh interpreter, as the console script starts it; the interpreter then
lists every module it loaded. ``plan --json`` (a shipped profile, a profile file, ``--set``, a
launch command) and ``verify --json`` must not load torch, numpy, pandas, pydantic, altair,
nbformat or rich. ``advise`` (numpy by design) shows the check sees an import when there is one.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "numpy", "pandas", "pydantic", "altair", "nbformat", "rich")
PROBE = """
import contextlib, io, json, sys
from glm_kv.cli import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    rc = main(sys.argv[1:])
print(json.dumps({"rc": rc, "modules": sorted(sys.modules), "out": out.getvalue()[:200]}))
"""
LOG = ROOT / "tests" / "ledgers" / "boot_logs" / "h200-tp8-dp8-dpattn"


def loaded_modules(*argv: str) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    r = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, env=env,
                       timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def heavy_in(modules: list[str]) -> list[str]:
    return sorted({m.split(".")[0] for m in modules} & set(HEAVY))


@pytest.mark.parametrize("argv", [
    ("plan", "--profile", "article", "--json"),
    ("plan", "--profile", "h200-0.5.23", "--json"),
    ("plan", "--profile", str(LOG.with_suffix(".yaml")), "--set", "hicache_ratio=1.5", "--json"),
    ("plan", "--json", "--sglang-args", "python -m sglang.launch_server --model-path zai-org/GLM-5.3-Flash --tp 8"),
    ("verify", "--boot-log", str(LOG.with_suffix(".log")), "--profile", str(LOG.with_suffix(".yaml")), "--json"),
    ("plan", "--json", "--vllm-args", "vllm serve zai-org/GLM-5.3-Flash -tp 8 --kv-cache-memory-bytes 60G"),
], ids=["plan-article", "plan-h200", "plan-file-set", "plan-launch", "verify", "plan-vllm"])
def test_plan_and_verify_load_no_heavy_module(argv):
    r = loaded_modules(*argv)
    assert r["rc"] == 0 and r["out"].startswith("{"), r
    assert heavy_in(r["modules"]) == [], f"{' '.join(argv)} loaded {heavy_in(r['modules'])}"


def test_the_check_sees_a_heavy_import():
    """``advise`` builds its candidate grid with numpy: the same probe must report it."""
    r = loaded_modules("advise", "--profile", "h200-0.5.23", "--workload", "chat", "--json")
    assert r["rc"] == 0 and "numpy" in heavy_in(r["modules"]), r["rc"]
