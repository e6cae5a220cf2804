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
import builtins
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


MODULE_LEAK = '''
import socket
import pytest

CLOSE = {close}


class Holder:
    """A socket kept in a reference cycle: only the cyclic collector frees it."""


@pytest.fixture(scope="module")
def a_socket():
    h = Holder()
    h.me, h.s = h, socket.socket()
    yield h.s
    if CLOSE:
        h.s.close()
    del h


def test_uses_a_module_socket(a_socket):
    assert a_socket.fileno() >= 0


def test_uses_it_again(a_socket):
    assert a_socket.fileno() >= 0
'''


def test_a_module_fixture_leak_in_a_cycle_still_fails_the_run(tmp_path):
    """The collector freezes what each test leaves alive (pytest_glm_kv.collect_garbage); a module's
    fixture finalised after its last test must still be collected, and warn, before the run ends."""
    (tmp_path / "test_later.py").write_text("def test_later():\n    assert True\n")
    for close in (False, True):
        (tmp_path / "test_inner.py").write_text(MODULE_LEAK.format(close=close))
        cmd = [sys.executable, "-m", "pytest", "-c", str(ROOT / "pyproject.toml"), "--rootdir", str(ROOT),
               "-p", "no:cacheprovider", "-p", "no:xdist", "-p", "no:randomly", "-q",
               str(tmp_path / "test_inner.py"), str(tmp_path / "test_later.py")]
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
        run = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, timeout=120, env=env)
        out = run.stdout + run.stderr
        if close:
            assert run.returncode == 0, out[-2000:]
        else:
            assert run.returncode != 0 and "ResourceWarning" in out, f"a frozen leak went unseen:\n{out[-2000:]}"


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


def test_a_conflicting_randomly_seed_and_glm_kv_seed_is_an_error_naming_both(tmp_path):
    """Order from one seed and data from another would make the printed seed a lie."""
    source = SEEDED.format(expected="11")
    run = _inner(tmp_path, source, "-p", "randomly", "--randomly-seed=12", env={"GLM_KV_SEED": "11"})
    out = run.stdout + run.stderr
    assert run.returncode != 0, out[-2000:]
    assert "GLM_KV_SEED=11" in out and "--randomly-seed=12" in out, out[-2000:]
    # the same value given twice is one seed
    same = _inner(tmp_path, source, "-p", "randomly", "--randomly-seed=11", env={"GLM_KV_SEED": "11"})
    assert same.returncode == 0, (same.stdout + same.stderr)[-2000:]


# -- every test can fail: an assertion in every test function, no parametrization over nothing ------
#
# The rule, checkable on the syntax alone: a test function (``test_*``, module level or in a
# ``Test*`` class) asserts when its body holds an ``assert``, a ``raise``, ``pytest.raises`` /
# ``pytest.warns`` / ``pytest.fail``, or a call to a function that asserts by the same rule:
# any function of that name defined under tests/ (so a helper ``check(...)`` counts when the
# ``check`` it names asserts), or a name starting ``assert`` (``assert_frame_equal``). A
# parametrization must not be over an empty list/tuple literal, nor a module-level name bound to
# one, nor a ``for`` loop in a test over such a name (a loop over nothing asserts nothing).

ASSERTING_CALLS = {"raises", "warns", "fail", "deprecated_call", "approx"}
# test functions that pass by not raising, each with why that is the check
NO_ASSERT_ALLOWED: dict[str, str] = {
    "tests/inputs/test_bad_input.py::test_every_sglang_choice_passes_validation":
        "passes by not raising: make_profile raises ProfileError on a value it refuses, and the "
        "test's point is that none of SGLang's choices is refused",
}


def _callee(node: ast.Call) -> str | None:
    f = node.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None


def _direct_asserts(fn: ast.AST, helpers: set[str]) -> bool:
    for n in ast.walk(fn):
        if isinstance(n, (ast.Assert, ast.Raise)):
            return True
        if isinstance(n, ast.Call):
            name = _callee(n)
            if name and (name in ASSERTING_CALLS or name.startswith("assert") or name in helpers):
                return True
    return False


def asserting_helpers(trees: list[ast.AST]) -> set[str]:
    """Names of functions (anywhere in ``trees``) that assert, directly or through one another."""
    funcs = [n for t in trees for n in ast.walk(t) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    helpers: set[str] = set()
    while True:
        more = {f.name for f in funcs if f.name not in helpers and _direct_asserts(f, helpers)}
        if not more:
            return helpers
        helpers |= more


def _test_functions(tree: ast.Module):
    for n in tree.body:
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name.startswith("test"):
            yield n
        elif isinstance(n, ast.ClassDef) and n.name.startswith("Test"):
            yield from (m for m in n.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))
                        and m.name.startswith("test"))


def _empty_names(tree: ast.Module) -> set[str]:
    """Module-level names bound to an empty list/tuple/set literal (``CASES = ()``)."""
    out = set()
    for n in tree.body:
        if isinstance(n, (ast.Assign, ast.AnnAssign)) and _is_empty(n.value):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            out |= {t.id for t in targets if isinstance(t, ast.Name)}
    return out


def _is_empty(node: ast.AST | None) -> bool:
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return not node.elts
    if isinstance(node, ast.Dict):
        return not node.keys
    return (isinstance(node, ast.Call) and _callee(node) in ("list", "tuple", "set", "dict")
            and not node.args and not node.keywords)


# calls that compute on what a test already holds: a test that calls only these, takes no fixture and
# no parameter, asserts on module constants and literals (``assert len(MATRIX) >= 30``)
PURE_CALLS = {"round", "len", "int", "float", "str", "abs", "min", "max", "sum", "sorted", "set", "list",
              "tuple", "dict", "range", "bool", "any", "all", "isinstance", "repr", "format", "divmod",
              "pow", "enumerate", "zip", "raises", "approx"}


def _literal_names(tree: ast.Module) -> set[str]:
    """Module-level names bound to literals or literal arithmetic (``N, G = 6_327_680, 3.80``)."""
    names: set[str] = set()

    def literal(v: ast.AST) -> bool:
        return all(isinstance(n, (ast.Constant, ast.BinOp, ast.UnaryOp, ast.Tuple, ast.List, ast.operator,
                                  ast.unaryop, ast.expr_context, ast.Set))
                   or (isinstance(n, ast.Name) and n.id in names) for n in ast.walk(v))

    for n in tree.body:
        if isinstance(n, ast.Assign) and literal(n.value):
            for t in n.targets:
                names |= {x.id for x in ast.walk(t) if isinstance(x, ast.Name)}
    return names


def _only_constants(fn: ast.FunctionDef, literals: set[str]) -> bool:
    """True when the test takes nothing (no fixture, no parameter), calls nothing but PURE_CALLS and
    reads no name but the module's literal constants: it asserts on arithmetic it wrote itself."""
    a = fn.args
    params = a.args[1:] if a.args and a.args[0].arg == "self" else a.args
    if params or a.kwonlyargs or a.vararg or a.kwarg:
        return False
    local = {t.id for n in ast.walk(fn) if isinstance(n, (ast.Assign, ast.For, ast.comprehension))
             for t in ast.walk(n.targets[0] if isinstance(n, ast.Assign) else n.target) if isinstance(t, ast.Name)}
    for n in ast.walk(fn):
        if isinstance(n, ast.Call) and _callee(n) not in PURE_CALLS:
            return False
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id not in literals | local | PURE_CALLS \
                and n.id != "pytest" and not hasattr(builtins, n.id):
            return False
    return True


# test functions that assert on constants on purpose, each with why
CONSTANTS_ALLOWED: dict[str, str] = {
    "tests/book/test_problems.py::test_hand_figures_are_the_published_ones":
        "checks the module's own hand derivations (literal arithmetic from SGLang's rules) against the "
        "published figures before other tests use them as expected values: a check of test data",
}


def suite_defects(sources: dict[str, str], helper_trees: list[ast.AST] = ()) -> list[str]:
    """``path:line name: why`` for each test function that cannot fail by the rule above."""
    trees = {p: ast.parse(s) for p, s in sources.items()}
    helpers = asserting_helpers([*trees.values(), *helper_trees])
    bad = []
    for path, tree in trees.items():
        empty, literals = _empty_names(tree), _literal_names(tree)
        for fn in _test_functions(tree):
            where = f"{path}:{fn.lineno} {fn.name}"
            if f"{path}::{fn.name}" not in NO_ASSERT_ALLOWED and not _direct_asserts(fn, helpers):
                bad.append(f"{where}: no assertion")
            elif f"{path}::{fn.name}" not in CONSTANTS_ALLOWED and _only_constants(fn, literals):
                bad.append(f"{where}: asserts on constants only (calls no code under test, takes no fixture)")
            for d in fn.decorator_list:
                if isinstance(d, ast.Call) and _callee(d) == "parametrize" and len(d.args) >= 2:
                    values = d.args[1]
                    if _is_empty(values) or (isinstance(values, ast.Name) and values.id in empty):
                        bad.append(f"{where}: parametrized over an empty collection")
            for n in ast.walk(fn):
                if isinstance(n, ast.For) and (_is_empty(n.iter) or (isinstance(n.iter, ast.Name) and n.iter.id in empty)):
                    bad.append(f"{where}:{n.lineno}: loops over an empty collection")
                elif (isinstance(n, ast.For) and isinstance(n.iter, ast.Call) and _callee(n.iter) == "get"
                      and len(n.iter.args) == 2 and _is_empty(n.iter.args[1])):
                    # for v in TABLE.get(key, ()): a case whose key is missing checks nothing
                    bad.append(f"{where}:{n.lineno}: loops over an empty collection when the key is missing")
    return bad


PLANTED_DEFECTS = {
    "def test_a():\n    x = 1 + 1\n": "no assertion",
    "import pytest\n@pytest.mark.parametrize('x', [])\ndef test_b(x):\n    assert x\n": "empty collection",
    "import pytest\nCASES = ()\n@pytest.mark.parametrize('x', CASES)\ndef test_c(x):\n    assert x\n": "empty collection",
    "CASES = ()\ndef test_d():\n    for c in CASES:\n        assert c\n": "empty collection",
    "T = {}\ndef test_j(k):\n    for c in T.get(k, ()):\n        assert c\n": "empty collection",
    "class TestE:\n    def test_e(self):\n        print(1)\n": "no assertion",
    "MATRIX = [1] * 40\ndef test_k():\n    assert len(MATRIX) >= 30\n": "constants only",
    "import pytest\nN, G = 6_327_680, 3.80\ndef test_l():\n    with pytest.raises(AssertionError):\n"
    "        assert round(N * 545 / 2**30, 2) == G\n": "constants only",
}
SOUND = {
    "def check(x):\n    assert x\ndef test_f():\n    check(1)\n": "a helper that asserts",
    "import pytest\nfrom m import parse\ndef test_g():\n    with pytest.raises(ValueError):\n        parse('x')\n": "pytest.raises",
    "import pytest\n@pytest.mark.parametrize('x', [1])\ndef test_h(x):\n    assert x\n": "one case",
    "from m import f\ndef test_m():\n    assert f(2) == 4\n": "calls the code under test",
    "def outer(x):\n    inner(x)\ndef inner(x):\n    if not x:\n        raise AssertionError\ndef test_i():\n    outer(1)\n": "nested helper",
}


def test_the_suite_guard_catches_planted_defects():
    for source, why in PLANTED_DEFECTS.items():
        found = suite_defects({"planted.py": source})
        assert any(why in f for f in found), (source, found)
    for source, why in SOUND.items():
        assert suite_defects({"sound.py": source}) == [], (source, why)


def test_every_test_function_can_fail():
    paths = sorted((ROOT / "tests").rglob("test_*.py"))
    others = [ast.parse(p.read_text()) for p in sorted((ROOT / "tests").rglob("*.py")) if not p.name.startswith("test_")]
    bad = suite_defects({str(p.relative_to(ROOT)): p.read_text() for p in paths}, others)
    assert not bad, "tests that cannot fail:\n" + "\n".join(bad)


# -- the SGLang group's report step always runs, and its failure fails the group ---------------------

def _test_groups():
    import importlib.util

    spec = importlib.util.spec_from_file_location("test_groups", ROOT / "scripts" / "test_groups.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("test_groups", mod)  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


def test_the_report_step_runs_after_a_failing_step_and_fails_the_group(capsys):
    tg = _test_groups()
    env = dict(os.environ)
    wrote = (sys.executable, "-c", "print('report step ran')")
    ok, _, _ = tg.run_group(tg.Group("x", "", steps=((sys.executable, "-c", "raise SystemExit(1)"),
                                                      (sys.executable, "-c", "print('NOT REACHED')")),
                                     always=(wrote,)), env)
    out = capsys.readouterr().out
    assert not ok and "report step ran" in out and "NOT REACHED" not in out
    # a report step that fails (a profile without a result) fails a group whose tests passed
    ok, _, _ = tg.run_group(tg.Group("y", "", steps=(wrote,),
                                     always=((sys.executable, "-c", "raise SystemExit(1)"),)), env)
    assert not ok
    sglang = next(g for g in tg.groups() if g.name == "sglang")
    assert any("--merge" in step for step in sglang.always)
    assert any("--clean" in step for step in sglang.steps[:1])


def test_the_vllm_group_builds_its_venv_and_runs_tests_vllm_once():
    """`make test` runs tests/vllm in its own group (its venv built first); the unit group leaves it
    out, or tests/vllm would run twice once .venv-vllm exists."""
    tg = _test_groups()
    by_name = {g.name: g for g in tg.groups()}
    vllm = by_name["vllm"]
    assert vllm.steps[0][-1] == "scripts/vllm-env.sh"
    assert any(step[-1] == "tests/vllm" for step in vllm.steps[1:])
    assert "--ignore=tests/vllm" in by_name["unit"].steps[0]
    assert all(g is vllm or not any("tests/vllm" == a for step in g.steps for a in step) for g in by_name.values())


def test_a_failing_step_s_last_lines_reach_the_summary(capsys):
    """CI's log keeps the head and the tail: a set-up step's failure in the middle must be told again
    in the summary (the failing step, its exit or signal, its last lines without pip's find-links noise)."""
    tg = _test_groups()
    script = ("import sys\nprint(\"WARNING: Location 'file:///opt/x/' is ignored: it is neither a file nor a directory.\")\n"
              "print('first'); print('ERROR: No space left on device'); sys.exit(3)")
    g = tg.Group("z", "", steps=((sys.executable, "-c", script), (sys.executable, "-c", "print('NOT REACHED')")))
    ok, _, _ = tg.run_group(g, dict(os.environ))
    assert not ok
    assert g.failure[0].startswith("failed step (exit 3;") and "GiB free on the disk" in g.failure[0]
    assert g.failure[1:] == ["    | first", "    | ERROR: No space left on device"]
    # a step killed by a signal says which
    k = tg.Group("k", "", steps=((sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"),))
    tg.run_group(k, dict(os.environ))
    assert k.failure[0].startswith("failed step (signal 9;")
    # a group that passes tells nothing
    p = tg.Group("p", "", steps=((sys.executable, "-c", "print(1)"),))
    assert tg.run_group(p, dict(os.environ))[0] and p.failure == []


def test_the_run_says_what_disk_it_needs_and_warns_when_short(monkeypatch, tmp_path):
    """A full disk fails tests far from the cause (a 2026-12-05 CI run: tmp_path, a copied package and
    a truncated notebook failed; the venvs of stale clones had filled the disk), so the run's head
    says what is free and what it needs: the venvs not built yet (by their du) plus the temp dir."""
    tg = _test_groups()
    monkeypatch.setattr(tg, "ROOT", tmp_path)  # a fresh clone: no venv is built yet
    by_name = {g.name: g for g in tg.groups()}
    needed = 6.1 + 8.2 + 1.6 + 1.0  # sglang, vllm and .venv by du -sh on 2026-12-06, then the temp dir
    monkeypatch.setattr(tg, "free_gib", lambda path: needed + 0.05)
    line, enough = tg.disk_check(list(by_name.values()))
    assert enough and "this run needs about 16.9 GiB (15.9 for venvs not built yet" in line
    assert "WARNING" not in line
    monkeypatch.setattr(tg, "free_gib", lambda path: needed - 0.05)
    line, enough = tg.disk_check(list(by_name.values()))
    assert not enough and "WARNING: not enough free disk" in line
    # a venv that is there costs nothing; the unit group alone needs only its venv and the temp dir
    (tmp_path / ".venv").mkdir()
    line, enough = tg.disk_check([by_name["unit"]])
    assert enough and "needs about 1.0 GiB (0.0 for venvs" in line
