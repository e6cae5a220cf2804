"""The book's one byte format: exact bytes, then binary units (issue 21, item 8).

SGLang sizes its pools in GiB and prints its device lines in GB-that-are-GiB, so the book rounds
memory in binary units only (stated once, in ``book/intro`` and ``book/notation``): GiB from one
GiB up, MiB below it, and bytes alone under one MiB. The exact count always comes first, with
thousands separators. ``glm_kv.units.fmt_bytes`` (the CLI's, with the article's decimal units)
does the formatting; this only fixes the unit.
"""
from __future__ import annotations

from ..units import GiB, MiB
from ..units import fmt_bytes as _fmt


def fmt_bytes(n: int | float | None, unit: str | None = None) -> str:
    """``738,099,200 B (≈703.906 MiB)``; ``44,097,025,280 B (≈41.07 GiB)``; ``225,280 B``.

    ``unit``: "GiB" or "MiB" forces that unit (a figure compared with a SGLang log line).
    """
    if n is None:
        return "-"
    if unit in ("GiB", "MiB"):
        return _fmt(n, unit)
    if abs(n) >= GiB:
        return _fmt(n, "GiB")
    if abs(n) >= MiB:
        return _fmt(n, "MiB")
    return f"{int(n):,} B"
