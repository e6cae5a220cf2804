"""Committed notebooks stay clean to diff: one kernel name, no execution counts, no per-machine metadata.

A notebook executed anywhere (JupyterLab, papermill, the book runner) is normalised before it is
stored, so ``git diff`` shows only what its outputs say. ``problems`` is the CI check.
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
    for cell in nb.cells:
        for key in CELL_METADATA_DROPPED:
            cell.metadata.pop(key, None)
        if cell.cell_type == "code":
            cell.execution_count = None
            for out in cell.get("outputs", []):
                if out.get("output_type") == "execute_result":
                    out["execution_count"] = None
    return nb


def problems(nb: Any) -> list[str]:
    """What ``normalise`` would change, one line each (empty: the notebook is clean)."""
    out = []
    if nb.metadata.get("kernelspec", {}).get("name") != KERNEL_NAME:
        out.append(f"kernelspec is {nb.metadata.get('kernelspec', {}).get('name')!r}, not {KERNEL_NAME!r}")
    if nb.metadata.get("language_info") != LANGUAGE_INFO:
        out.append(f"language_info carries machine details: {nb.metadata.get('language_info')}")
    out += [f"notebook metadata {k!r}" for k in NOTEBOOK_METADATA_DROPPED if k in nb.metadata]
    for i, cell in enumerate(nb.cells):
        out += [f"cell {i}: metadata {k!r}" for k in CELL_METADATA_DROPPED if k in cell.metadata]
        if cell.cell_type == "code":
            if cell.get("execution_count") is not None:
                out.append(f"cell {i}: execution_count {cell.execution_count}")
            out += [f"cell {i}: output execution_count" for o in cell.get("outputs", [])
                    if o.get("output_type") == "execute_result" and o.get("execution_count") is not None]
    return out
