"""The suite's own guards work: a leak fails the test that leaked; the seed reaches every test,
and no test module keeps a literal seed of its own for when GLM_KV_SEED is unset.

Each check runs a small inner pytest session with this repository's own configuration
(``pyproject.toml``: the ``tests.pytest_glm_kv`` plugin and its ``filterwarnings``) on a file
written here, once with the fault and once without: the guard must fail the first and pass the
second, so it can neither be vacuous nor always fail. The literal-seed guard is a scan of the
test modules' syntax, itself tried on planted sources first (``PLANTED_SEEDS``).
"""
from __future__ import annotations

import ast
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
import ast
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


# -- one seed rule: the run's seed, never a literal one when GLM_KV_SEED is unset -------------------

SEED_ENV = "GLM_KV_SEED"


def _reads_the_seed(node: ast.AST) -> bool:
    """``os.environ.get("GLM_KV_SEED", ...)``, ``os.getenv(...)``, ``os.environ.setdefault(...)``."""
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("get", "getenv", "setdefault") and bool(node.args)
            and isinstance(node.args[0], ast.Constant) and node.args[0].value == SEED_ENV)


def _is_literal_seed(node: ast.AST | None) -> bool:
    """A number, or a string that is not empty (``int("")`` fails loudly, which is the rule)."""
    return (isinstance(node, ast.Constant) and not isinstance(node.value, bool)
            and isinstance(node.value, (int, float, str)) and str(node.value).strip() != "")


def literal_seed_fallbacks(source: str) -> list[int]:
    """Lines of ``source`` that read GLM_KV_SEED with a literal seed for when it is unset:
    a literal default (``get("GLM_KV_SEED", "20261130")``) or a literal after ``or``."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if _reads_the_seed(node):
            defaults = node.args[1:] + [k.value for k in node.keywords if k.arg in ("default", "value")]
            if any(_is_literal_seed(d) for d in defaults):
                lines.append(node.lineno)
        elif isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):
            first = node.values[0]
            if any(_reads_the_seed(n) for n in ast.walk(first)) and any(_is_literal_seed(v) for v in node.values[1:]):
                lines.append(node.lineno)
    return sorted(set(lines))


PLANTED_SEEDS = {
    'SEED = int(os.environ.get("GLM_KV_SEED", "20261130"))': True,
    'seed = int(os.getenv("GLM_KV_SEED", 7))': True,
    'SEED = int(os.environ.get("GLM_KV_SEED") or 42)': True,
    'SEED = int(os.environ.get("GLM_KV_SEED", "") or "5")': True,
    'os.environ.setdefault("GLM_KV_SEED", "1")': True,
    'SEED = run_seed()': False,
    'SEED = int(os.environ["GLM_KV_SEED"])': False,
    'given = os.environ.get("GLM_KV_SEED", "").strip()': False,
    'n = int(os.environ.get("GLM_KV_RADIX_OPS", "10000"))': False,
}


def test_the_literal_seed_finder_finds_what_it_should():
    for source, planted in PLANTED_SEEDS.items():
        assert bool(literal_seed_fallbacks(source)) == planted, source


def test_no_test_module_keeps_a_literal_fallback_seed():
    """Every randomised test takes the run's seed (``tests/pytest_glm_kv.run_seed``: GLM_KV_SEED,
    which the plugin always sets, failing loudly where it is missing): a literal fallback would
    be a second, fixed seed that a run outside the plugin silently uses instead."""
    found = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for line in literal_seed_fallbacks(path.read_text()):
            found.append(f"{path.relative_to(ROOT)}:{line}")
    assert not found, f"literal fallback seeds (use run_seed() from tests.pytest_glm_kv): {found}"
