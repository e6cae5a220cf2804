"""Fixtures shared by the tensor tests and the SGLang radix differential (both build small pools)."""
from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def reduced_config(tmp_path_factory):
    """A smaller copy of the shipped config (same row widths, fewer layers and KDA heads)."""
    from glm_kv.tensors.memory_pool import write_reduced_model_config

    return write_reduced_model_config(tmp_path_factory.mktemp("model") / "config.json")


@pytest.fixture
def one_thread():
    """Small indexing ops are faster single-threaded on a 2-core CI box."""
    import torch

    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)
