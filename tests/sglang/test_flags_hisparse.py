"""Issue 30: ``--enable-hisparse`` (and ``--hisparse-config``) planned as SGLang 0.5.23 sizes and refuses them.

SGLang's side is compare_memory.compare (oracle_memory: ServerArgs resolved with the flags, SGLang's own
free-memory readings, ``KVCacheConfigurator`` sizing the pools): every compare_memory.KEYS key both ways,
and a launch SGLang refuses must be refused by glm-kv (and the other way round). HiSparse moves the token
pool through the cell size (``_compute_dsa_indexer_cell_size``: the index K for tokens x ratio on every
full layer; the EAGLE draft's KV and indexer over the same logical space) and, on B200 with FP8 KV, through
the DSA backends' HiSparse defaults (flashmla_kv: the scaled 528 B row where trtllm's raw row is 512 B).

``capacity.hisparse_logical_tokens`` is checked against SGLang's ``HiSparseTokenToKVPoolAllocator`` built
on the meta device over the token count SGLang sized (its ``size_full``), with the ratio SGLang parses from
``--hisparse-config`` (``parse_hisparse_config``).

Planted errors: the indexer without the ratio, the MTP draft without it, and the backends' HiSparse arm
left out each fail the comparison.
"""
from __future__ import annotations

import contextlib

import pytest

GiB = 1 << 30
L = {"sglang_layout": "0.5.23"}
H = {"enable_hisparse": True, "disable_radix_cache": True}
EAGLE = {"speculative_algorithm": "EAGLE", "speculative_num_steps": 3, "speculative_eagle_topk": 1,
         "speculative_num_draft_tokens": 4}
PASSED = ("enable_hisparse", "hisparse_config")

CASES = [
    ("h200-tp1", {"gpu": "H200", "tp_size": 1, **H, "weights_bytes": 70 * GiB, "max_running_requests": None}),
    ("h200-tp1-avail", {"gpu": "H200", "tp_size": 1, **H, "available_bytes": 100 * GiB, "max_running_requests": 64}),
    ("h200-tp1-fp8", {"gpu": "H200", "tp_size": 1, **H, "kv_cache_dtype": "fp8_e4m3", "weights_bytes": 70 * GiB}),
    ("b200-tp4-fp8-default", {"gpu": "B200", "tp_size": 4, **H, "weights_bytes": 40 * GiB,
                              "max_running_requests": 64}),
    ("b200-tp4-dpattn-eagle", {"gpu": "B200", "tp_size": 4, "dp_size": 4, "enable_dp_attention": True, **H,
                               "speculative_algorithm": "EAGLE", "max_running_requests": 64,
                               "weights_bytes": 40 * GiB}),
    ("h200-tp8-eagle4", {"gpu": "H200", "tp_size": 8, **H, **EAGLE, "weights_bytes": 40 * 10**9}),
    ("h200-tp2-ratio3", {"gpu": "H200", "tp_size": 2, **H, "hisparse_config": '{"host_to_device_ratio": 3}',
                         "weights_bytes": 36 * GiB}),
    ("h200-tp2-ratio1-eagle", {"gpu": "H200", "tp_size": 2, **H, "speculative_algorithm": "EAGLE",
                               "hisparse_config": '{"host_to_device_ratio": 1, "top_k": 1024}',
                               "weights_bytes": 36 * GiB, "max_running_requests": 32}),
    ("h200-tp2-decode", {"gpu": "H200", "tp_size": 2, "enable_hisparse": True, "disaggregation_mode": "decode",
                         "weights_bytes": 36 * GiB, "max_running_requests": None}),
    ("h200-tp1-mtt", {"gpu": "H200", "tp_size": 1, **H, "available_bytes": 60 * GiB, "max_total_tokens": 500000}),
]
# launches SGLang refuses with HiSparse: glm-kv must refuse each too
REFUSED = [
    ("radix-on", {"gpu": "H200", "tp_size": 1, "enable_hisparse": True, "weights_bytes": 70 * GiB}),
    ("topk2", {"gpu": "H200", "tp_size": 1, **H, "speculative_algorithm": "EAGLE", "speculative_num_steps": 3,
               "speculative_eagle_topk": 2, "speculative_num_draft_tokens": 4, "weights_bytes": 70 * GiB}),
    ("bf16-flashmla-kv", {"gpu": "H200", "tp_size": 1, **H, "dsa_decode_backend": "flashmla_kv",
                          "weights_bytes": 70 * GiB}),
    ("fp8-trtllm", {"gpu": "B200", "tp_size": 4, **H, "dsa_prefill_backend": "trtllm", "weights_bytes": 40 * GiB}),
    ("fp8-tilelang", {"gpu": "H200", "tp_size": 1, **H, "kv_cache_dtype": "fp8_e4m3", "dsa_prefill_backend": "tilelang",
                      "dsa_decode_backend": "tilelang", "weights_bytes": 70 * GiB}),
    ("decode-radix", {"gpu": "H200", "tp_size": 2, "enable_hisparse": True, "disaggregation_mode": "decode",
                      "disaggregation_decode_enable_radix_cache": True, "weights_bytes": 36 * GiB}),
    ("buffer-below-topk", {"gpu": "H200", "tp_size": 1, **H, "weights_bytes": 70 * GiB,
                           "hisparse_config": '{"top_k": 2048, "device_buffer_size": 1024}'}),
    ("bad-json", {"gpu": "H200", "tp_size": 1, **H, "weights_bytes": 70 * GiB, "hisparse_config": "{ratio"}),
]


@contextlib.contextmanager
def passing_hisparse():
    """oracle_memory's ServerArgs kwargs with the HiSparse fields (it passes a fixed list of profile fields)."""
    import oracle_memory

    real = oracle_memory.kwargs_for
    oracle_memory.kwargs_for = lambda profile, raw: {**real(profile, raw),
                                                    **{k: profile[k] for k in PASSED if profile.get(k)}}
    try:
        yield oracle_memory
    finally:
        oracle_memory.kwargs_for = real


def _compare(raw: dict) -> dict:
    from compare_memory import compare

    with passing_hisparse():
        return compare("hisparse", {**L, **raw})


@pytest.mark.parametrize("pid,raw", CASES, ids=[c[0] for c in CASES])
def test_hisparse_is_sized_as_sglang_sizes_it(sglang_ready, pid, raw):
    res = _compare(raw)
    assert "capacity.max_total_num_tokens" in res["compared"], (pid, res)
    assert res["mismatches"] == [], (pid, res["mismatches"])


@pytest.mark.parametrize("pid,raw", REFUSED, ids=[c[0] for c in REFUSED])
def test_hisparse_refusals_are_sglangs(sglang_ready, pid, raw):
    """Both refuse, and glm-kv's line quotes SGLang's message (the one SGLang's own run raised)."""
    from compare_memory import engine
    from oracle_memory import sglang_memory
    from profiles import hardware

    res = _compare(raw)
    assert res == {"compared": ["errors"], "mismatches": []}, (pid, res)
    full, measured = hardware({**L, **raw})
    _, mine = engine(full, measured)
    with passing_hisparse():
        sg = sglang_memory(dict(full), dict(full), pre_model_load_bytes=full.get("pre_model_load_bytes"),
                           weights_bytes=full["weights_bytes"])
    said = " ".join(sg["errors"]["message"].split()).strip()
    assert said and said in mine["rule"], (pid, said, mine)


def test_hisparse_moves_the_pool(sglang_ready):
    """The cases compare something HiSparse changes: SGLang's token pool differs without the flag."""
    from oracle_memory import sglang_memory
    from profiles import hardware

    raw, _ = hardware({**L, **CASES[0][1]})
    with passing_hisparse():
        on = sglang_memory(dict(raw), dict(raw), pre_model_load_bytes=raw["pre_model_load_bytes"],
                           weights_bytes=raw["weights_bytes"])
        off_raw = {k: v for k, v in raw.items() if k != "enable_hisparse"}
        off = sglang_memory(dict(off_raw), dict(off_raw), pre_model_load_bytes=raw["pre_model_load_bytes"],
                            weights_bytes=raw["weights_bytes"])
    assert on["capacity"]["max_total_num_tokens"] < off["capacity"]["max_total_num_tokens"], (on, off)


@pytest.mark.parametrize("pid,raw", [CASES[0], CASES[6], CASES[7]], ids=[CASES[i][0] for i in (0, 6, 7)])
def test_logical_tokens_are_sglangs_allocator(sglang_ready, pid, raw):
    """capacity.hisparse_logical_tokens = HiSparseTokenToKVPoolAllocator(size=SGLang's tokens).size_full, the
    ratio from SGLang's own parse of --hisparse-config."""
    import torch

    from compare_memory import engine
    from oracle_memory import sglang_memory
    from profiles import hardware

    from sglang.srt.mem_cache.allocator.hisparse import HiSparseTokenToKVPoolAllocator
    from sglang.srt.mem_cache.sparsity import factory

    full, measured = hardware({**L, **raw})
    plan, d = engine(full, measured)
    assert plan is not None, d
    with passing_hisparse():
        sg = sglang_memory(dict(full), dict(full), pre_model_load_bytes=full.get("pre_model_load_bytes"),
                           weights_bytes=full["weights_bytes"] + measured.get("draft_weights_bytes", 0))
    tokens = sg["capacity"]["max_total_num_tokens"]
    mem = type("M", (), {"hisparse_config": full.get("hisparse_config")})()
    real = factory.get_memory
    factory.get_memory = lambda: mem
    try:
        ratio = factory.parse_hisparse_config().host_to_device_ratio
    finally:
        factory.get_memory = real
    kv = type("KV", (), {"register_mapping": lambda self, m: None})()
    alloc = HiSparseTokenToKVPoolAllocator(tokens, page_size=256, dtype=torch.bfloat16, device="meta", kvcache=kv,
                                           need_sort=False, host_to_device_ratio=ratio)
    assert d["token"]["hisparse_host_to_device_ratio"] == ratio
    assert d["capacity"]["hisparse_logical_tokens"] == alloc.size_full, (d["capacity"], alloc.size_full)


def test_planted_indexer_without_ratio_is_caught(sglang_ready, monkeypatch):
    import glm_kv.ledgers.token as token

    real = token.token_ledger

    def planted(args, layers=None):
        t = real(args, layers)
        if not args.hisparse_ratio:
            return t
        import dataclasses

        idx = t.indexer_bytes_per_token // args.hisparse_ratio
        return dataclasses.replace(t, indexer_bytes_per_token=idx,
                                   cell_size_bytes=t.cell_size_bytes - t.indexer_bytes_per_token + idx)

    monkeypatch.setattr(token, "token_ledger", planted)
    import glm_kv.ledgers.plan as plan

    monkeypatch.setattr(plan, "token_ledger", planted, raising=False)
    failing = {pid for pid, raw in CASES if _compare(raw)["mismatches"]}
    assert failing >= {"h200-tp1", "h200-tp1-fp8", "h200-tp2-ratio3"}, failing


def test_planted_draft_without_ratio_is_caught(sglang_ready, monkeypatch):
    import dataclasses

    import glm_kv.ledgers.plan as plan
    import glm_kv.ledgers.token as token

    real = token.token_ledger

    def planted(args, layers=None):
        t = real(args, layers)
        if not (args.hisparse_ratio and t.draft_bytes_per_token):
            return t
        draft = t.draft_bytes_per_token // args.hisparse_ratio
        return dataclasses.replace(t, draft_bytes_per_token=draft,
                                   cell_size_bytes=t.cell_size_bytes - t.draft_bytes_per_token + draft)

    monkeypatch.setattr(token, "token_ledger", planted)
    monkeypatch.setattr(plan, "token_ledger", planted, raising=False)
    failing = {pid for pid, raw in CASES if _compare(raw)["mismatches"]}
    assert failing == {"b200-tp4-dpattn-eagle", "h200-tp8-eagle4"}, failing   # ratio 1: nothing to lose


def test_planted_backend_arm_left_out_is_caught(sglang_ready, monkeypatch):
    import glm_kv.inputs.resolve as resolve

    monkeypatch.setattr(resolve, "hisparse_backends", lambda p, kv: None)
    bad = _compare(dict(CASES[3][1]))["mismatches"]
    assert bad, "B200 FP8 with HiSparse: trtllm's raw row must not size as SGLang's flashmla_kv"
