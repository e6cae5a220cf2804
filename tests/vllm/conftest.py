"""vLLM 0.33.0's own KV sizing, driven on the CPU (tests/vllm). pytest runs here in any interpreter;
each launch runs in a subprocess of ``.venv-vllm/bin/python`` (scripts/vllm-env.sh makes it). Without
that venv every test here is skipped, with the reason and how to build it."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
VENV_PYTHON = ROOT / ".venv-vllm" / "bin" / "python"
STUB = ROOT / ".venv-vllm" / "stubcuda" / "libcuda.so.1"
MARKER = "ORACLE-RESULT "
# one launch: ~15-40 s of CPU on meta tensors; a hung import must not hang CI
LAUNCH_TIMEOUT_S = int(os.environ.get("GLM_KV_VLLM_TIMEOUT_S", "600"))

if not (VENV_PYTHON.exists() and STUB.exists()):
    READY, SKIP_REASON = False, (f"vLLM driver: {VENV_PYTHON.relative_to(ROOT)} (with its stub libcuda) is absent; "
                                 "run `make test-vllm` (scripts/vllm-env.sh builds it: several GB, ~10 min)")
else:
    READY, SKIP_REASON = True, ""


def pytest_collection_modifyitems(config, items):
    from tests.pytest_glm_kv import skip_folder_unless

    skip_folder_unless(READY, SKIP_REASON, HERE, items)


_CACHE: dict[str, dict] = {}


def run_launch(launch: dict) -> dict:
    """vLLM's plan for one launch (oracle.py in .venv-vllm, nice'd), cached per session by its JSON."""
    key = json.dumps(launch, sort_keys=True)
    if key not in _CACHE:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "VIRTUAL_ENV"))}
        env.update(OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")
        proc = subprocess.run(["nice", "-n", "10", str(VENV_PYTHON), str(HERE / "oracle.py"), key],
                              capture_output=True, text=True, cwd=ROOT, env=env, timeout=LAUNCH_TIMEOUT_S)
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(MARKER)]
        assert proc.returncode == 0 and len(lines) == 1, (
            f"oracle failed for {key} (rc {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}")
        _CACHE[key] = json.loads(lines[0][len(MARKER):])
    return _CACHE[key]


@pytest.fixture(scope="session")
def vllm_plan():
    return run_launch
