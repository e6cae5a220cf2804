"""One word per limit and buffer (issue 21, item 3): the book's words, the words they replace.

``book/notation.md`` defines each word in a Sphinx glossary beside SGLang's name; chapters link
a word's first use with ``{term}``. ``retired_words`` finds prose that still says a replaced
word (``tests/book/test_vocabulary.py`` runs it over every chapter).
"""
from __future__ import annotations

import re

# the glossary's entries (book/notation.md) for the limits and the buffers
TERMS = ("token slots", "state slots", "slots per request", "requests asked for", "requests that fit",
         "binds", "bytes per token", "KV pool", "state pool", "rest", "compress tail", "host pools")

# other names the same things went by in earlier drafts -> the book's word
RETIRED = {"mamba slots": "state slots", "mamba pool": "state pool", "token pool": "KV pool"}

_CODE = re.compile(r"(\{[a-z:]+\}`[^`]*`|`[^`]*`|\[[^\]]*\]\([^)]*\))")


def prose(markdown: str) -> str:
    """The text of ``markdown`` a reader reads as words: code spans, roles and links removed."""
    return re.sub(r"\s+", " ", _CODE.sub(" ", markdown))


def retired_words(markdown: str) -> list[str]:
    """Each retired word the prose still uses, with the book's word for it."""
    text = prose(markdown).lower()
    return [f"{old!r} (say {new!r})" for old, new in RETIRED.items() if old in text]


def linked_terms(markdown: str) -> set[str]:
    """The glossary words ``markdown`` links with ``{term}`` (either ``{term}`x``` or ``{term}`y <x>```)."""
    out = set()
    for m in re.finditer(r"\{term\}`([^`<]*?)(?:\s*<([^>]+)>)?`", markdown):
        out.add((m.group(2) or m.group(1)).strip())
    return out
