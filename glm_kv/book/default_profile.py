"""The profile the committed book is executed for: the 0.5.23 release on 8 x H200 (issue 21).

A new reader runs SGLang 0.5.23, so ``make book`` (Makefile ``PROFILE``), ``_config.yml``, the
README and every notebook's ``parameters`` cell name this profile; ``tests/book/test_book.py``
checks that they agree. The article's example stays a shipped profile (``article``) and a
comparison in chapter 8. ``glm_kv.inputs.profile.DEFAULT_PROFILE`` (the CLI's default when no
``--profile`` is given) belongs to the inputs layer and is not changed here.
"""
BOOK_DEFAULT_PROFILE = "h200-0.5.23"
