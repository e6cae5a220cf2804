"""Literal HTML computed by glm_kv, shown as is in the book (a definition list, a figure, links).

Its own module because both ``tables`` and ``sources`` return it and ``tables`` imports ``sources``.
"""
from __future__ import annotations


class Html:
    """Literal HTML computed by glm_kv (a definition list, a figure): shown as is in the book.

    ``text`` is what a plain-text front end (a console, nbval's text output) shows instead.
    """

    def __init__(self, html: str, text: str = ""):
        self.html, self.text = html, text

    def _repr_html_(self) -> str:
        return self.html

    def __repr__(self) -> str:
        return self.text or "<html>"
