"""The SGLang agreement suite runs only inside its own virtualenv (scripts/sglang-env.sh).

Elsewhere (the ordinary `pytest` run) every test here is skipped with a message saying
how to run it. Inside `.venv-sglang/`, or with GLM_KV_SGLANG=1, it runs, and a missing
or broken SGLang is an error, not a skip.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
VENV = HERE.parents[1] / ".venv-sglang"


def _enabled() -> bool:
    if os.environ.get("GLM_KV_SGLANG") == "1":
        return True
    try:
        return Path(sys.prefix).resolve() == VENV.resolve()
    except OSError:
        return False


ENABLED = _enabled()
SKIP_REASON = (
    "SGLang agreement suite: runs only in its own venv. Run "
    "`scripts/sglang-env.sh && .venv-sglang/bin/python -m pytest tests/sglang` "
    "(or set GLM_KV_SGLANG=1 in an environment with sglang==0.5.23 installed)."
)

if ENABLED:
    sys.path.insert(0, str(HERE))  # oracle, compare, profiles, cpu_workarounds


def pytest_sessionstart(session):
    """SGLang's model registry, loaded once per process before any test runs. ``import_model_classes`` imports every
    model module the first time an architecture is resolved and caches the result (``lru_cache``): a module that
    fails to import then (a test's CPU stand-ins for the GPU platform in force, say) is left out for the rest of the
    process, and its architecture resolves to the Transformers fallback class, as a real server never sees it. The
    fresh-clone run with seed 1232541259 met it: Gemma-4's window read as 1024 (the fallback's config value) instead
    of its model class's sliding_window - 1."""
    if not ENABLED:
        return
    from sglang.srt.models.registry import ModelRegistry

    ModelRegistry.get_supported_archs()


def pytest_collection_modifyitems(config, items):
    from tests.pytest_glm_kv import skip_folder_unless

    skip_folder_unless(ENABLED, SKIP_REASON, HERE, items)


@pytest.fixture(scope="session")
def sglang_ready():
    """Import SGLang once (about 8 s) and check it is the pinned release."""
    import sglang  # noqa: F401  - an ImportError here is a real failure inside the venv
    from importlib.metadata import version

    assert version("sglang") == "0.5.23", version("sglang")
    from cpu_workarounds import quiet_sglang_logs

    quiet_sglang_logs()
    from sglang.srt.models.registry import ModelRegistry

    ModelRegistry.get_supported_archs()   # loaded (once) before the test that asks: see pytest_sessionstart
    return True
