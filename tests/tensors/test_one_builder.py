"""Issue 31: one pool geometry and one builder for every model, GLM-5.3-Flash included.

GLM-5.3-Flash's device pools (MLA rows, the DSA indexer with kpool paging and the compress tail, the KDA
state with the verify scratch, req_to_token's extra columns) come from ``model_pools.model_geometry`` reading
its config.json like any other model's, and every tensor is allocated by ``ModelDevicePools``;
``DevicePools`` (SGLang's object tree the RadixTree and HiCache use) only names those tensors. The shapes
themselves are held against SGLang 0.5.23's classes in ``test_pools.py`` (opt-in) and against the ledgers by
``measure``; here: that the GLM path is the one builder, and that an error planted in it is caught by
``measure`` (which compares each buffer with the plan's ledgers, never with a copy of the builder).
"""
from __future__ import annotations

import dataclasses

import pytest

torch = pytest.importorskip("torch")

from glm_kv.inputs.profile import load_profile, make_profile  # noqa: E402
from glm_kv.inputs.resolve import resolve  # noqa: E402
from glm_kv.ledgers.plan import load_plan  # noqa: E402
from glm_kv.tensors import measure as M  # noqa: E402
from glm_kv.tensors import model_pools as MP  # noqa: E402
from glm_kv.tensors.memory_pool import DevicePools, PoolGeometry, pool_geometry  # noqa: E402


def _named(pools) -> dict:
    return {n: (tuple(t.shape), t.dtype, t.untyped_storage().data_ptr()) for n, t in pools.named_buffers()}


@pytest.mark.parametrize("profile", ["article", "h200-0.5.23", "mtp"])
def test_glm_pools_are_the_one_builders_tensors(profile):
    """The old names resolve to the one geometry and builder; the object tree holds exactly the storages
    ``ModelDevicePools`` allocated, under the same SGLang paths (compress tail and verify scratch included)."""
    g = pool_geometry(resolve(load_profile(profile)), size=512, mamba_size=2, max_running_requests_per_worker=3)
    assert PoolGeometry is MP.ModelGeometry and type(g) is MP.ModelGeometry and g.family == "mla_dsa+kda"
    assert issubclass(DevicePools, MP.ModelDevicePools)
    pools = DevicePools(g, device="cpu", fill="empty")
    tree, flat = _named(pools), dict(pools._buffers)
    flat["req_to_token_pool.req_to_token"] = pools.req_to_token_pool.req_to_token
    assert set(tree) == set(flat) == {n for n, _, _ in g.shape_table()}
    assert all(tree[n][2] == flat[n].untyped_storage().data_ptr() for n in tree)   # the same storages
    assert any("_compress_tail_k" in n for n in tree)
    assert ("mamba_pool.intermediate_ssm" in tree) == (profile == "mtp")
    # measure builds the same geometry through the same builder
    plan = load_plan(profile)
    mg = M._base_geometry(plan, 3).with_sizes(size=512, mamba_size=2)
    assert type(MP.build_device_pools(mg, device="cpu", fill="empty")) is MP.ModelDevicePools
    assert mg.shape_table() == g.with_sizes(spec_state_size=mg.spec_state_size).shape_table()


def test_the_tree_is_refused_by_name_where_sglang_builds_another_pool():
    """DevicePools' HybridLinearKVPool over a DSATokenToKVPool: refused by name for an MHA model."""
    plan = load_plan(make_profile({"model": "qwen3.5-35b-a3b", "gpu": "H200", "tp_size": 4, "context_length": 256,
                                   "max_running_requests": 3, "pre_model_load_bytes": 147_412_123_456,
                                   "weights_bytes": 40 << 30}))
    g = MP.model_geometry(plan, max_running_requests_per_worker=3)
    with pytest.raises(MP.NotBuilt, match="DevicePools"):
        DevicePools(g, device="cpu", fill="empty")


def _plant(monkeypatch, **change):
    real = MP.model_geometry

    def wrong(*a, **k):
        g = real(*a, **k)
        return dataclasses.replace(g, **{f: fn(g) for f, fn in change.items()})

    monkeypatch.setattr(MP, "model_geometry", wrong)


@pytest.mark.parametrize("field, fn, buffer", [
    ("index_row_bytes", lambda g: g.page_size * g.index_bytes_per_token_unpooled, "index_key_cache"),  # kpool ignored
    ("tail_width", lambda g: g.tail_width - 1, "_compress_tail_k"),                          # draft tokens dropped
    ("temporal_state_shape", lambda g: (2 * g.temporal_state_shape[0], *g.temporal_state_shape[1:]),
     "mamba_pool.temporal"),                                                                 # KDA heads not split
])
def test_a_planted_glm_builder_error_is_caught_by_measure(monkeypatch, field, fn, buffer):
    """Planted in the one builder's GLM-5.3-Flash reading: measure names the buffer that no longer matches."""
    plan = load_plan("mtp" if field == "tail_width" else "h200-0.5.23")
    assert M.measure_profile(plan, device="cpu", full=False).ok
    _plant(monkeypatch, **{field: fn})
    report = M.measure_profile(plan, device="cpu", full=False)
    assert not report.ok and any(buffer in line for line in report.mismatches), report.mismatches


@pytest.mark.parametrize("profile, entries", [("article", ["kv", "mamba"]), ("h200-0.5.23", ["kv", "indexer", "mamba"])])
def test_glm_host_pools_are_the_one_host_builders_tensors(profile, entries):
    """The HostPoolGroup (per layout: the article's has no indexer entry) names exactly the host tensors
    ``host_shape_table`` gives every model, with their shapes."""
    from glm_kv.tensors.memory_pool_host import build_host_pool_group

    g = pool_geometry(resolve(load_profile(profile)), size=512, mamba_size=2, max_running_requests_per_worker=3)
    group = build_host_pool_group(DevicePools(g, device="cpu", fill="empty"), hicache_ratio=2.0, fill="empty",
                                  pin_memory=False)
    assert group.names == entries
    assert {n: tuple(t.shape) for n, t in group.named_buffers()} == {n: s for n, s, _ in MP.host_shape_table(g, 2.0)}


def test_a_planted_glm_host_row_error_is_caught_by_measure(monkeypatch):
    """Planted: the article's host KV row as wide as the device row (the fp8 scales backed up, which its
    build_kv_host_pool does not do) -> measure names the host KV buffer."""
    plan = load_plan("article", {"enable_hierarchical_cache": True})
    assert M.measure_profile(plan, device="cpu", full=False).ok
    _plant(monkeypatch, host_kv_row_width=lambda g: g.kv_cache_dim)
    report = M.measure_profile(plan, device="cpu", full=False)
    assert not report.ok and any("MLATokenToKVPoolHost" in line for line in report.mismatches), report.mismatches
