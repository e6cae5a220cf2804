"""Committed notebooks stay clean to diff: one kernel name, no per-machine metadata, and execution
counts that are a function of the notebook alone.

A notebook executed anywhere (JupyterLab, papermill, the book runner) is normalised before it is
stored, so ``git diff`` shows only what its outputs say. Execution counts are renumbered 1..n in
cell order, as a fresh kernel running top to bottom would number them: they cannot be dropped,
because nbval refuses a stored output in a cell without a count ("Unrun reference cell has
outputs"), and renumbered they never churn. ``problems`` is the CI check.
"""
from __future__ import annotations

from typing import Any

KERNEL_NAME = "glm-kv"
KERNELSPEC = {"display_name": "glm-kv (Python 3, .venv)", "language": "python", "name": KERNEL_NAME}
LANGUAGE_INFO = {"name": "python"}
CELL_METADATA_DROPPED = ("execution", "papermill", "collapsed", "scrolled", "ExecuteTime")
NOTEBOOK_METADATA_DROPPED = ("papermill", "widgets", "toc", "varInspector")


def normalise(nb: Any) -> Any:
    """The same notebook with its kernel named ``glm-kv`` and nothing that differs between machines."""
    for key in NOTEBOOK_METADATA_DROPPED:
        nb.metadata.pop(key, None)
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    nb.metadata["language_info"] = dict(LANGUAGE_INFO)
    count = 0
    for cell in nb.cells:
        for key in CELL_METADATA_DROPPED:
            cell.metadata.pop(key, None)
        if cell.cell_type == "code":
            count += 1
            cell.execution_count = count
            for out in cell.get("outputs", []):
                if out.get("output_type") == "execute_result":
                    out["execution_count"] = count
    return nb


def problems(nb: Any) -> list[str]:
    """What ``normalise`` would change, one line each (empty: the notebook is clean)."""
    out = []
    if nb.metadata.get("kernelspec", {}).get("name") != KERNEL_NAME:
        out.append(f"kernelspec is {nb.metadata.get('kernelspec', {}).get('name')!r}, not {KERNEL_NAME!r}")
    if nb.metadata.get("language_info") != LANGUAGE_INFO:
        out.append(f"language_info carries machine details: {nb.metadata.get('language_info')}")
    out += [f"notebook metadata {k!r}" for k in NOTEBOOK_METADATA_DROPPED if k in nb.metadata]
    count = 0
    for i, cell in enumerate(nb.cells):
        out += [f"cell {i}: metadata {k!r}" for k in CELL_METADATA_DROPPED if k in cell.metadata]
        if cell.cell_type == "code":
            count += 1
            if cell.get("execution_count") != count:
                out.append(f"cell {i}: execution_count {cell.get('execution_count')}, not {count}")
            out += [f"cell {i}: output execution_count" for o in cell.get("outputs", [])
                    if o.get("output_type") == "execute_result" and o.get("execution_count") != count]
    return out


def ensure_kernel() -> str:
    """Register this Python as the ``glm-kv`` kernel (inside its environment) unless it already is.

    ``make setup`` does this; the runner calls it too, so ``pip install`` users get the same kernel.
    """
    import sys
    from pathlib import Path

    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        spec = KernelSpecManager().get_kernel_spec(KERNEL_NAME)
        if Path(spec.argv[0]).resolve() == Path(sys.executable).resolve():
            return KERNEL_NAME
    except NoSuchKernel:
        pass
    from ipykernel.kernelspec import install

    install(prefix=sys.prefix, kernel_name=KERNEL_NAME, display_name=KERNELSPEC["display_name"])
    return KERNEL_NAME
