"""The package's layers, enforced: every import (including those inside functions) goes down, never up.

    errors, units  <  inputs  <  ledgers  <  tensors  <  book  <  cli, cli_vllm (and __init__, __main__)

A module may import its own layer and any layer below it. No cycles between modules either:
a lazy import inside a function is still an edge.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "glm_kv"
RANK = {"errors": 0, "units": 0, "inputs": 1, "ledgers": 2, "tensors": 3, "book": 4,
        "cli": 5, "cli_vllm": 5, "__init__": 5, "__main__": 5}
# third-party packages a layer may not touch (the ledgers are plain arithmetic: no torch)
FORBIDDEN = {"inputs": {"torch", "numpy", "pandas"}, "ledgers": {"torch"}, "errors": {"torch"}, "units": {"torch"}}


def module_name(path: Path, root: Path = PACKAGE) -> str:
    rel = path.relative_to(root.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1]
    return ".".join(parts)


def layer_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def imports_of(path: Path, module: str) -> list[tuple[str, int]]:
    """Every glm_kv module (and third-party top-level package) this file imports, anywhere in it."""
    tree = ast.parse(path.read_text(), filename=str(path))
    is_pkg = path.name == "__init__.py"
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                base = base[: len(base) - node.level + (1 if is_pkg else 0)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            out.append((target, node.lineno))
            for a in node.names:  # "from . import charts" imports a module
                out.append((f"{target}.{a.name}", node.lineno))
    return out


def graph(root: Path = PACKAGE):
    modules = {module_name(p, root): p for p in root.rglob("*.py")}
    edges: dict[str, set[str]] = {m: set() for m in modules}
    problems = []
    for m, path in modules.items():
        for target, line in imports_of(path, m):
            if target.split(".")[0] != root.name:
                third = target.split(".")[0]
                if third in FORBIDDEN.get(layer_of(m), set()):
                    problems.append(f"{m}:{line} imports {third} (not allowed in layer {layer_of(m)})")
                continue
            while target not in modules and "." in target:
                target = target.rsplit(".", 1)[0]  # an attribute import: "from .x import name"
            if target not in modules or target == m:
                continue
            edges[m].add(target)
            if RANK[layer_of(target)] > RANK[layer_of(m)]:
                problems.append(f"{m}:{line} imports {target}: layer {layer_of(m)} may not import "
                                f"layer {layer_of(target)} (above it)")
    return modules, edges, list(dict.fromkeys(problems))


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in edges:
        if v not in index:
            visit(v)
    return out


def _package_import(m: str) -> bool:
    return m in ("glm_kv", "glm_kv.inputs", "glm_kv.ledgers", "glm_kv.tensors", "glm_kv.book")


def test_every_module_sits_in_a_known_layer():
    modules, _, _ = graph()
    unknown = sorted(m for m in modules if layer_of(m) not in RANK)
    assert not unknown, f"modules outside the four layers: {unknown}"


def test_no_import_goes_up_a_layer():
    _, _, problems = graph()
    assert not problems, "\n".join(problems)


def test_no_import_cycles():
    _, edges, _ = graph()
    # a package's __init__ may re-export from its children; children importing "the package" is
    # then the only way round, so such edges do not count as cycles
    pruned = {m: {t for t in ts if not (_package_import(t) and m.startswith(t + "."))} for m, ts in edges.items()}
    found = cycles(pruned)
    assert not found, f"import cycles: {found}"


@pytest.mark.parametrize("bad_import,where", [
    ("from ..tensors.measure import measure_profile\n", "ledgers/capacity.py"),
    ("from ..book import charts\n", "tensors/budget.py"),
    ("import torch\n", "ledgers/token.py"),
])
def test_the_check_fails_on_an_upward_import(tmp_path, bad_import, where):
    """Copy the package, add one upward import inside a function, and the check must see it."""
    import shutil

    copy = tmp_path / "glm_kv"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    target = copy / where
    target.write_text(target.read_text() + "\n\ndef _sneaky():\n    " + bad_import.replace("\n", "\n    ") + "\n")
    _, _, problems = graph(copy)
    assert any(where.replace("/", ".").removesuffix(".py") in p for p in problems), problems


def test_the_check_finds_a_cycle(tmp_path):
    import shutil

    copy = tmp_path / "glm_kv"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "ledgers" / "token.py").write_text((copy / "ledgers" / "token.py").read_text()
                                               + "\n\ndef _loop():\n    from .plan import Plan\n")
    _, edges, _ = graph(copy)
    assert any("glm_kv.ledgers.token" in c and "glm_kv.ledgers.plan" in c for c in cycles(edges))
