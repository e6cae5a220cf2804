"""Issue 32: the "Other hybrid models" page covers every shipped config and compares the families.

The page's numbers come from the plan (glm_kv.book.other_models); these tests hold the page to what the
rest of glm-kv says: every model `glm-kv models` plans is on the page, each family once, at a TP the
model starts with, and what HiCache copies per family is what SGLang 0.5.23's host pools hold (its host
KV row is the device row and its mamba host slot the device slot: test_models_contract.py checks both
through SGLang's own host pools).
"""
from __future__ import annotations

import pytest

from glm_kv.book import other_models as om
from glm_kv.errors import ProfileError
from glm_kv.inputs.catalog import catalog
from glm_kv.inputs.hf_config import DSV4_SHIPPED, SHIPPED, load_hf_config


def test_every_planned_model_and_family_is_on_the_page():
    """Every shipped config SGLang 0.5.23 starts is on the page; the one it refuses whatever the flags
    (Nemotron-3.5-Lightning-NVFP4, its nemotron_h override) is off it, and glm-kv models names the refusal."""
    configs = [c for r in catalog()["planned"] for c in r["configs"]]
    # DeepSeek-V4 (issue 32) has its own plan (ledgers/dsv4_plan.py) and its own section (dsv4_rows, below)
    assert {c["model"] for c in configs} == set(SHIPPED) | set(DSV4_SHIPPED)
    assert [r["model"] for r in om.dsv4_rows()] == [hf for _stem, hf in DSV4_SHIPPED.values()]
    configs = [c for c in configs if c["model"] in SHIPPED]
    refused = {c["model"] for c in configs if c["sglang_refuses"]}
    assert refused == {"nemotron-3.5-lightning-30b-a3b-nvfp4"}
    shown = set(SHIPPED) - refused
    assert set(om.PAGE_MODELS) == shown
    on_page = {r["model"] for r in om.capacity_rows()}
    assert on_page == {SHIPPED[n][1] for n in shown}
    families = {load_hf_config(n).family for n in shown}
    rows = om.family_rows()
    assert {r["family"] for r in rows} == {om.FAMILY_WORDS[f] for f in families}
    assert sum(r["models"] for r in rows) == len(shown)


def test_each_model_runs_at_a_tp_it_starts_with_and_no_larger_one():
    assert om.page_tp("jet-nemotron-2b") == 4   # 12 JetBlock heads: TP 8 refused
    assert om.page_tp("glm-5.3-flash") == om.TP
    with pytest.raises(ProfileError):
        om._plan("jet-nemotron-2b", "H200", tp=8)


def _plan(name: str):
    """The model's plan as any user gets it (not through the page's own helper)."""
    from glm_kv.inputs.profile import make_profile
    from glm_kv.ledgers.plan import load_plan

    return load_plan(make_profile({"model": name, "gpu": "H200", "tp_size": om.page_tp(name),
                                   "available_bytes": om.REST_BYTES["H200"]}))


def test_hicache_copies_the_device_units_per_family():
    """kv (+ indexer) host bytes per token = the device cell; mamba host slot = the device slot; state
    families copy a mamba pool, the attention-only ones none."""
    for r in om.family_rows():
        name = next(n for n in SHIPPED if SHIPPED[n][1] == r["bytes from"])
        p = _plan(name)
        if p.token.swa_kv_bytes_per_token is not None:   # hybrid SWA (issue 32): a KV and an SWA host row
            assert r["HiCache host pools"] == "kv, swa", r
            assert r["host bytes per token"] == p.token.kv_bytes_per_token + p.token.swa_kv_bytes_per_token, r
        else:
            assert r["host bytes per token"] == p.token.cell_size_bytes, r
        assert r["host bytes per state slot"] == p.request.state_slot_bytes, r
        assert ("mamba" in r["HiCache host pools"].split(", ")) == (p.request.state_slot_bytes > 0), r
        assert (r["grows with requests"] == "-") == (p.request.state_slot_bytes == 0), r


def test_a_page_without_the_indexer_host_pool_is_caught(monkeypatch):
    """Planted error: the page's host bytes per token without the DSA indexer's host share."""
    monkeypatch.setattr(om, "host_bytes_per_token", lambda host: host.kv_bytes_per_token)
    with pytest.raises(AssertionError, match="indexer"):
        test_hicache_copies_the_device_units_per_family()


def test_deepseek_v4_rows_are_the_plan_a_user_gets(tmp_path):
    """Each DeepSeek-V4 figure on the page equals `glm-kv plan --json` for the same launch (the CLI, not the
    page's helper); the requests of the page's context are bounded by each of the three limits."""
    import json
    import subprocess
    import sys

    from glm_kv.ledgers.dsv4_plan import DSV4_PAGE_SIZE

    rows = {r["model"]: r for r in om.dsv4_rows()}
    for name, (_stem, hf) in DSV4_SHIPPED.items():
        row = rows[hf]
        for gpu in om.GPUS:
            prof = tmp_path / f"{name}-{gpu}.yaml"   # the page's launch, as a user writes it
            prof.write_text(f"model: {name}\ngpu: {gpu}\ntp_size: {om.TP}\navailable_bytes: {om.REST_BYTES[gpu]}\n")
            out = subprocess.run([sys.executable, "-m", "glm_kv", "plan", "--json", "--profile", str(prof)],
                                 capture_output=True, text=True, check=True)
            d = json.loads(out.stdout)
            cap, tok = d["capacity"], d["token"]
            assert row[f"{gpu} tokens"] == cap["full_max_total_num_tokens"]
            assert row[f"{gpu} SWA tokens"] == cap["swa_max_total_num_tokens"]
            assert row[f"{gpu} requests"] == cap["max_running_requests"]
            assert row["SWA bytes per token"] == round(tok["swa_kv_bytes_per_token"])
            assert row["compressed bytes per token"] == round(tok["compressed_bytes_per_full_token"])
            assert row["c128 state bytes per request"] == d["request"]["c128_state_bytes_per_request"]
            if gpu == om.GPUS[0]:   # HiCache's host pools at the page's ratio, as the plan gives them
                prof.write_text(prof.read_text() + f"enable_hierarchical_cache: true\nhicache_ratio: "
                                                   f"{om.DSV4_HICACHE_RATIO}\n")
                h = json.loads(subprocess.run([sys.executable, "-m", "glm_kv", "plan", "--json", "--profile", str(prof)],
                                              capture_output=True, text=True, check=True).stdout)["host"]
                assert row[f"{gpu} host bytes (ratio {om.DSV4_HICACHE_RATIO})"] == h["total_bytes"]
                assert row["HiCache host pools"].split(", ") == [n for n, q in h["pools"].items() if q["bytes"]]
            fit = row[f"{gpu} {om.CONTEXT // 1024}K requests"]
            assert 0 < fit <= cap["max_running_requests"]
            assert fit * om.CONTEXT <= cap["full_max_total_num_tokens"]
            assert fit * (tok["sliding_window_size"] + DSV4_PAGE_SIZE) <= cap["swa_max_total_num_tokens"]
            assert (fit + 1) * om.CONTEXT > cap["full_max_total_num_tokens"] or fit == cap["max_running_requests"] \
                or (fit + 1) * (tok["sliding_window_size"] + DSV4_PAGE_SIZE) > cap["swa_max_total_num_tokens"]
