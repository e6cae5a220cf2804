"""Measurement: allocated bytes equal the ledger for every buffer, and a wrong ledger is caught."""
from __future__ import annotations

import dataclasses
import json

import pytest

torch = pytest.importorskip("torch")

from glm_kv.tensors import budget as B  # noqa: E402
from glm_kv.tensors import measure as M  # noqa: E402
from glm_kv.cli import main as cli_main  # noqa: E402
from glm_kv.ledgers.plan import load_plan  # noqa: E402
from glm_kv.inputs.profile import shipped_profiles  # noqa: E402

requires_cuda = pytest.mark.skipif(not torch.cuda.is_available(),
                                   reason="no CUDA device here: the allocator-delta path is not exercised")


@pytest.fixture(scope="module")
def article_plan():
    return load_plan("article")


@pytest.mark.parametrize("profile", shipped_profiles())
def test_every_shipped_profile_measures_equal_to_its_ledger_on_cpu(profile):
    report = M.measure_profile(load_plan(profile), device="cpu")
    assert report.ok, [r for a in report.allocations for r in a.rows if r.match is False]
    assert report.mode == "reduced" and len(report.allocations) == 2
    rows = report.allocations[-1].rows
    assert all(r.ledger_bytes is not None and r.match for r in rows)
    # linear growth between the two sizes, with the ledger's per-unit figure as the slope
    token = next(c for c in report.linear if c["group"] == "token")
    plan = load_plan(profile)
    draft = plan.token.draft_bytes_per_token
    assert token["exact"] and token["measured_per_unit"] == plan.token.cell_size_bytes - draft
    mamba = next(c for c in report.linear if c["group"] == "mamba")
    assert mamba["measured_per_unit"] == plan.request.state_slot_bytes
    # the full profile is reported as extrapolated, and labelled so
    assert {r["group"] for r in report.full_profile} >= {"token", "mamba"}
    assert all(r["label"].startswith("extrapolated") for r in report.full_profile)


def test_full_profile_figures_against_the_plan_capacity():
    plan = load_plan("h200-0.5.23")
    report = M.measure_profile(plan, device="cpu")
    by = {r["group"]: r for r in report.full_profile}
    cap = plan.capacity
    assert by["mamba"]["bytes"] == cap.mamba_pool_bytes  # (K + 1) x slot exactly
    # SGLang allocates a padding page (page_size rows of KV + one index page per layer) its
    # token budget does not count: 256 x 1,024 x 11 + 11 x 8,448
    assert by["token"]["difference"] == 256 * 1024 * 11 + 11 * 8448


def test_mtp_verify_scratch_matches_the_capacity_ledger():
    plan = load_plan("mtp")
    report = M.measure_profile(plan, device="cpu")
    assert report.ok
    spec = next(r for r in report.full_profile if r["group"] == "spec")
    assert spec["bytes"] == plan.capacity.spec_scratch_bytes
    assert report.not_allocated and "draft" in report.not_allocated[0]["what"]


@pytest.mark.parametrize("profile", ["article", "h200-0.5.23"])
def test_host_pools_measure_equal_to_the_host_ledger(profile):
    plan = load_plan(profile, {"enable_hierarchical_cache": True})
    report = M.measure_profile(plan, device="cpu")
    assert report.ok
    host_rows = [r for r in report.allocations[-1].rows if r.where == "host"]
    assert {r.name.split("[")[0] for r in host_rows} == (
        {"MLATokenToKVPoolHost", "MambaPoolHost"} if profile == "article"
        else {"MLATokenToKVPoolHost", "DSAIndexerPoolHost", "MambaPoolHost"})
    assert all(r.match for r in host_rows)
    assert any("compress tail" in x["what"] for x in report.not_on_host)


def _corrupt(plan, section: str, field: str, change):
    """A copy of the typed plan with one ledger figure changed (what a wrong formula would give)."""
    part = getattr(plan, section)
    return dataclasses.replace(plan, **{section: dataclasses.replace(part, **{field: change(getattr(part, field))})})


@pytest.mark.parametrize("field,path,delta", [
    ("kv_bytes_per_token", ("token", "kv_bytes_per_token"), 11),
    ("indexer_page_bytes", ("token", "indexer_page_bytes"), 64),
    ("cell_size_bytes", ("token", "cell_size_bytes"), 1),
    ("conv_state_bytes", ("request", "conv_state_bytes"), 2),
    ("temporal_state_bytes", ("request", "temporal_state_bytes"), 4),
    ("state_slot_bytes", ("request", "state_slot_bytes"), 34),
    ("tail.bytes", ("tail", "bytes"), 22 * 256),
])
def test_a_wrong_ledger_makes_measure_fail(article_plan, field, path, delta):
    bad = _corrupt(article_plan, *path, lambda v: v + delta)
    report = M.measure_profile(bad, device="cpu")
    assert not report.ok, f"a wrong {field} went unnoticed"


def test_a_wrong_host_ledger_makes_measure_fail():
    plan = load_plan("h200-0.5.23", {"enable_hierarchical_cache": True})
    bad = _corrupt(plan, "host", "indexer_bytes_per_token", lambda v: 1452)  # the article's unpooled figure
    assert M.measure_profile(plan, device="cpu").ok and not M.measure_profile(bad, device="cpu").ok


def test_storage_is_counted_once_per_storage():
    base = torch.zeros(1000, dtype=torch.uint8)
    views = [base, base[:10], base.view(torch.int32), base[500:]]
    assert B.storage_bytes(views) == 1000
    assert B.storage_bytes([base, torch.zeros(24, dtype=torch.uint8)]) == 1024


def test_allocation_beyond_the_budget_is_refused_before_it_starts(article_plan, monkeypatch):
    import glm_kv.tensors.memory_pool as pools

    def boom(*a, **k):
        raise AssertionError("allocated although refused")

    monkeypatch.setattr(pools, "DevicePools", boom)
    with pytest.raises(B.AllocationRefused) as e:
        M.measure_profile(article_plan, device="cpu", budget=10_000_000)
    msg = str(e.value)
    assert "\n" not in msg and "asked" in msg and "budget" in msg and "free" in msg


def test_allocation_beyond_free_memory_is_refused():
    free = B.free_memory_bytes("cpu")
    with pytest.raises(B.AllocationRefused) as e:
        B.check_budget(free * 2, "cpu", budget=free * 4)
    assert "asked" in str(e.value) and "free" in str(e.value) and "\n" not in str(e.value)


def test_full_profile_on_cpu_is_refused_with_one_line(capsys):
    rc = cli_main(["measure", "--profile", "article", "--full"])
    err = capsys.readouterr().err.strip()
    assert rc == 3 and len(err.splitlines()) == 1 and "asked" in err and "free" in err


def test_cli_json_lists_every_buffer(capsys):
    assert cli_main(["measure", "--profile", "article", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["ok"] is True
    rows = d["allocations"][-1]["rows"]
    assert len(rows) == 1 + 11 * 4 + 2
    assert {"name", "shape", "dtype", "measured_bytes", "ledger_bytes", "match"} <= set(rows[0])
    kv = next(r for r in rows if r["name"] == "full_kv_pool.kv_buffer[0]")
    assert kv["shape"] == [256 + 64, 1, 528] and kv["dtype"] == "uint8"


def test_cli_exits_non_zero_on_a_mismatch(capsys, monkeypatch):
    import glm_kv.ledgers.plan as plan_mod

    real = plan_mod.compute_plan

    def wrong(profile):
        return _corrupt(real(profile), "token", "kv_bytes_per_token", lambda v: v + 11)

    monkeypatch.setattr(plan_mod, "compute_plan", wrong)
    assert cli_main(["measure", "--profile", "article"]) == 1
    assert "MISMATCH" in capsys.readouterr().out


def test_cuda_path_is_visibly_skipped_without_a_gpu():
    report = M.measure_profile(load_plan("tp8"), device="cpu")
    assert report.allocations[0].cuda_allocated_delta is None
    if not torch.cuda.is_available():
        assert "skipped" in report.cuda


@requires_cuda
def test_cuda_allocator_delta_equals_the_storages():
    report = M.measure_profile(load_plan("article"), device="cuda", full=False)
    assert report.ok
    for a in report.allocations:
        assert a.cuda_allocated_delta == a.cuda_expected_delta
        assert any(c["check"].startswith("torch.cuda.memory_allocated") and c["match"] for c in a.checks)


@requires_cuda
def test_cuda_full_profile_when_it_fits():
    report = M.measure_profile(load_plan("h200-0.5.23"), device="cuda")
    assert report.ok
    assert report.mode == "full" or any(n.startswith("full profile not allocated") for n in report.notes)


def test_full_profile_is_allocated_when_it_fits(tmp_path):
    """A reduced-model profile whose full pools fit the budget: allocated whole, not extrapolated."""
    from glm_kv.tensors.memory_pool import write_reduced_model_config

    model = write_reduced_model_config(tmp_path / "config.json")
    plan = load_plan("article", {"model": model, "available_bytes": 200_000_000, "context_length": 4096})
    report = M.measure_profile(plan, device="cpu", full=True)
    assert report.ok and report.mode == "full" and len(report.allocations) == 1
    by = {r["group"]: r for r in report.full_profile}
    assert by["token"]["label"].startswith("allocated")
    assert by["mamba"]["difference"] == 0
    assert by["token"]["difference"] == 64 * 1056 + 2 * 8448  # the padding page
