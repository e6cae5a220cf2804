"""One error type for every bad input, so the CLI can print one line and exit 2."""
from __future__ import annotations


class ProfileError(ValueError):
    """Bad input: names the offending field and the rule it breaks.

    The CLI prints ``str(err)`` on one line and exits with status 2; nothing is
    written before validation finishes, so a failure leaves no half-written output.
    """

    def __init__(self, field: str, rule: str):
        self.field = field
        self.rule = rule
        super().__init__(f"{field}: {rule}")
