"""``python -m glm_kv``: the same as the ``glm-kv`` command."""
import sys

from .cli import main

sys.exit(main())
