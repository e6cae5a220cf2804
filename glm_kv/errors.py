"""One error type for every bad input, so the CLI can print one line and exit 2."""
from __future__ import annotations

import re

# Control characters (C0, DEL, C1), line and paragraph separators, bidi overrides and other
# invisible format characters: anything that could split the line or drive a terminal.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]")
FIELD_MAX = 60
RULE_MAX = 600


SGLANG_SAYS = '; SGLang 0.5.23 says: "'


def sglang_says(words: str) -> str:
    """The one way a refusal quotes SGLang 0.5.23's own message after glm-kv's (a suffix of the rule)."""
    return f'{SGLANG_SAYS}{words}"'


def own_words(text: str) -> str:
    """A refusal without the SGLang message it quotes (``sglang_says``): for a table cell, where the full quote
    would crowd the row; the CLI and the plan keep it whole."""
    return text.split(SGLANG_SAYS, 1)[0]


def _escape(ch: re.Match) -> str:
    c = ch.group(0)
    return {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(c, f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}")


def one_line(text: object, limit: int = RULE_MAX) -> str:
    """``text`` escaped onto one printable line (no control or escape codes), at most ``limit`` chars."""
    s = _UNSAFE.sub(_escape, str(text))
    if len(s) > limit:
        s = s[: max(limit - 20, 8)] + f"...[{len(s)} chars]"
    return s


def shown(value: object, limit: int = 60) -> str:
    """A user's value as a message shows it: repr'd, escaped, shortened (never the whole of a huge input)."""
    if isinstance(value, str):
        text = repr(value[: limit * 4]) if len(value) > limit * 4 else repr(value)
        total = len(value)
    elif isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 200:
        return f"<integer of about {int(value.bit_length() * 0.30103)} digits>"
    else:
        try:
            text = repr(value)
        except (ValueError, RecursionError):
            text = f"<{type(value).__name__}>"
        total = len(text)
    s = one_line(text, 10**9)
    if len(s) > limit:
        s = s[: max(limit - 16, 8)] + f"...[{total} chars]"
    return s


class ProfileError(ValueError):
    """Bad input: names the offending field and the rule it breaks.

    The CLI prints ``str(err)`` on one line and exits with status 2; nothing is
    written before validation finishes, so a failure leaves no half-written output.
    Field and rule are escaped and shortened here, once, so a hostile key or value
    (a newline, a terminal escape code, 20,000 characters) cannot break that line.
    """

    def __init__(self, field: str, rule: str):
        self.field = one_line(field, FIELD_MAX)
        self.rule = one_line(rule, RULE_MAX)
        super().__init__(f"{self.field}: {self.rule}")
