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
            cell.outputs = coalesce_streams(cell.get("outputs", []))
            for out in cell.get("outputs", []):
                if out.get("output_type") == "execute_result":
                    out["execution_count"] = count
    return nb


def coalesce_streams(outputs: list) -> list:
    """Consecutive stream outputs of one stream as one output. The kernel sends a cell's stdout in as many
    messages as its flushes happened to make (``print`` writes its text and its newline apart), so the same
    cell run twice, or beside another kernel, is stored as one output or as two: joined, it is the same."""
    merged: list = []
    for out in outputs:
        prev = merged[-1] if merged else None
        if (prev is not None and out.get("output_type") == "stream" and prev.get("output_type") == "stream"
                and out.get("name") == prev.get("name")):
            prev["text"] = _text(prev["text"]) + _text(out["text"])
            continue
        merged.append(out)
    return merged


def _text(t: Any) -> str:
    return "".join(t) if isinstance(t, list) else t


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
            if len(coalesce_streams([dict(o) for o in cell.get("outputs", [])])) != len(cell.get("outputs", [])):
                out.append(f"cell {i}: one stream split over consecutive outputs")
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


# ------------------------------------------------------------------------------------------------
# Scaffolding out of sight: reader pages show answers, tables and figures, never the checks
# ------------------------------------------------------------------------------------------------

HIDDEN_TAGS = ("remove-cell", "remove-input")   # the source does not reach the page
GONE_TAGS = ("remove-cell", "remove-output")    # the output does not reach the page
_BARE_ASSERT = __import__("re").compile(r"^\s*assert\b", __import__("re").M)
_RAW_DICT = __import__("re").compile(r"^\s*[\[{]['\"(\w]")


def _tags(cell: Any) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def _plain_only(out: Any) -> str | None:
    """An output's text when it is shown as bare text (a repr), else None."""
    if out.get("output_type") == "stream":
        return "".join(out.get("text", ""))
    data = out.get("data", {})
    if out.get("output_type") in ("execute_result", "display_data") and set(data) <= {"text/plain"}:
        return "".join(data.get("text/plain", ""))
    return None


def visible_scaffolding(nb: Any) -> list[str]:
    """Cells a reader would see that are checks, not answers, one line each (empty: clean).

    Flagged: visible source holding an nbval marker (``# NBVAL_...``) or a bare ``assert``, and a
    visible output that is a raw ``dict``/``list`` repr. nbval still executes and compares every
    cell; the tags (``remove-cell``, ``remove-input``) only keep them off the HTML page.
    """
    out = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        tags = _tags(cell)
        if not any(t in tags for t in HIDDEN_TAGS):
            if "NBVAL" in cell.source:
                out.append(f"cell {i}: visible nbval marker")
            if _BARE_ASSERT.search(cell.source):
                out.append(f"cell {i}: visible bare assert")
        if not any(t in tags for t in GONE_TAGS):
            for o in cell.get("outputs", []):
                text = _plain_only(o)
                if text is not None and _RAW_DICT.match(text):
                    out.append(f"cell {i}: visible raw dict/list output {text[:40]!r}")
    return out


def hide_scaffolding(nb: Any) -> Any:
    """Tag every check cell ``remove-cell`` and fold every other code cell's source (``hide-input``).

    A cell with an nbval marker, a bare ``assert`` or a raw dict output is a check: it leaves the
    page entirely. Any other untagged code cell keeps its output (a table, a figure) and shows its
    code only on a click. The parameters cell stays as it is: it names the profile.
    """
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        tags = _tags(cell)
        if "parameters" in tags or "injected-parameters" in tags:
            continue
        single = type(nb)(cells=[cell], metadata={}) if hasattr(nb, "cells") else None
        is_check = bool(visible_scaffolding(single)) if single is not None else False
        if is_check and "remove-cell" not in tags:
            tags = [t for t in tags if t not in ("hide-input", "remove-input")] + ["remove-cell"]
        elif not any(t in tags for t in (*HIDDEN_TAGS, "hide-input", "hide-cell")):
            tags = [*tags, "hide-input"]
        if tags:
            cell.metadata["tags"] = tags
    return nb
