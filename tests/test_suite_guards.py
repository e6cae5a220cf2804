"""The suite's own guards work: a leak fails the test that leaked; the seed reaches every test.

Each check runs a small inner pytest session with this repository's own configuration
(``pyproject.toml``: the ``tests.pytest_glm_kv`` plugin and its ``filterwarnings``) on a file
written here, once with the fault and once without: the guard must fail the first and pass the
second, so it can neither be vacuous nor always fail.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

LEAKY = '''
import socket
import pytest

CLOSE = {close}


@pytest.fixture
def a_socket():
    s = socket.socket()
    yield s
    if CLOSE:
        s.close()


def test_uses_a_socket(a_socket):
    assert a_socket.fileno() >= 0


def test_after_it():
    assert True
'''


def _inner(tmp_path: Path, source: str, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    test = tmp_path / "test_inner.py"
    test.write_text(source)
    cmd = [sys.executable, "-m", "pytest", "-c", str(ROOT / "pyproject.toml"), "--rootdir", str(ROOT),
           "-p", "no:cacheprovider", "-p", "no:xdist", "-q", str(test), *args]
    outer = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}  # not an xdist worker's
    return subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, timeout=120,
                          env={**outer, **(env or {})})


def test_a_fixture_that_leaves_a_socket_open_fails_the_run(tmp_path):
    leaked = _inner(tmp_path, LEAKY.format(close=False), "-p", "no:randomly")
    out = leaked.stdout + leaked.stderr
    assert leaked.returncode != 0, f"the leak guard let an unclosed socket pass:\n{out[-2000:]}"
    assert "ResourceWarning" in out and "socket" in out, out[-2000:]
    # the failure lands in the test that leaked, not in a later one
    failing = [line for line in out.splitlines() if line.startswith(("FAILED", "ERROR"))]
    assert failing and all("test_uses_a_socket" in line for line in failing), failing

    closed = _inner(tmp_path, LEAKY.format(close=True), "-p", "no:randomly")
    assert closed.returncode == 0, (closed.stdout + closed.stderr)[-2000:]


SEEDED = '''
import os


def test_sees_the_seed():
    print("SEED=" + os.environ["GLM_KV_SEED"])
    assert os.environ["GLM_KV_SEED"] == {expected!r}
'''


def test_the_run_seed_reaches_tests_and_is_printed(tmp_path):
    env = {"GLM_KV_SEED": "424242"}
    run = _inner(tmp_path, SEEDED.format(expected="424242"), "-s", env=env)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-2000:]
    assert "glm-kv seed: 424242" in out  # header and closing summary
    assert "make test SEED=424242" in out
    assert "SEED=424242" in out
    # without a seed each run draws its own, and says which
    fresh = {k: v for k, v in os.environ.items() if k != "GLM_KV_SEED" and not k.startswith("PYTEST_")}
    seeds = set()
    for _ in range(2):
        run = subprocess.run([sys.executable, "-m", "pytest", "-c", str(ROOT / "pyproject.toml"),
                              "--rootdir", str(ROOT), "-p", "no:cacheprovider", "-q", "--collect-only",
                              str(tmp_path / "test_inner.py")],
                             capture_output=True, text=True, cwd=tmp_path, timeout=120, env=fresh)
        line = next(l for l in run.stdout.splitlines() if l.startswith("glm-kv seed:"))
        seeds.add(line.split()[2])
    assert len(seeds) == 2, f"two runs without a seed drew the same one: {seeds}"
