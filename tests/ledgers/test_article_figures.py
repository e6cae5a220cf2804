"""The 28 figures of tests/reference/article-figures.md, layout 'article'. Expected values are typed from that
document (and the article), never computed by glm_kv."""
import pytest

from glm_kv import compute_plan, load_profile
from glm_kv.ledgers.structure import pool_structure
from glm_kv.ledgers.workload import workload


def plan(name="article", **over):
    return compute_plan(load_profile(name, over))


def test_01_layers():
    m = plan().model
    assert m.num_full_layers == 11 and m.num_linear_layers == 34
    assert m.full_attention_layers == (3, 7, 11, 15, 19, 23, 27, 31, 35, 39, 43)
    assert 44 in m.linear_attention_layers


def test_02_bf16_kv():
    assert plan("article-bf16").token.kv_bytes_per_token == 11_264


def test_03_fp8_scaled_row():
    assert plan().token.kv_cache_dim == 528


def test_04_fp8_scaled_kv():
    assert plan().token.kv_bytes_per_token == 5_808


def test_05_fp8_raw_kv():
    t = plan("article-trtllm-raw").token
    assert (t.kv_cache_dim, t.kv_bytes_per_token) == (512, 5_632)


def test_06_indexer():
    t = plan().token
    assert t.indexer_bytes_per_token_per_layer == 132
    assert t.indexer_bytes_per_token == 1_452


@pytest.mark.parametrize("name,total", [("article", 7_260), ("article-trtllm-raw", 7_084),
                                        ("article-bf16", 12_716)])
def test_07_08_09_token_totals(name, total):
    assert plan(name).token.cell_size_bytes == total


def test_10_indexer_page():
    t = plan().token
    assert (t.indexer_tokens_per_page, t.indexer_page_bytes) == (64, 8_448)


def test_11_kpool_groups():
    t = plan().token
    assert (t.index_kpool, t.index_groups_per_page, t.index_topk_groups) == (4, 16, 512)


def test_12_effective_indexer_write():
    t = plan().token
    assert t.indexer_effective_bytes_per_token_per_layer == 33
    assert t.indexer_effective_bytes_per_token == 363


def test_13_14_15_kda_per_layer():
    r = plan().request
    assert r.conv_state_shape == (3, 24_576) and r.conv_dtype == "bfloat16"
    assert r.conv_state_bytes == 147_456
    assert r.temporal_state_shape == (64, 128, 128) and r.temporal_dtype == "float32"
    assert r.temporal_state_bytes == 4_194_304
    assert r.conv_state_bytes + r.temporal_state_bytes == 4_341_760


def test_16_17_slot():
    assert plan().request.state_slot_bytes == 147_619_840
    assert plan("ssm-bf16").request.state_slot_bytes == 76_316_672


@pytest.mark.parametrize("name,over,slots", [
    ("article", {}, 5),
    ("no-overlap", {}, 4),
    ("article", {"mamba_scheduler_strategy": "no_buffer"}, 3),
    ("article", {"linear_attn_backend": "flashinfer"}, 3),
])
def test_18_slots_per_request(name, over, slots):
    assert plan(name, **over).request.slots_per_request == slots


def test_19_kda_per_request():
    assert plan().request.state_bytes_per_request == 738_099_200
    assert plan("ssm-bf16").request.state_bytes_per_request == 381_583_360


def test_20_attn_tp():
    assert plan("tp8-dp4-dpattn").parallel.attn_tp_size == 2
    assert plan("tp8").parallel.attn_tp_size == 8
    assert plan("tp8-dp8-dpattn").parallel.attn_tp_size == 1


def test_21_tail_one_worker():
    t = plan().tail
    assert (t.rows, t.width, t.bytes) == (66, 4, 1_486_848)


def test_22_tail_dp8():
    p = plan("tp8-dp8-dpattn")
    assert p.parallel.max_running_requests_per_worker == 8
    assert (p.tail.rows, p.tail.bytes) == (10, 225_280)


def test_23_one_128k_request():
    assert workload(plan(), 1, 131_072).token_bytes_per_request == 951_582_720


def test_24_64_requests_token_ledger():
    w = workload(plan(), 64, 131_072)
    assert round(w.token_bytes_global / 1e9, 1) == 60.9
    assert round(workload(plan("tp8-dp8-dpattn"), 64, 131_072).token_bytes_per_rank / 1e9, 1) == 7.6


def test_25_64_requests_kda_ledger():
    assert round(workload(plan(), 64).kda_bytes_per_rank / 1e9, 1) == 47.2
    assert round(workload(plan("ssm-bf16"), 64).kda_bytes_per_rank / 1e9, 1) == 24.4
    assert round(workload(plan("tp8-dp8-dpattn"), 64).kda_bytes_per_rank / 1e9, 1) == 5.9
    assert round(workload(plan("tp8-dp8-dpattn", mamba_ssm_dtype="bfloat16"), 64)
                 .kda_bytes_per_rank / 1e9, 1) == 3.1


def test_26_hbm_pools():
    s = pool_structure(plan())
    assert s["class"] == "HybridLinearKVPool"
    full, mamba = s["children"]
    assert (full["name"], full["class"], len(full["layers"])) == ("full_kv_pool", "DSATokenToKVPool", 11)
    assert (mamba["name"], mamba["class"], len(mamba["layers"])) == ("mamba_pool", "MambaPool", 34)
    names = [b["name"] for b in full["buffers"]]
    assert "kv_buffer" in names and any("IndexKeyCache" in n for n in names)


def test_28_hicache_host():
    h = plan().host
    assert h.entries == ("kv", "mamba")
    assert h.entry_classes == ("MLATokenToKVPoolHost", "MambaPoolHost")
    assert h.kv_page_size == 64 and h.mamba_page_size == 1
    assert h.kv_row_bytes == 512 and plan().token.kv_row_bytes == 528
    assert h.indexer_bytes_per_token == 0
    assert h.mamba_slot_bytes == 147_619_840


# The article's deployment as its text states it (tests/reference/article-figures.md, header and
# rows 18, 23-25): one rank, 64 requests of 128K, fp32 KDA state, triton + overlap, so "auto" picks extra_buffer.
ARTICLE_STATED = {"tp_size": 1, "max_running_requests": 64, "context_length": 131_072,
                  "mamba_ssm_dtype": "float32", "mamba_scheduler_strategy": "auto",
                  "linear_attn_backend": "triton", "disable_overlap_schedule": False}


# The shipped profiles of the article's example itself (its other article-layout profiles vary
# one setting on purpose: tp8, no-overlap, ssm-bf16, ...).
ARTICLE_EXAMPLES = ("article", "article-bf16", "article-trtllm-raw")


def _article_profiles():
    import yaml
    from glm_kv.inputs.profile import PACKAGE_DIR
    return {name: yaml.safe_load((PACKAGE_DIR / "profiles" / f"{name}.yaml").read_text(encoding="utf-8"))
            for name in ARTICLE_EXAMPLES}


def test_article_profiles_state_the_article_values():
    """Issue 19.3: an omitted field takes SGLang 0.5.23's value, so a profile of the article's
    example must not lean on omission. Read from the YAML text, not the resolved profile: a
    field left out would resolve to 0.5.23's (e.g. context_length 1,048,576 from the config)."""
    for name, raw in _article_profiles().items():
        assert raw["sglang_layout"] == "article", name
        missing = sorted(set(ARTICLE_STATED) - set(raw))
        assert not missing, f"{name}.yaml leaves {missing} to SGLang 0.5.23's defaults"
        wrong = {k: raw[k] for k in ARTICLE_STATED if raw[k] != ARTICLE_STATED[k]}
        assert not wrong, f"{name}.yaml states {wrong}, the article says otherwise"


def test_every_variant_of_the_article_example_keeps_its_128k_requests():
    """A shipped profile described as "the article's example (with ...)" varies one setting of it, so it
    keeps the article's 64 requests of 128K (header and row 24), stated, not left to the config's
    1,048,576-token context (the book's "requests that fit" counts requests of that context)."""
    from glm_kv import shipped_profiles
    from glm_kv.inputs.profile import PACKAGE_DIR
    import yaml

    variants = {}
    for name in shipped_profiles():
        raw = yaml.safe_load((PACKAGE_DIR / "profiles" / f"{name}.yaml").read_text(encoding="utf-8"))
        if "article's example" in str(raw.get("description", "")):
            variants[name] = raw
    assert set(ARTICLE_EXAMPLES) <= set(variants) and len(variants) > len(ARTICLE_EXAMPLES)
    for name, raw in variants.items():
        stated = {k: raw.get(k) for k in ("context_length", "max_running_requests")}
        assert stated == {"context_length": 131_072, "max_running_requests": 64}, f"{name}.yaml: {stated}"
