"""Keep an unused optional import out of the book's processes: ``rfc3987_syntax``.

``import jsonschema`` (pulled in by altair, nbformat and papermill) registers its optional format
checkers by importing whatever is installed; with ``jsonschema[format-nongpl]`` (a dependency of
jupyter-events, so it is in every Jupyter environment) that includes ``rfc3987_syntax``, which
builds a Lark grammar at import: about 2.8 s of CPU on our 2-core machine, paid once by each of the
book's processes (the runner, every kernel, the Sphinx server), for checkers of the JSON-schema
formats ``iri`` and ``iri-reference`` only.

No schema the book validates uses those two formats (altair's Vega-Lite schema uses ``uri``,
``uri-reference`` and ``color-hex``; ``tests/book/test_import_guard.py`` reads every schema that
altair, nbformat, jupyter-book and papermill ship and fails if one starts using them), so skipping
the import changes no validation and no output. ``skip()`` marks the module as absent
(``sys.modules[name] = None`` makes ``import name`` raise ImportError, which jsonschema catches).
It must run before the first ``import jsonschema`` of the process; afterwards it does nothing.
"""
from __future__ import annotations

import sys

SKIPPED = ("rfc3987_syntax",)
# the JSON-schema formats jsonschema checks with the skipped module (jsonschema/_format.py)
FORMATS_LOST = ("iri", "iri-reference")


def skip() -> list[str]:
    """Mark the SKIPPED modules absent unless already imported; returns the names it marked."""
    marked = []
    for name in SKIPPED:
        if name not in sys.modules:
            sys.modules[name] = None  # type: ignore[assignment]
            marked.append(name)
    return marked
