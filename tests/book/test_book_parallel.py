"""``glm-kv book --jobs N``: the same bytes with 1 job or N, kernels reused across profiles.

The byte comparison is the check that sharing kernels between profiles leaks nothing: with one
job a single kernel executes both profiles' notebooks one after another; with two the notebooks
interleave over two kernels, so every notebook after the first has another history.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytest.importorskip("papermill")
nbformat = pytest.importorskip("nbformat")

from glm_kv.book.runner import run_book  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
PROFILES = ["b200-0.5.23", "tp8"]  # two books that differ in every chapter's numbers


def differing_files(a: Path, b: Path) -> list[str]:
    """Every relative path present in one tree only, or whose bytes differ (with the first offset)."""
    fa = {p.relative_to(a): p for p in a.rglob("*") if p.is_file()}
    fb = {p.relative_to(b): p for p in b.rglob("*") if p.is_file()}
    out = [f"{r}: only in {a.name}" for r in sorted(fa.keys() - fb.keys())]
    out += [f"{r}: only in {b.name}" for r in sorted(fb.keys() - fa.keys())]
    for r in sorted(fa.keys() & fb.keys()):
        x, y = fa[r].read_bytes(), fb[r].read_bytes()
        if x != y:
            at = next((i for i, (u, v) in enumerate(zip(x, y)) if u != v), min(len(x), len(y)))
            out.append(f"{r}: differs at byte {at}: {x[max(0, at - 40):at + 40]!r} vs {y[max(0, at - 40):at + 40]!r}")
    return out


def test_one_job_and_two_jobs_write_the_same_bytes_slow(tmp_path):
    one, two = tmp_path / "jobs1", tmp_path / "jobs2"
    r1 = run_book(PROFILES, one, html=True, progress=False, jobs=1, log=lambda m: None)
    r2 = run_book(PROFILES, two, html=True, progress=False, jobs=2, log=lambda m: None)
    assert [b.slug for b in r1.books] == [b.slug for b in r2.books] == PROFILES
    files = [p for p in one.rglob("*") if p.is_file()]
    assert len(files) > 100 and any(p.suffix == ".html" for p in files) and any(p.suffix == ".ipynb" for p in files)
    diff = differing_files(one, two)
    assert not diff, f"{len(diff)} files differ between --jobs 1 and --jobs 2:\n" + "\n".join(diff[:10])


def test_the_comparison_sees_one_changed_byte_and_one_missing_file(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    (a / "x").mkdir(parents=True)
    (a / "x" / "page.html").write_bytes(b"<p>5,808 bytes</p>")
    (a / "index.html").write_text("index")
    shutil.copytree(a, b)
    assert differing_files(a, b) == []
    (b / "x" / "page.html").write_bytes(b"<p>5,809 bytes</p>")
    (a / "only.txt").write_text("1")
    diff = differing_files(a, b)
    assert len(diff) == 2 and diff[0].startswith("only.txt: only in a") and "differs at byte 7" in diff[1]


def _book(root: Path, cells: dict[str, str]) -> None:
    (root / "notebooks").mkdir(parents=True)
    (root / "book").mkdir()
    (root / "_config.yml").write_text("title: tiny\nexecute:\n  execute_notebooks: 'off'\n")
    (root / "_toc.yml").write_text("format: jb-book\nroot: book/intro\nchapters:\n"
                                   + "".join(f"  - file: notebooks/{n}\n" for n in cells))
    (root / "book" / "intro.md").write_text("# Tiny\n")
    for name, body in cells.items():
        nb = nbformat.v4.new_notebook(cells=[
            nbformat.v4.new_code_cell('profile = "article"\nprofiles = None', metadata={"tags": ["parameters"]}),
            nbformat.v4.new_code_cell(body)])
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        nbformat.write(nb, root / "notebooks" / f"{name}.ipynb")


def _outputs(out: Path, slug: str, name: str) -> str:
    nb = nbformat.read(out / slug / "src" / "notebooks" / f"{name}.ipynb", as_version=4)
    return "".join(o.get("text", "") for c in nb.cells for o in c.get("outputs", []))


def test_state_leaking_between_kernels_is_what_the_byte_comparison_catches(tmp_path):
    """A planted leak (a counter kept in ``builtins``, which ``%reset -f`` does not clear) makes
    --jobs 1 and --jobs 2 write different notebooks: the comparison above would fail on it."""
    leak = "import builtins\nbuiltins._glm_kv_n = getattr(builtins, '_glm_kv_n', 0) + 1\nprint(builtins._glm_kv_n)"
    _book(tmp_path / "src", {"01_a": leak, "02_b": leak})
    profiles = ["article", "b200-0.5.23"]
    for jobs in (1, 2):
        run_book(profiles, tmp_path / f"jobs{jobs}", root=tmp_path / "src", html=False, progress=False,
                 jobs=jobs, log=lambda m: None)
    assert _outputs(tmp_path / "jobs1", "b200-0.5.23", "02_b").strip() == "4"  # one kernel saw all four
    assert differing_files(tmp_path / "jobs1", tmp_path / "jobs2")


def test_one_kernel_per_worker_for_the_whole_run(tmp_path):
    """Kernels are not started per profile: with one job every notebook of both profiles runs in
    the same kernel process; with two, in at most two."""
    _book(tmp_path / "src", {"01_a": "import os\nprint(os.getpid())", "02_b": "import os\nprint(os.getpid())"})
    profiles = ["article", "b200-0.5.23"]
    for jobs in (1, 2):
        out = tmp_path / f"jobs{jobs}"
        run_book(profiles, out, root=tmp_path / "src", html=False, progress=False, jobs=jobs, log=lambda m: None)
        pids = {_outputs(out, slug, n).strip() for slug in profiles for n in ("01_a", "02_b")}
        assert 1 <= len(pids) <= jobs, (jobs, pids)


@pytest.mark.parametrize("value", ["0", "-1", "two"])
def test_cli_refuses_a_jobs_value_by_name(value, tmp_path, capsys):
    from glm_kv.cli import main

    with pytest.raises(SystemExit) as e:
        main(["book", "--jobs", value, "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "--jobs" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_cli_jobs_default_is_the_number_of_cores():
    import os

    from glm_kv.book.runner import default_jobs
    from glm_kv.cli import build_parser

    assert build_parser().parse_args(["book", "--jobs", "3"]).jobs == 3
    assert build_parser().parse_args(["book"]).jobs is None and default_jobs() == (os.cpu_count() or 1)


def _tree_node_module():
    """The module that numbers radix-tree nodes (``radix_cache`` before the radix package split)."""
    import importlib

    for name in ("glm_kv.tensors.radix.nodes", "glm_kv.tensors.radix_cache"):
        try:
            mod = importlib.import_module(name)
        except ImportError:
            continue
        if hasattr(mod, "TreeNode") and hasattr(mod, "_ids"):
            return mod
    pytest.skip("no radix-tree node counter in this checkout")


def test_a_reused_kernel_gets_module_counters_back_as_after_import(tmp_path, monkeypatch):
    """``kernel_state.fresh`` (the first cell of every notebook the runner executes) restarts the
    radix tree's node ids, which otherwise continue from the previous notebook in that kernel."""
    pytest.importorskip("torch")
    from glm_kv.book import kernel_state

    nodes = _tree_node_module()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(kernel_state, "_START", None)
    monkeypatch.setattr(nodes, "_ids", nodes._ids)  # restored after the test
    kernel_state.fresh(str(tmp_path))
    first = nodes.TreeNode().id
    for _ in range(5):
        nodes.TreeNode()
    kernel_state.fresh(str(tmp_path))
    assert nodes.TreeNode().id == first, "node ids continue from the previous notebook"
    assert Path.cwd() == tmp_path


def test_a_failed_html_build_names_the_profile_and_the_warning(tmp_path):
    """The Sphinx server's child writes its log where the runner reads the failure from."""
    pytest.importorskip("jupyter_book")
    from glm_kv.book.runner import BookError, build_html

    src = tmp_path / "src"
    _book(src, {"01_a": "x = 1"})
    (src / "book" / "intro.md").write_text("# Tiny\n\nSee {ref}`no-such-label`.\n")
    with pytest.raises(BookError) as err:
        build_html(src, tmp_path / "out", strict=True, profile_label="tiny")
    msg = str(err.value)
    assert msg.startswith("profile tiny: HTML build failed") and "no-such-label" in msg


def test_refresh_executes_the_committed_notebooks_in_place_on_the_same_scheduler(tmp_path):
    from glm_kv.book.runner import SETUP_TAG, refresh_committed

    _book(tmp_path, {"01_a": "print(profile)", "02_b": "print(2 * 21)"})
    done = refresh_committed(tmp_path, progress=False)
    assert [p.name for p in done] == ["01_a.ipynb", "02_b.ipynb"]
    printed = []
    for p in done:
        nb = nbformat.read(p, as_version=4)
        printed.append("".join(o.get("text", "") for c in nb.cells for o in c.get("outputs", [])).strip())
        tags = [t for c in nb.cells for t in c.metadata.get("tags", [])]
        assert SETUP_TAG not in tags and "injected-parameters" not in tags
        assert [c.execution_count for c in nb.cells if c.cell_type == "code"] == [1, 2]
    assert printed == ["article", "42"]  # the notebook's own default: nothing injected
