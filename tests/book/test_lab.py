"""JupyterLab as the working surface: the registered ``glm-kv`` kernel runs a chapter for another profile,
``jupyter lab`` is in the environment ``make setup`` builds, and the committed notebooks are clean
(one kernel name, no machine metadata, execution counts renumbered 1..n)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from glm_kv.book.hygiene import KERNEL_NAME, problems
from glm_kv.book.runner import toc_notebooks

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def test_jupyter_lab_runs_in_the_project_environment():
    out = subprocess.run([str(BIN / "jupyter"), "lab", "--version"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().split(".")[0] == "4", out.stdout


def test_the_glm_kv_kernel_is_registered_with_this_python():
    from jupyter_client.kernelspec import KernelSpecManager

    spec = KernelSpecManager().get_kernel_spec(KERNEL_NAME)  # raises NoSuchKernel when `make setup` did not run
    assert Path(spec.argv[0]).resolve() == Path(sys.executable).resolve(), spec.argv


@pytest.mark.parametrize("profile", ["article"])
def test_a_chapter_reruns_for_another_profile_in_the_named_kernel(profile, tmp_path):
    """What a reader does in JupyterLab: edit the parameters cell, Run All, in the glm-kv kernel."""
    from nbclient import NotebookClient

    nb = nbformat.read(ROOT / "notebooks" / "01_token.ipynb", as_version=4)
    params = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    from glm_kv.book.default_profile import BOOK_DEFAULT_PROFILE

    assert f'profile = "{BOOK_DEFAULT_PROFILE}"' in params.source
    params.source = params.source.replace(f'profile = "{BOOK_DEFAULT_PROFILE}"', f'profile = "{profile}"')
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
    # run where a reader's JupyterLab would: the notebooks folder, no sys.path tricks
    NotebookClient(nb, kernel_name=KERNEL_NAME, timeout=300,
                   resources={"metadata": {"path": str(ROOT / "notebooks")}}).execute()
    checked = [c for c in nb.cells if c.cell_type == "code" and "NBVAL_CHECK_OUTPUT" in c.source]
    text = "".join(o.get("data", {}).get("text/plain", "") for c in checked for o in c.outputs)
    assert f"'{profile}'" in text, text[:500]


def test_committed_notebooks_are_clean_to_diff():
    dirty = {}
    for rel in toc_notebooks(ROOT):
        found = problems(nbformat.read(ROOT / rel, as_version=4))
        if found:
            dirty[str(rel)] = found[:3]
    assert not dirty, f"run `glm-kv book --refresh` (it normalises): {dirty}"


def test_the_check_sees_a_dirty_notebook():
    nb = nbformat.read(ROOT / "notebooks" / "01_token.ipynb", as_version=4)
    nb.metadata["language_info"] = {"name": "python", "version": "3.11.7"}
    code = [c for c in nb.cells if c.cell_type == "code"]
    code[0].execution_count = 7  # a count from someone's long-running JupyterLab session
    assert len(problems(nb)) >= 2


def test_a_stream_split_by_the_kernel_is_stored_as_one_output():
    """The kernel may send one print's text and its newline as two stdout messages (test_book_parallel saw
    06b_choosing_flags stored both ways by --jobs 1 and --jobs 2): ``normalise`` joins consecutive outputs of
    one stream, so every run stores the same bytes, and ``problems`` names a split left in a committed notebook."""
    from glm_kv.book.hygiene import normalise

    nb = nbformat.v4.new_notebook()
    split = [nbformat.v4.new_output("stream", name="stdout", text="a b c"),
             nbformat.v4.new_output("stream", name="stdout", text="\n"),
             nbformat.v4.new_output("stream", name="stderr", text="warn\n"),
             nbformat.v4.new_output("stream", name="stdout", text="d\n")]
    whole = [nbformat.v4.new_output("stream", name="stdout", text="a b c\n"), *split[2:]]
    nb.cells = [nbformat.v4.new_code_cell("print('a b c')", outputs=split)]
    assert any("stream split" in p for p in problems(nb))
    normalise(nb)
    assert [(o.name, o.text) for o in nb.cells[0].outputs] == [(o.name, o.text) for o in whole]
    assert problems(nb) == []
