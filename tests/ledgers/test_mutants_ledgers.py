"""Tests added to kill mutants that survived the fast suite (`make mutants`, benchmarks/mutants.md).

Each expected value comes from outside glm_kv: SGLang 0.5.23's source (the wheel's
``kv_cache_configurator.calculate_mla_kv_cache_dim`` and the facts in
tests/reference/sglang-0.5.23.md), the article's figures (tests/reference/article-figures.md),
or a hand derivation written in the test's docstring. None is computed by the code under test.
"""
from __future__ import annotations

import dataclasses

import pytest

from glm_kv.inputs.model import load_model
from glm_kv.ledgers.token import kv_cache_dim


@pytest.fixture(scope="module")
def glm():
    return load_model()


@pytest.fixture(scope="module")
def rope64(glm):
    """An MLA model with a rope part, as DeepSeek-V3/V3.2 (kv_lora_rank 512, qk_rope_head_dim 64).

    GLM-5.3-Flash has qk_rope_head_dim 0, so ``kv_lora_rank +/- qk_rope_head_dim`` and the rope
    term of the fp8 row cannot be told apart on it alone.
    """
    return dataclasses.replace(glm, qk_rope_head_dim=64)


def test_mla_row_adds_the_rope_part(rope64):
    """``calculate_mla_kv_cache_dim`` (0.5.23): ``kv_cache_dim = kv_lora_rank + qk_rope_head_dim``.

    By hand for DeepSeek-V3's widths: 512 + 64 = 576 (bf16 and raw fp8 rows, the well-known
    576-wide MLA latent); scaled fp8 (FlashMLA): 512 fp8 + 512/128 x 4 B scales + 64 x 2 B bf16
    rope = 512 + 16 + 128 = 656 B, FlashMLA's documented 656-byte fp8 KV row.
    """
    assert kv_cache_dim(rope64, "bfloat16", "flashmla_sparse", "flashmla_kv") == (576, "bf16")
    assert kv_cache_dim(rope64, "fp8_e4m3", "flashmla_sparse", "flashmla_kv") == (656, "fp8_scaled")
    assert kv_cache_dim(rope64, "fp8_e4m3", "trtllm", "trtllm") == (576, "fp8_raw")


@pytest.mark.parametrize("prefill,decode,expected", [
    ("tilelang", "tilelang", (512, "fp8_raw")),        # both TileLang: raw rows
    ("flashmla_sparse", "tilelang", (528, "fp8_scaled")),  # one side only: scaled
    ("tilelang", "flashmla_kv", (528, "fp8_scaled")),
    ("trtllm", "flashmla_kv", (512, "fp8_raw")),        # trtllm on either side: raw
    ("flashmla_sparse", "trtllm", (512, "fp8_raw")),
])
def test_fp8_row_by_backend_pair(glm, prefill, decode, expected):
    """0.5.23 ``calculate_mla_kv_cache_dim`` (CUDA): raw 512 when trtllm serves prefill *or* decode,
    or TileLang serves *both* ("validation requires both consumers to use the same TileLang
    layout"); otherwise scaled 512 + 512/128 x 4 = 528 (article figure 3)."""
    assert kv_cache_dim(glm, "fp8_e4m3", prefill, decode) == expected


@pytest.mark.parametrize("mode,prefill,decode,expected", [
    ("decode", "trtllm", "flashmla_kv", (528, "fp8_scaled")),    # a decode server reads its decode backend
    ("decode", "flashmla_sparse", "trtllm", (512, "fp8_raw")),
    ("prefill", "flashmla_sparse", "trtllm", (528, "fp8_scaled")),  # a prefill server its prefill backend
    ("prefill", "trtllm", "flashmla_kv", (512, "fp8_raw")),
    ("decode", "tilelang", "tilelang", (512, "fp8_raw")),
])
def test_fp8_row_on_a_disaggregated_server(glm, mode, prefill, decode, expected):
    """0.5.23 ``calculate_mla_kv_cache_dim``: "In disaggregated serving only the backend for the local role
    determines the local pool layout" (found by the random launches, seed 1163281087)."""
    assert kv_cache_dim(glm, "fp8_e4m3", prefill, decode, mode) == expected


@pytest.fixture(scope="module")
def article_args():
    from glm_kv import load_profile
    from glm_kv.inputs.resolve import resolve

    return resolve(load_profile("article"))


@pytest.mark.parametrize("kpool,topk,rule_has", [
    (3, 2048, ("index_kpool (3)", "64-token indexer page")),      # 64 % 3 = 1
    (4, 2046, ("index_kpool (4)", "index_topk (2046)")),           # 64 % 4 = 0, 2046 % 4 = 2
])
def test_kpool_must_divide_page_and_topk(tmp_path, kpool, topk, rule_has):
    """The indexer page holds 64 / index_kpool pooled groups and top-k is scored as
    index_topk / index_kpool groups (article figure 11: 64/4 = 16, 2048/4 = 512), so both
    divisions must be exact; the refusal names the field ``model.index_kpool`` and the rule."""
    import json

    from glm_kv import ProfileError, load_profile
    from glm_kv.inputs.model import PACKAGE_DIR
    from glm_kv.inputs.resolve import resolve
    from glm_kv.ledgers.token import token_ledger

    cfg = json.loads((PACKAGE_DIR / "data" / "glm-5.3-flash.json").read_text())
    text = cfg.get("text_config", cfg)
    text.update(index_kpool=kpool, index_topk=topk)
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ProfileError) as e:
        token_ledger(resolve(load_profile("article", {"model": str(tmp_path)})))
    assert e.value.field == "model.index_kpool"
    for text in rule_has:
        assert text in e.value.rule, e.value.rule


@pytest.mark.parametrize("prefill,decode,row", [
    ("trtllm", "flashmla_kv", 512), ("flashmla_sparse", "trtllm", 512),
    ("tilelang", "tilelang", 512), ("flashmla_sparse", "flashmla_kv", 528),
])
def test_token_ledger_reads_both_backends(article_args, prefill, decode, row):
    """The ledger passes the resolved prefill *and* decode backends to the row rule: trtllm on
    one side alone gives the raw 512 B fp8 row, TileLang on both too, FlashMLA on both the scaled
    528 (article figures 3 and 5); x 11 full layers: 5,632 / 5,808 B per token."""
    from glm_kv.ledgers.token import token_ledger

    args = dataclasses.replace(article_args, kv_cache_dtype="fp8_e4m3",
                               dsa_prefill_backend=prefill, dsa_decode_backend=decode)
    t = token_ledger(args)
    assert (t.kv_cache_dim, t.kv_row_bytes, t.kv_bytes_per_token) == (row, row, row * 11)
    assert (t.dsa_prefill_backend, t.dsa_decode_backend) == (prefill, decode)


def test_no_tail_without_kpool_compression(glm):
    """SGLang 0.5.23 ``DSATokenToKVPool`` (memory_pool.py, the tail set-up): when
    ``kpool_use_compress`` is false, ``_compress_tail_k`` and ``_compress_tail_score`` are None:
    no rows, no width, no layers, zero bytes."""
    from glm_kv.ledgers.tail import tail_bytes_per_row, tail_ledger

    plain = dataclasses.replace(glm, index_kpool_compress=False)
    t = tail_ledger(plain, 64, 4)
    assert (t.rows, t.width, t.num_layers, t.bytes_per_row, t.bytes) == (0, 0, 0, 0, 0)
    assert (t.head_dim, t.dtype) == (128, "bfloat16")
    assert tail_bytes_per_row(plain, 4) == 0


def test_tail_one_worker_by_hand(glm):
    """Article figure 21: 64 requests per worker -> 66 rows x (4 + 0) width x 128 x 2 B x 2
    tensors x 11 layers = 1,486,848 B; one row 22,528 B. With 4 MTP draft tokens the width is 8
    (tests/reference/sglang-0.5.23.md, item 6): 2 x 22,528 = 45,056 B per row."""
    from glm_kv.ledgers.tail import tail_bytes_per_row, tail_ledger

    t = tail_ledger(glm, 64, 0)
    assert (t.rows, t.width, t.head_dim, t.num_layers, t.bytes_per_row, t.bytes) == (
        66, 4, 128, 11, 22_528, 1_486_848)
    assert tail_bytes_per_row(glm, 4) == 45_056


def test_no_tail_when_kpool_is_one(glm):
    """``kpool_use_compress = index_kpool > 1 and index_kpool_compress`` (SGLang 0.5.23
    memory_pool.py, ``DSATokenToKVPool._init_kpool_compress_tail_buffers``): a kpool of 1 with
    compression on allocates no tail; a kpool of 2 with compression on does (66 rows x width 2 x
    128 x 2 B x 2 tensors x 11 layers = 66 x 11,264 B = 743,424 B, by hand). Found by mutation
    testing (was a strict xfail until glm_kv.ledgers.tail checked the kpool too)."""
    from glm_kv.ledgers.tail import tail_bytes_per_row, tail_ledger

    one = dataclasses.replace(glm, index_kpool=1, index_kpool_compress=True)
    t = tail_ledger(one, 64, 0)
    assert (t.rows, t.width, t.num_layers, t.bytes_per_row, t.bytes) == (0, 0, 0, 0, 0)
    assert tail_bytes_per_row(one, 4) == 0
    two = dataclasses.replace(glm, index_kpool=2, index_kpool_compress=True)
    t = tail_ledger(two, 64, 0)
    assert (t.rows, t.width, t.bytes_per_row, t.bytes) == (66, 2, 11_264, 743_424)


@pytest.mark.parametrize("strategy,skip,overlap_off,slots", [
    ("no_buffer", True, False, 3), ("no_buffer", False, False, 3),
    ("extra_buffer", True, False, 4), ("extra_buffer", False, False, 5),
])
def test_slots_per_request_skip_decode_lock(strategy, skip, overlap_off, slots):
    """0.5.23 ``_calculate_mamba_ratio``: base 3, minus 1 under SGLANG_OPT_MAMBA_SKIP_DECODE_LOCK;
    extra_buffer adds 2 with overlap; no_buffer under skip adds the dropped 1 back ("so effective
    stays 3", the wheel's comment): 3 - 1 + 1 = 3; extra_buffer under skip: 3 - 1 + 2 = 4
    (tests/reference/sglang-0.5.23.md, item 4: skip takes one off the extra_buffer cases)."""
    from types import SimpleNamespace

    from glm_kv.ledgers.request import slots_per_request

    p = SimpleNamespace(mamba_skip_decode_lock=skip, disable_overlap_schedule=overlap_off)
    assert slots_per_request(p, strategy) == slots


@pytest.mark.parametrize("tp,what", [(3, "KDA projection (8192 is not divisible by 3)"),
                                     (128, "KDA heads (64 is not divisible by 128)")])
def test_state_shape_division_refused_by_name(article_args, tp, what):
    """KimiLinearStateShape divides proj_size 64 x 128 = 8,192 and the 64 heads by the
    linear-attention TP; SGLang fails at that division ("8192 is not divisible by 3",
    tests/reference/sglang-0.5.23.md). 128 divides 8,192 but not the 64 heads. The refusal names
    ``tp_size`` and which quantity failed."""
    from glm_kv import ProfileError
    from glm_kv.ledgers.request import request_ledger

    with pytest.raises(ProfileError) as e:
        request_ledger(article_args, tp)
    assert e.value.field == "tp_size"
    assert what in e.value.rule and f"linear-attention TP {tp}" in e.value.rule, e.value.rule


# --- survivors of the sampled run (scripts/mutants.py all --sample 120 --floor 4 --seed 20261201) ---

def _article_plan(**over):
    from glm_kv import load_profile
    from glm_kv.ledgers.plan import compute_plan

    return compute_plan(load_profile("article", over))


def test_pool_tree_uses_sglang_attribute_names():
    """Every buffer row has exactly name / per / row / grows_with. Names are SGLang 0.5.23's
    attributes: ``DSATokenToKVPool.kv_buffer`` (per layer, one row per token slot) and
    ``MambaPool``'s ``conv_state`` and ``temporal_state`` (one per state slot), mem_cache/memory_pool.py."""
    from glm_kv.ledgers.structure import pool_structure

    s = pool_structure(_article_plan())
    full, mamba = s["children"]
    for b in full["buffers"] + mamba["buffers"]:
        assert set(b) == {"name", "per", "row", "grows_with"}, b
    kv = full["buffers"][0]
    assert (kv["name"], kv["per"], kv["grows_with"]) == ("kv_buffer", "layer", "tokens")
    assert [b["name"] for b in mamba["buffers"]] == ["conv_state", "temporal_state"]


def test_crossover_context_rounds_up_to_whole_tokens():
    """ceil(state bytes per request / cell bytes per token): 10 B of state over 4 B per token is
    reached at token 3 (2.5 rounded up), an integer."""
    from types import SimpleNamespace

    from glm_kv.ledgers.workload import crossover_context

    plan = SimpleNamespace(request=SimpleNamespace(state_bytes_per_request=10),
                           token=SimpleNamespace(cell_size_bytes=4))
    got = crossover_context(plan)
    assert got == 3 and isinstance(got, int)
    plan.request.state_bytes_per_request = 12
    assert crossover_context(plan) == 3


def _text(mathml: str) -> str:
    import xml.dom.minidom

    doc = xml.dom.minidom.parseString(mathml)
    out = []

    def walk(n):
        if n.nodeType == n.TEXT_NODE:
            out.append(n.data)
        for c in n.childNodes:
            walk(c)
    walk(doc)
    return " ".join(out)


def test_mathml_brackets_and_min_by_hand():
    """MathML read back as its token sequence: min(a, b) and (a + b) x c need their brackets,
    a + b x c does not (× is U+00D7, written &#215;)."""
    from glm_kv.ledgers.derivations import BinOp, Min, Var

    a, b, c = Var("a", 1), Var("b", 2), Var("c", 3)
    assert _text(Min((a, b)).mathml(False)) == "min ( a , b )"
    assert _text(Min((a, b)).mathml(True)) == "min ( 1 , 2 )"
    assert _text(BinOp("*", a + b, c).mathml(False)) == "( a + b ) \u00d7 c"
    assert _text(BinOp("+", a, b * c).mathml(False)) == "a + b \u00d7 c"



def test_expression_values_by_hand():
    """Each operator evaluates as written (a derivation's value is what the page shows next to
    its formula): 12 + 3 = 15, 12 - 3 = 9, 12 x 3 = 36, 12 / 3 = 4, 7 / 2 = 3.5; 12 - 3 x 2 = 6,
    (12 - 3) / 3 = 3."""
    from glm_kv.ledgers.derivations import BinOp, Var

    a, b = Var("a", 12), Var("b", 3)
    assert [BinOp(op, a, b).value() for op in "+-*/"] == [15, 9, 36, 4]
    assert BinOp("/", Var("x", 7), Var("y", 2)).value() == 3.5
    assert (a - b * Var("t", 2)).value() == 6 and ((a - b) / b).value() == 3

def test_derivations_named_after_plan_keys_with_units():
    """Each derivation's name is its plan key's last part where the plan has one
    (``request.state_bytes_per_request``), every variable has a name (it is what the book prints),
    and the units are the ones Derivation documents; the mamba cap counts requests."""
    import dataclasses as dc

    from glm_kv.ledgers.derivations import Derivation, Var, derivations

    def names(e):
        if isinstance(e, Var):
            yield e.name
        for f in dc.fields(e):
            v = getattr(e, f.name)
            for x in (v if isinstance(v, tuple) else (v,)):
                if dc.is_dataclass(x):
                    yield from names(x)

    for plan in (_article_plan(), _article_plan(kv_cache_dtype="fp8_e4m3")):
        ds = derivations(plan)
        by_name = {d.name: d for d in ds}
        assert by_name["state_bytes_per_request"].key == "request.state_bytes_per_request"
        assert by_name["mamba_request_cap"].unit == "requests"
        for d in ds:
            assert isinstance(d, Derivation) and d.unit in {"B", "tokens", "slots", "requests", ""}, d.name
            assert all(isinstance(n, str) and n for n in names(d.expr)), d.name
    assert "scale_group" in set(names(by_name["kv_cache_dim"].expr))


def test_log_inputs_read_ranks_per_host_off_the_auto_sizing_line():
    """SGLang 0.5.23 mem_cache/hicache_auto_size.py:114 prints "HiCache auto-sizing: ratio 2.000 ->
    1.103; 82.8 GiB host memory per rank (fraction 0.80, 8 ranks on this host), host pools 78.7 GiB."
    (boot_logs/h200-tp8-dpattn-hicache-auto.log, emitted by SGLang): 8 ranks, ratio 1.103, 82.8 GiB."""
    from pathlib import Path

    from glm_kv.inputs.boot_log import read_boot_log
    from glm_kv.ledgers.verify import log_inputs

    log = read_boot_log(str(Path(__file__).resolve().parent / "boot_logs" / "h200-tp8-dpattn-hicache-auto.log"))
    got = log_inputs(log)
    assert (got["ranks_per_host"], got["hicache_ratio_logged"], got["hicache_budget_gib"]) == (8, 1.103, 82.8)


def test_memory_baseline_and_kv_dtype_rows():
    """SGLang 0.5.23 srt/distributed/bootstrap.py:219 prints "Memory baseline taken. mem usage=X GB"
    before the weights load; verify shows it as an input row (not compared) of X in GiB."""
    from pathlib import Path

    from glm_kv import load_profile
    from glm_kv.inputs.boot_log import parse_boot_log
    from glm_kv.ledgers.verify import verify_boot_log

    logs = Path(__file__).resolve().parent / "boot_logs"
    text = (logs / "h200-tp8-dpattn-hicache-auto.log").read_text()
    profile = load_profile(str(logs / "h200-tp8-dpattn-hicache-auto.yaml"))
    extra = "[2026-11-30 12:00:00 DP0 TP0] Memory baseline taken. mem usage=1.25 GB\n"
    res = verify_boot_log(profile, parse_boot_log(extra + text))
    rows = [r for r in res.rows if r.quantity == "CUDA context + NCCL before weights"]
    assert len(rows) == 1 and (rows[0].log_line, rows[0].logged, rows[0].unit, rows[0].ok) == (1, 1.25, "GiB", None)
    # "KV Cache is allocated. dtype: torch.bfloat16, #tokens: 3479296, ..." (mem_cache/memory_pool.py):
    # the dtype row shows the logged dtype string, one row per rank.
    dtype_rows = [r for r in res.rows if r.quantity == "KV Cache dtype"]
    assert dtype_rows and {(r.logged, r.ok) for r in dtype_rows} == {("torch.bfloat16", True)}
    # the scheduler line "max_total_num_tokens=3479296, ..., available_gpu_mem=7.41 GB" (managers/
    # scheduler.py; SGLang's "GB" is bytes / 2**30): an informational row in GiB, not compared
    graphs = [r for r in res.rows if r.quantity == "available_gpu_mem after graphs"]
    assert graphs and {(r.logged, r.unit, r.ok) for r in graphs[:1]} == {(7.41, "GiB", None)}


def test_host_advice_names_the_pool_that_runs_out_first():
    """``HostAdvice.binding``: "kv" when the host KV pool holds fewer cached prefixes of the
    workload's length than the host mamba pool has slots (one checkpoint per prefix), else "mamba"
    (its field comment). On the article profile with 2 TB of host memory and 1,000-token prompts
    the KV side holds about 2,200 prefixes against about 10,700 mamba slots: "kv"."""
    from glm_kv import load_profile
    from glm_kv.inputs.workload_spec import make_workload
    from glm_kv.ledgers.advise import advise

    h = advise(load_profile("article"), make_workload(
        {"tokens_per_request": 1000, "concurrent_requests": 8, "host_memory_bytes": 2 * 10**12})).host
    assert h.prefixes_by_mamba == h.mamba_slots and h.prefixes_by_kv < h.prefixes_by_mamba
    assert h.binding == "kv"


def test_host_advice_mamba_binds_beside_a_large_prefix_cache():
    """The other side of ``HostAdvice.binding``: "mamba" when the host mamba pool holds fewer
    checkpoints than the host KV pool holds prefixes of the workload's length.

    By hand: 8 requests of 1,024 tokens (a whole number of 64-token pages) beside a
    2,000,000-token prefix cache. Whatever split advise picks, the device KV pool keeps at least
    2,000,000 + 8 x 1,024 tokens, about 1,961 prefixes of 1,024 tokens, while the best split gives
    the 8 requests only a few hundred state slots (147,619,840 B each). HiCache's host pools are
    the device pools times one ratio, so the host KV holds about 1,961 prefixes per device-pool
    size against a few hundred checkpoints: the mamba pool runs out first.
    """
    from glm_kv import load_profile
    from glm_kv.inputs.workload_spec import make_workload
    from glm_kv.ledgers.advise import advise

    a = advise(load_profile("article"), make_workload(
        {"tokens_per_request": 1024, "concurrent_requests": 8, "prefix_cache_tokens": 2_000_000,
         "host_memory_bytes": 2 * 10**12}))
    h = a.host
    assert a.fits and h is not None and h.hicache_ratio is not None
    assert a.plan.capacity.max_total_num_tokens >= 2_000_000 + 8 * 1024
    assert a.plan.capacity.max_mamba_cache_size < 1000
    assert h.prefixes_by_kv == h.kv_tokens // 1024 and h.prefixes_by_mamba == h.mamba_slots
    assert h.prefixes_by_mamba < h.prefixes_by_kv
    assert h.binding == "mamba"


def test_radix_off_too_many_requests_walks_down_to_the_largest_count():
    """Radix cache off: SGLang's mamba pool holds exactly --max-running-requests states, so a
    count whose states and tokens do not fit is refused outright; advise must still answer with
    the largest count that fits.

    By hand on worked-example-0.5.23 (100 GiB = 107,374,182,400 B for the pools, scaled fp8 cell
    6,171 B per token, fp32 state slot 147,619,840 B, one slot per request with the radix cache
    off, plus SGLang's one padding slot): a 32,768-token request costs 147,619,840 + 32,768 x 6,171
    = 349,831,168 B, and (107,374,182,400 - 147,619,840) / 349,831,168 = 306.5 -> 306 requests.
    1,000 such requests need 147,619,840,000 B of states and 202,211,328,000 B of tokens: neither
    fits alone and the tokens are the larger share, so the binding resource is "tokens".
    """
    from glm_kv import load_profile
    from glm_kv.inputs.workload_spec import make_workload
    from glm_kv.ledgers.advise import advise

    a = advise(load_profile("worked-example-0.5.23", {"disable_radix_cache": True}),
               make_workload({"concurrent_requests": 1000, "tokens_per_request": 32768}))
    assert not a.fits and a.knob == "none"
    assert a.flags == ("--max-running-requests 306",)
    assert (a.largest_fitting.concurrent_requests, a.largest_fitting.binding_resource) == (306, "tokens")
    assert a.served_per_worker == 306


def test_pinned_candidates_stop_at_the_flag_maximum():
    """A pinned --max-mamba-cache-size has glm-kv's bound 1 << 24 = 16,777,216 (the profile's field
    table), global over the DP-attention workers: with 64 workers at most 262,144 slots each.

    By hand: 1 PiB for the pools holds 2**50 / 147,619,840 = 7.6 M fp32 state slots per worker,
    so the flag's bound binds, not the memory. The best pinned count is the middle of the counts
    that serve the most requests: at ``slots_per_request`` s, per-worker counts k with
    k // s == 262,144 // s; for s = 5 (this profile: MTP + overlap) those are 262,140..262,144,
    middle 262,142, flag 262,142 x 64 = 16,777,088. A candidate one past the bound (262,145, which
    serves 52,429 > 52,428) would be picked and give a flag the profile refuses.
    """
    from glm_kv import load_profile
    from glm_kv.inputs.workload_spec import make_workload
    from glm_kv.ledgers.advise import advise

    p = load_profile("h200-0.5.23", {"available_bytes": 2**50, "max_mamba_cache_size": 800,
                                     "tp_size": 64, "dp_size": 64})
    a = advise(p, make_workload({"tokens_per_request": 4096, "concurrent_requests": 64}))
    spr = a.plan.request.slots_per_request
    assert a.plan.parallel.attn_dp_size == 64 and spr == 5
    assert a.fits and a.knob == "max_mamba_cache_size"
    assert "--max-mamba-cache-size 16777088" in a.flags
    assert a.served_per_worker == 262_144 // spr == 52_428


# GPU memory (MiB), tp_size -> (chunked_prefill_size, decode CUDA-graph max_bs), copied from
# SGLang 0.5.23's ``_handle_gpu_memory_settings`` (srt/arg_groups/memory_hook.py:90-170): T4/4080
# (< 20 GiB) 2k and 8; A10/4090/5090 (< 35 GiB) 4k and 48 if tp < 4 else 160; A100-40GB/L40
# (< 60 GiB) 4k and 32 if tp < 4 else 160; H100/A100-80GB (< 90 GiB) and H20/H200 (< 160 GiB) 8k
# and 256 if tp < 4 else 512; B200/MI300 16k and 512.
@pytest.mark.parametrize("gib,tp,expected", [
    (16, 1, (2048, 8)), (16, 8, (2048, 8)),
    (20, 1, (4096, 48)), (24, 3, (4096, 48)), (24, 4, (4096, 160)),
    (35, 1, (4096, 32)), (48, 3, (4096, 32)), (48, 4, (4096, 160)), (59.9, 8, (4096, 160)),
    (60, 1, (8192, 256)), (80, 4, (8192, 512)), (141, 2, (8192, 256)), (141, 8, (8192, 512)),
    (159.9, 8, (8192, 512)), (160, 1, (16384, 512)), (180, 8, (16384, 512)),
])
def test_gpu_defaults_follow_sglang_tiers(gib, tp, expected):
    from glm_kv.ledgers.memory import gpu_defaults

    assert gpu_defaults(gib * 1024, tp) == expected


# --- ledgers.request: the replay-SSM ring ------------------------------------------------------

def test_replayssm_ring_bytes_by_hand():
    """SGLang 0.5.23 ``BaseLinearStateParams.replayssm_ring_bytes_per_req`` for KDA
    (configs/mamba_utils.py:127-157), per layer and ring step: raw v, raw k, d and k in the conv
    dtype (bf16, 2 B), beta (fp32, one per head) and the per-K gate (fp32, K per head).
    By hand for GLM-5.3-Flash's KDA at TP 1 (64 heads of 128, 34 linear layers), a 16-step ring:
    64 x 16 x (128 x 2 x 4 + 4 + 128 x 4) = 1,024 x 1,540 = 1,576,960 B per layer,
    x 34 = 53,616,640 B; at TP 2 (32 heads) half of it."""
    from glm_kv.ledgers.request import replayssm_ring_bytes

    assert replayssm_ring_bytes((64, 128, 128), 34, 16) == 53_616_640
    assert replayssm_ring_bytes((32, 128, 128), 34, 16) == 26_808_320
    assert replayssm_ring_bytes((64, 128, 64), 1, 1) == 64 * (128 * 2 * 2 + 64 * 2 * 2 + 4 + 64 * 4)


def test_draft_bf16_parts_by_hand(glm, monkeypatch):
    """The MTP draft estimate's bf16 parts, with the decoder layer's own weights left out (its
    parameter counts patched to 0): the draft's embed_tokens and lm_head shards, vocab x hidden x 2 B
    each (embed over the attention TP under DP attention, else over TP; lm_head over TP), and
    ``eh_proj``, DeepSeek-V3's ``nn.Linear(2 * hidden, hidden)`` in bf16, replicated:
    2 x hidden x hidden x 2 B; times the MTP layers (at least one). By hand from the config's
    hidden_size and vocab_size."""
    from glm_kv.inputs.profile import make_profile
    from glm_kv.inputs.resolve import resolve
    from glm_kv.ledgers import model_weights
    from glm_kv.ledgers.memory import estimate_draft_bytes_for
    from glm_kv.ledgers.model_layers import layers_for

    args = resolve(make_profile({"gpu": "H200"}))
    cfg, layers = args.config, layers_for(args)
    monkeypatch.setattr(model_weights, "draft_layer_counts", lambda cfg, layers: (0, 0, 0))
    h, v, n = glm.hidden_size, glm.vocab_size, max(glm.num_nextn_predict_layers, 1)
    assert estimate_draft_bytes_for(cfg, layers, 1, 1) == (2 * v * h * 2 + 4 * h * h) * n
    assert estimate_draft_bytes_for(cfg, layers, 8, 1, dp_attention=True) == \
        (v * h * 2 + v * h * 2 // 8 + 4 * h * h) * n


def test_cp_tp_group_sharing_conditions():
    """SGLang 0.5.23 ``resolve_cp_tp_group_sharing`` (arg_groups/cp_tp_group_sharing_hook.py:27-47):
    nothing unless --enable-prefill-cp, attn_cp_size > 1 and a supported architecture
    (Glm5NextForConditionalGeneration); then attn_cp_size must equal tp_size and the strategy be
    interleave, each refused by name."""
    from types import SimpleNamespace

    from glm_kv import ProfileError
    from glm_kv.inputs.resolve import cp_tp_group_sharing

    glm5 = SimpleNamespace(architectures=("Glm5NextForConditionalGeneration",))
    other = SimpleNamespace(architectures=("Qwen3NextForCausalLM",))

    def sharing(model, **over):
        p = SimpleNamespace(**{"enable_prefill_cp": True, "attn_cp_size": 8, "tp_size": 8,
                               "cp_strategy": "interleave", **over})
        return cp_tp_group_sharing(p, model)

    assert sharing(glm5) is True
    assert sharing(glm5, enable_prefill_cp=False) is False
    assert sharing(glm5, enable_prefill_cp=False, attn_cp_size=4, cp_strategy="zigzag") is False
    assert sharing(glm5, attn_cp_size=1, cp_strategy="zigzag") is False
    assert sharing(other, attn_cp_size=4, cp_strategy="zigzag") is False
    for over, field in (({"attn_cp_size": 4}, "attn_cp_size"), ({"cp_strategy": "zigzag"}, "cp_strategy")):
        with pytest.raises(ProfileError) as e:
            sharing(glm5, **over)
        assert e.value.field == field


def test_chunked_prefill_must_be_whole_pages():
    """SGLang 0.5.23 validation_hook.py:240-245: "chunked_prefill_size must be divisible by
    page_size", skipped when chunked prefill is off (<= 0) or on a decode server. The article runs
    64-token pages: 100 is refused naming chunked_prefill_size, 128 and -1 are accepted."""
    from glm_kv import ProfileError

    assert _article_plan(chunked_prefill_size=128).token.page_size == 64
    _article_plan(chunked_prefill_size=-1)
    with pytest.raises(ProfileError) as e:
        _article_plan(chunked_prefill_size=100)
    assert e.value.field == "chunked_prefill_size" and "not a multiple of the page size (64)" in e.value.rule


def test_host_auto_size_sums_the_device_pools_without_a_draft():
    """SGLang 0.5.23's HiCache auto-sizing (mem_cache/hicache_auto_size.py) divides the host
    budget by the bytes of the device pools the host pools mirror: the KV pool
    (``get_kv_size_bytes``), the mamba pool (+ speculative scratch) and, only when a draft is
    packed with them, the draft's KV. Without a draft that last term is 0, so the sum is exactly
    the two device pools. (Numbers from the article profile's plan; the pools themselves are
    checked against SGLang in tests/sglang.)"""
    from glm_kv.ledgers.host import device_kv_bytes

    pl = _article_plan(enable_hierarchical_cache=True, host_memory_bytes=10**12)
    c, h = pl.capacity, pl.host
    assert pl.token.draft_layers == 0 and c.spec_scratch_bytes == 0
    kv = device_kv_bytes(c.max_total_num_tokens, pl.token, pl.token.num_full_layers)
    assert h.device_bytes == kv + c.mamba_pool_bytes


@pytest.mark.parametrize("scalar", [True, False])
@pytest.mark.parametrize("mmc,error,field", [(1.0, 7, "max_mamba_cache_size"), (float("nan"), 8, "available_bytes")])
def test_fewer_slots_than_one_request_names_the_cause(scalar, mmc, error, field):
    """SGLang 0.5.23 mem_cache/kv_cache_configurator.py:3136-3160 (``resolve_max_num_reqs``):
    ``mamba_cap = max_mamba_cache_size // ratio``, ``max_num_reqs = min(max_num_reqs, mamba_cap)``,
    and ``if max_num_reqs <= 0: raise RuntimeError("Hybrid (mamba/linear-attention) state cache is
    too small to serve any requests ...")``. The boundary is 0 requests, not fewer.

    By hand, 2 state slots per request, 1 MiB slots, mamba_full_memory_ratio 1, 5/1024 GiB (5 MiB)
    left: the mamba budget is 5 x 1/2 = 2.5 MiB, so (2.5 - 1) // 1 = 1 slot (or the flag's 1
    slot); 5 - (1 + 1) x 1 = 3 MiB for tokens, 3 MiB // 1024 B // 64 x 64 = 3072 tokens, 1536
    requests by tokens, but 1 // 2 = 0 by slots: exactly 0, refused. With the flag set it is the
    flag that is too small (code 7, ``max_mamba_cache_size``); sized from the budget it is the
    memory (code 8, ``available_bytes``)."""
    from glm_kv.ledgers.capacity import REFUSALS, pool_sizes

    out = pool_sizes(5 / 1024, slot=1 << 20, slots_per_request=2, cell_size=1024, page_size=64, draft_tokens=0,
                     attn_dp=1, mamba_full_memory_ratio=1.0, max_mamba_cache_size=mmc,
                     max_total_tokens=float("nan"), radix_off=False, requests_per_worker=1, has_requests=False,
                     context_length=131072, scalar=scalar)
    assert int(out["max_mamba_cache_size"]) == 1 and int(out["max_total_num_tokens"]) == 3072
    assert int(out["max_running_requests"]) == 0
    assert int(out["error"]) == error and REFUSALS[error][0] == field
