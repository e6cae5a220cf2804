"""The radix package's named errors (library code raises these, never ``assert``)."""
from __future__ import annotations


class RadixTreeError(RuntimeError):
    """The tree's bookkeeping is broken: an unbalanced unlock, a slot owned twice or leaked, a
    node in a state SGLang's tree never reaches. Always a bug in the caller or in the tree."""


class ContentMismatch(RadixTreeError):
    """Bytes read back from a pool differ from what ``SyntheticContent`` wrote there."""
