"""The profile the committed book is executed for: the 0.5.23 release on 8 x H200 (issue 21).

A new reader runs SGLang 0.5.23, so ``make book`` (Makefile ``PROFILE``), ``_config.yml``, the
README and every notebook's ``parameters`` cell name this profile; ``tests/book/test_book.py``
checks that they agree. The article's example stays a shipped profile (``article``) and a
comparison in chapter 8. ``glm-kv`` without ``--profile`` plans this profile too (``glm_kv.cli``
imports it as its ``DEFAULT_PROFILE``), so the CLI and the book's first page give one answer.
``glm_kv.inputs.profile.DEFAULT_PROFILE`` (``load_profile(None)``, the order of
``shipped_profiles``) belongs to the inputs layer and still names the article's example.
"""
BOOK_DEFAULT_PROFILE = "h200-0.5.23"
