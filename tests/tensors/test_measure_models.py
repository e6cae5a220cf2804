"""Issue 31: ``measure`` is one engine for every model, not only GLM-5.3-Flash.

``measure_profile`` builds each model's pools through ``tensors.model_pools`` (shapes from config.json
and the resolved arguments, SGLang 0.5.23's object paths) and holds every buffer against the ledgers:
per buffer rows, the two reduced sizes' slopes, the full profile (allocated, or extrapolated), the
CUDA caching allocator's predicted blocks. Each model gets a planted error in the ledger spec of its
own layer kind (Gated DeltaNet, Mamba-2, KDA + MLA, DSA indexer, SWA) and ``measure`` must name the
buffer it breaks. Allocations are small (8 requests, 2,048-token context): the CPU is shared.

Against SGLang's own classes, buffer by buffer: tests/sglang/test_model_pool_buffers.py (opt-in).
"""
from __future__ import annotations

import dataclasses
import json
import math

import pytest

torch = pytest.importorskip("torch")

from glm_kv.cli import main as cli_main  # noqa: E402
from glm_kv.errors import ProfileError  # noqa: E402
from glm_kv.inputs.profile import make_profile  # noqa: E402
from glm_kv.ledgers import layers as L  # noqa: E402
from glm_kv.ledgers.plan import load_plan  # noqa: E402
from glm_kv.tensors import measure as M  # noqa: E402
from glm_kv.tensors import model_pools as MP  # noqa: E402

SMALL = {"gpu": "H200", "max_running_requests": 8, "context_length": 2048, "available_bytes": 60 << 30}
MODELS = {   # name -> (tp, the buffers its layer kinds put in the pools)
    "qwen3.5-35b-a3b": (4, ("full_kv_pool.k_buffer[", "mamba_pool.conv[0]", "mamba_pool.temporal")),
    "nemotron-3-super-120b-a12b-fp8": (4, ("full_kv_pool.k_buffer[", "mamba_pool.conv[0]", "mamba_pool.temporal")),
    "kimi-k3": (8, ("full_kv_pool.kv_buffer[", "mamba_pool.conv[0]", "mamba_pool.temporal")),
    "deepseek-v3.2": (8, ("full_kv_pool.kv_buffer[", "full_kv_pool.index_key_cache.buffer[")),
    "gpt-oss-120b": (2, ("full_kv_pool.k_buffer[", "swa_kv_pool.k_buffer[")),
    "jet-nemotron-2b": (1, ("full_kv_pool.k_buffer[", "mamba_pool.conv[0]", "mamba_pool.temporal")),
    # issue 32: more hybrid-SWA models (their own SWA heads / dims; K 192 / V 128; chunked attention)
    "gemma-4-26b-a4b": (2, ("full_kv_pool.k_buffer[", "swa_kv_pool.k_buffer[")),
    "mimo-v2-flash": (4, ("full_kv_pool.v_buffer[", "swa_kv_pool.v_buffer[")),
    "llama-4-scout-17b-16e-instruct": (4, ("full_kv_pool.k_buffer[", "swa_kv_pool.k_buffer[")),
}


def plan_of(name: str, **extra):
    return load_plan(make_profile({"model": name, "tp_size": MODELS.get(name, (8,))[0], **SMALL, **extra}))


@pytest.mark.parametrize("name", sorted(MODELS))
def test_every_buffer_of_every_model_equals_its_ledger(name):
    plan = plan_of(name)
    report = M.measure_profile(plan, device="cpu")
    assert report.ok, report.mismatches
    assert report.mode == "reduced" and len(report.allocations) == 2
    rows = report.allocations[-1].rows
    for prefix in MODELS[name][1]:
        hits = [r for r in rows if r.name.startswith(prefix)]
        assert hits and all(r.match is True and r.ledger_bytes is not None for r in hits), (prefix, hits)
    # every row but req_to_token is counted by a ledger: nothing silently unchecked
    assert all(r.match is not None for r in rows if r.name != "req_to_token_pool.req_to_token")
    # the slopes equal the ledgers' per-unit figures, the full profile is extrapolated from them
    token = next(c for c in report.linear if c["group"] == "token")
    assert token["exact"] and token["match"]
    groups = {r["group"] for r in report.full_profile}
    assert "token" in groups and all(r["label"].startswith("extrapolated") for r in report.full_profile)
    assert ("mamba" in groups) == (plan.request.state_slot_bytes > 0)
    # the CUDA caching allocator's blocks are predicted for every device storage (on the CPU too)
    assert all(r.cuda_block_bytes is not None for r in rows if r.where == "device")


def test_mha_k_and_v_are_one_storage_per_layer_as_sglang_0523_allocates_them():
    """``MHATokenToKVPool._create_buffers_normal``: K and V of one shape are the halves of one
    (2, size + page, heads, dim) allocation; the V view holds no storage of its own."""
    report = M.measure_profile(plan_of("qwen3.5-35b-a3b"), device="cpu")
    rows = {r.name: r for r in report.allocations[-1].rows}
    k, v = rows["full_kv_pool.k_buffer[0]"], rows["full_kv_pool.v_buffer[0]"]
    assert v.shares_storage_with == "full_kv_pool.k_buffer[0]" and v.measured_bytes == 0
    assert k.shape == v.shape and k.measured_bytes == k.shape[0] * 1024   # one bf16 KV head of 256: K + V
    check = next(c for c in report.allocations[-1].checks if "k_buffer[0] + v_buffer[0]" in c["check"])
    assert check["match"] and check["ledger"] == 1024


def test_swa_pool_is_its_own_unit_and_full_profile_row():
    plan = plan_of("gpt-oss-120b")
    report = M.measure_profile(plan, device="cpu")
    swa = next(c for c in report.linear if c["group"] == "swa_token")
    assert swa["match"] and swa["measured_per_unit"] == plan.token.swa_kv_bytes_per_token
    row = next(r for r in report.full_profile if r["group"] == "swa_token")
    assert row["count"] == plan.capacity.swa_max_total_num_tokens


# --------------------------------------------------------------------------- planted errors, one per layer kind

def _heads_plus_one(spec):
    return max(1, spec.num_kv_heads // spec.attn_tp) + 1


PLANTED = {   # (model, class, attribute, wrong property, a buffer that must be named)
    "gdn-state-without-conv": ("qwen3.5-35b-a3b", L.GatedDeltaNetState, "conv_bytes",
                               property(lambda s: 0), "mamba_pool.conv[0]"),
    "mamba2-ssm-in-bf16": ("nemotron-3-super-120b-a12b-fp8", L.Mamba2State, "temporal_bytes",
                           property(lambda s: s.temporal_shape[0] * s.head_dim * s.state_size * 2),
                           "mamba_pool.temporal"),
    "kda-temporal-one-head-short": ("kimi-k3", L.KdaState, "temporal_shape",
                                    property(lambda s: (s.num_heads // s.attn_tp - 1, s.head_dim, s.head_dim)),
                                    "mamba_pool.temporal"),
    "mla-row-without-rope": ("kimi-k3", L.MlaKv, "bytes_per_token",
                             property(lambda s: s.kv_lora_rank * s.item_bytes), "full_kv_pool.kv_buffer[0]"),
    "dsa-indexer-without-scales": ("deepseek-v3.2", L.DsaIndexerK, "page_bytes",
                                   lambda s, page: page * s.index_head_dim, "full_kv_pool.index_key_cache.buffer[0]"),
    "gqa-one-head-too-many": ("gpt-oss-120b", L.GqaKv, "heads_per_rank", property(_heads_plus_one),
                              "full_kv_pool.k_buffer[0]"),
    "swa-one-head-too-many": ("gpt-oss-120b", L.SlidingWindowKv, "heads_per_rank", property(_heads_plus_one),
                              "swa_kv_pool.k_buffer[0]"),
}


@pytest.mark.parametrize("what", sorted(PLANTED))
def test_a_planted_ledger_spec_error_is_named_by_measure(what, monkeypatch):
    name, cls, attr, wrong, buffer = PLANTED[what]
    assert M.measure_profile(plan_of(name), device="cpu").ok
    monkeypatch.setattr(cls, attr, wrong)
    report = M.measure_profile(plan_of(name), device="cpu")
    assert not report.ok, f"planted {what} went unnoticed"
    assert any(m.startswith(f"MISMATCH {buffer} ") for m in report.mismatches), report.mismatches


def test_a_planted_tensor_side_error_is_caught(monkeypatch):
    """The other side: the builder forgets 0.5.23's K/V fusion (two storages) - still equal in total,
    but the ledger's per-buffer split (K's storage holds K and V) names the V buffer."""
    monkeypatch.setattr(MP.ModelGeometry, "fused", staticmethod(lambda k, v: False))
    report = M.measure_profile(plan_of("qwen3.5-35b-a3b"), device="cpu")
    assert any(m.startswith("MISMATCH full_kv_pool.k_buffer[0] ") for m in report.mismatches), report.mismatches


def test_a_wrong_plan_figure_is_caught_for_every_model():
    for name in MODELS:
        plan = plan_of(name)
        bad = dataclasses.replace(plan, token=dataclasses.replace(plan.token, kv_bytes_per_token=
                                                                  plan.token.kv_bytes_per_token + 2))
        assert not M.measure_profile(bad, device="cpu").ok, name


# --------------------------------------------------------------------------- full profile, flags refused by name

def test_full_profile_is_allocated_for_another_model_when_the_budget_allows():
    """``full=True`` on the CPU: the full profile of a small launch (1 GiB for the pools) is allocated,
    every buffer measured, and its token pool equals the plan's within SGLang's padding page."""
    plan = plan_of("gpt-oss-120b", available_bytes=1 << 28)
    report = M.measure_profile(plan, device="cpu", full=True, budget=6 << 28)
    assert report.ok and report.mode == "full", report.mismatches
    a = report.allocations[0]
    assert a.sizes["tokens"] == plan.capacity.max_total_num_tokens
    assert a.sizes["swa_tokens"] == plan.capacity.swa_max_total_num_tokens
    assert all(r["label"].startswith("allocated") for r in report.full_profile)


@pytest.mark.parametrize("name, host_kv", [("qwen3.5-35b-a3b", "MHATokenToKVPoolHost[kv].kv_buffer"),
                                           ("deepseek-v3.2", "MLATokenToKVPoolHost[kv].kv_buffer"),
                                           ("kimi-k3", "MLATokenToKVPoolHost[kv].kv_buffer")])
def test_host_pools_of_another_model_equal_the_host_ledger(name, host_kv):
    """``--host`` (or a HiCache profile): the HostPoolGroup's page_first buffers against plan.host, and the
    host units' slopes against host.kv_bytes_per_token + host.indexer_bytes_per_token / host.mamba_slot_bytes."""
    plan = plan_of(name, enable_hierarchical_cache=True)
    report = M.measure_profile(plan, device="cpu")
    assert report.ok, report.mismatches
    rows = {r.name: r for r in report.allocations[-1].rows if r.where == "host"}
    assert rows[host_kv].match is True and rows[host_kv].ledger_source == "host.kv_bytes_per_token"
    assert any(n.startswith("DSAIndexerPoolHost") for n in rows) == (name == "deepseek-v3.2")
    assert any(n.startswith("MambaPoolHost") for n in rows) == (plan.request.state_slot_bytes > 0)
    units = {c["group"]: c for c in report.linear}
    assert units["host_token"]["match"] and units["host_token"]["measured_per_unit"] == (
        plan.host.kv_bytes_per_token + plan.host.indexer_bytes_per_token)
    assert ("host_mamba" in units) == (plan.request.state_slot_bytes > 0)


def test_a_wrong_host_ledger_of_another_model_is_named():
    plan = plan_of("qwen3.5-35b-a3b", enable_hierarchical_cache=True)
    bad = dataclasses.replace(plan, host=dataclasses.replace(plan.host, kv_bytes_per_token=plan.host.kv_bytes_per_token // 2))
    report = M.measure_profile(bad, device="cpu")
    assert any(m.startswith("MISMATCH MHATokenToKVPoolHost[kv].kv_buffer ") for m in report.mismatches), \
        report.mismatches


def test_a_host_allocation_that_fails_is_one_line_refusal(monkeypatch):
    """Found on a lent H200: pinning DeepSeek-V3.2's 80 GB of full host pools raised a CUDA OOM traceback although
    MemAvailable was 125 GB. A failing host allocation is now ``AllocationRefused`` (exit 3), one line."""
    from glm_kv.tensors.budget import AllocationRefused

    def fail(*a, **k):
        raise RuntimeError("CUDA error: out of memory\nSearch for `cudaErrorMemoryAllocation' ...")

    monkeypatch.setattr(M, "ModelHostPools", fail)
    with pytest.raises(AllocationRefused) as e:
        M.measure_profile(plan_of("deepseek-v3.2", enable_hierarchical_cache=True), device="cpu")
    assert "\n" not in str(e.value) and "HiCache host pools" in str(e.value) and "out of memory" in str(e.value)


def test_hicache_size_is_said_at_reduced_sizes_and_refused_for_the_full_profile():
    """The host pools follow hicache_ratio here: with hicache_size the reduced run says so in a note, and a
    full-profile run (whose host sizes SGLang takes from hicache_size) is refused by name."""
    plan = plan_of("qwen3.5-35b-a3b", enable_hierarchical_cache=True, hicache_size=1)
    report = M.measure_profile(plan, device="cpu")
    assert report.ok and any(n.startswith("hicache_size:") for n in report.notes)
    with pytest.raises(ProfileError) as e:
        M.measure_profile(plan, device="cpu", full=True)
    assert e.value.field == "hicache_size"


def test_host_is_refused_by_name_where_not_built(capsys, tmp_path):
    """gpt-oss's SWAKVPool gets no host pools here: ``--host`` exits 2 with one line naming the flag."""
    y = tmp_path / "g.yaml"
    y.write_text("model: gpt-oss-120b\ngpu: H200\ntp_size: 2\nmax_running_requests: 8\ncontext_length: 2048\n")
    assert cli_main(["measure", "--profile", str(y), "--device", "cpu", "--host"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--host" in err and "SWAKVPool" in err


def _spec_plan(topk: int, draft: int):
    return plan_of("qwen3.5-35b-a3b", speculative_algorithm="NEXTN", speculative_num_steps=3,
                   speculative_eagle_topk=topk, speculative_num_draft_tokens=draft, draft_weights_bytes=1 << 30)


@pytest.mark.parametrize("topk, draft, dedup", [(1, 4, True), (4, 8, False)])
def test_the_verify_scratch_of_a_gated_deltanet_model(topk, draft, dedup):
    """MTP verify scratch of a non-KDA state model: ``conv_window_dedup_enabled`` (CUDA, a linear chain) shares
    one (D + K - 2)-column conv window per (layer, slot), 6 of the dense 12 columns here (D 4, K 4); a tree
    (topk 4) keeps them dense. SGLang reserves the dense figure either way (_handle_max_mamba_cache), so the
    full profile's verify scratch is below capacity.spec_scratch_bytes with the dedup and equal to it without."""
    plan = _spec_plan(topk, draft)
    report = M.measure_profile(plan, device="cpu")
    assert report.ok, report.mismatches
    rows = {r.name: r for r in report.allocations[-1].rows}
    win = rows["mamba_pool.intermediate_conv_window[0]"]
    assert ("deduplicated" in win.ledger_source) == dedup
    assert win.measured_bytes == math.prod(win.shape[:2]) * win.shape[3] * 2 * (
        draft + 3 - 1 if dedup else draft * 3)
    row = next(r for r in report.full_profile if r["group"] == "spec")
    assert (row["difference"] < 0) == dedup and (row["difference"] == 0) == (not dedup)


def test_a_dense_window_ledger_is_caught_where_sglang_dedups(monkeypatch):
    """Planted: the ledger side forgets the deduplicated window -> the conv window buffer is named."""
    monkeypatch.setattr(M, "_dedup_window", lambda plan: None)
    report = M.measure_profile(_spec_plan(1, 4), device="cpu")
    assert any(m.startswith("MISMATCH mamba_pool.intermediate_conv_window[0] ") for m in report.mismatches), \
        report.mismatches


def test_cli_measure_json_for_another_model(capsys, tmp_path):
    y = tmp_path / "k.yaml"
    y.write_text("model: kimi-k3\ngpu: H200\ntp_size: 8\nmax_running_requests: 8\ncontext_length: 2048\n"
                 "available_bytes: 64424509440\n")
    assert cli_main(["measure", "--profile", str(y), "--device", "cpu", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["ok"] and d["mismatches"] == [] and d["mode"] == "reduced"
    names = {r["name"] for r in d["allocations"][-1]["rows"]}
    assert {"full_kv_pool.kv_buffer[0]", "mamba_pool.conv[0]", "mamba_pool.temporal"} <= names


# --------------------------------------------------------------------------- on a GPU (scripts/gpu_check.sh step 1)

requires_cuda = pytest.mark.skipif(not torch.cuda.is_available(),
                                   reason="no CUDA device here: the allocator-delta path is not exercised")


@requires_cuda
@pytest.mark.parametrize("name", sorted(MODELS))
def test_cuda_allocator_deltas_equal_the_model_for_other_models(name):
    """On CUDA every buffer still equals its ledger, and torch.cuda.memory_allocated / memory_reserved
    grow by exactly the blocks and segments the cuda_allocator model predicts (fused K/V: one block)."""
    report = M.measure_profile(plan_of(name), device="cuda", full=False)
    assert report.ok, report.mismatches
    for a in report.allocations:
        assert a.cuda_allocated_delta is not None and a.cuda_allocated_delta == a.cuda_expected_delta
        assert a.cuda_reserved_delta == a.cuda_expected_reserved
