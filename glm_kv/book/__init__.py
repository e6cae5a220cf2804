"""Layer 4, the book: the per-profile runner, the tables and charts the chapters show, the nine
pitfalls as checks, and the offline Sphinx extension (``glm_kv.book.charts``).

May import every layer below (inputs, ledgers, tensors); nothing below imports it.
"""
