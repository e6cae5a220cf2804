"""Issue 30: ``--enable-hisparse`` (and ``--hisparse-config``) planned or refused as SGLang 0.5.23 does.

* DeepSeek-V3.2 and GLM-5.1 (DSA without state layers) start with it. SGLang's side is the models contract
  oracle (models_contract_oracle: ServerArgs resolved with the flags, its configurator sizing the pools, the
  pools built on meta and measured): every plan key both ways. HiSparse moves the token pool through the cell
  (``_compute_dsa_indexer_cell_size``: the index K for tokens x ratio, ``HiSparseDSATokenToKVPool``'s
  ``index_buf_size``; the EAGLE draft's KV and indexer over the same logical space) and, with FP8 KV on B200,
  through the DSA backends' HiSparse defaults (flashmla_kv's scaled 528 B row where trtllm's raw row is 512 B).
  ``capacity.hisparse_logical_tokens`` is ``size_full`` of SGLang's ``HiSparseTokenToKVPoolAllocator`` over
  the tokens SGLang sized, with the ratio SGLang parses from ``--hisparse-config``.
* GLM-5.3-Flash (DSA + KDA) passes SGLang's validators and its sizing, then fails building its pools: SGLang's
  own ``_build_token_to_kv_pool_allocator`` over its own ``HybridLinearKVPool`` (both run here on meta) raises
  the AttributeError glm-kv quotes.
* Launches SGLang's validators refuse (radix cache on, topk 2, a backend or dtype off HiSparse's list, decode
  radix, a bad ``--hisparse-config``): glm-kv refuses each, quoting the message SGLang raised.

``host.hisparse_kv_tokens`` / ``_bytes``: the ``MLATokenToKVPoolHost`` ``HiSparseCoordinator`` builds over each
HiSparse pool SGLang built (its arguments, on meta), and its host-memory check's refusal in SGLang's words.

Planted errors (besides a host copy without its padding page, caught by 6 of the host-copy cases): the indexer
without the ratio, the MTP draft without it, the backends' HiSparse arm left out,
and the GLM-5.3-Flash refusal left out each fail these comparisons.
"""
from __future__ import annotations

import contextlib

import pytest

GiB = 1 << 30
H = {"enable_hisparse": True, "disable_radix_cache": True}
# handed to ServerArgs beside the contract oracle's PASS: the HiSparse flags and the ones its checks read
PASSED = ("enable_hisparse", "hisparse_config", "dsa_prefill_backend", "dsa_decode_backend", "disaggregation_mode",
          "disaggregation_decode_enable_radix_cache")
PRE_H200, PRE_B200 = 147_412_123_456, 189_707_837_347
EAGLE4 = {"speculative_algorithm": "EAGLE", "speculative_num_steps": 3, "speculative_eagle_topk": 1,
          "speculative_num_draft_tokens": 4, "draft_weights_bytes": 3 * GiB}

DSA_MODELS = ("deepseek-v3.2", "glm-5.1")
LAUNCHES = [
    ("h200-tp8", {"gpu": "H200", "tp_size": 8, **H, "pre_model_load_bytes": PRE_H200, "weights_bytes": 40 * GiB}),
    ("b200-tp8-fp8-eagle", {"gpu": "B200", "tp_size": 8, **H, **EAGLE4, "pre_model_load_bytes": PRE_B200,
                            "weights_bytes": 60 * GiB, "max_running_requests": 32}),
    ("h200-tp8-fp8-ratio4", {"gpu": "H200", "tp_size": 8, **H, "kv_cache_dtype": "fp8_e4m3",
                             "hisparse_config": '{"host_to_device_ratio": 4}', "pre_model_load_bytes": PRE_H200,
                             "weights_bytes": 40 * GiB}),
    ("b200-tp4-dpattn-nextn-ratio1", {"gpu": "B200", "tp_size": 4, "dp_size": 4, "enable_dp_attention": True, **H,
                                      "speculative_algorithm": "NEXTN", "draft_weights_bytes": 2 * GiB,
                                      "hisparse_config": '{"host_to_device_ratio": 1, "top_k": 1024}',
                                      "pre_model_load_bytes": PRE_B200, "weights_bytes": 90 * GiB,
                                      "max_running_requests": 64}),
    ("h200-tp8-mtt", {"gpu": "H200", "tp_size": 8, **H, "max_total_tokens": 300000, "pre_model_load_bytes": PRE_H200,
                      "weights_bytes": 40 * GiB}),
    ("h200-tp8-decode", {"gpu": "H200", "tp_size": 8, "enable_hisparse": True, "disaggregation_mode": "decode",
                         "pre_model_load_bytes": PRE_H200, "weights_bytes": 40 * GiB}),
    ("h200-tp8-decode-eagle", {"gpu": "H200", "tp_size": 8, "enable_hisparse": True, "disaggregation_mode": "decode",
                               **EAGLE4, "pre_model_load_bytes": PRE_H200, "weights_bytes": 40 * GiB}),
    ("h200-tp8-prefill-cp", {"gpu": "H200", "tp_size": 8, **H, "enable_prefill_cp": True, "cp_strategy": "interleave",
                             "attn_cp_size": 8, "disaggregation_mode": "prefill", "pre_model_load_bytes": PRE_H200,
                             "weights_bytes": 40 * GiB}),
    ("h200-tp8-dpattn-ratio3", {"gpu": "H200", "tp_size": 8, "dp_size": 8, "enable_dp_attention": True, **H,
                                "hisparse_config": '{"host_to_device_ratio": 3}', "pre_model_load_bytes": PRE_H200,
                                "weights_bytes": 40 * GiB}),
]
# launches SGLang's validators (or its config parse) refuse with HiSparse, on every model
REFUSED = [
    ("radix-on", {"gpu": "H200", "tp_size": 8, "enable_hisparse": True}),
    ("topk2", {"gpu": "H200", "tp_size": 8, **H, "speculative_algorithm": "EAGLE", "speculative_num_steps": 3,
               "speculative_eagle_topk": 2, "speculative_num_draft_tokens": 4}),
    ("bf16-flashmla-kv", {"gpu": "H200", "tp_size": 8, **H, "dsa_decode_backend": "flashmla_kv"}),
    ("fp8-trtllm", {"gpu": "B200", "tp_size": 8, **H, "dsa_prefill_backend": "trtllm"}),
    ("fp8-tilelang", {"gpu": "H200", "tp_size": 8, **H, "kv_cache_dtype": "fp8_e4m3", "dsa_prefill_backend": "tilelang",
                      "dsa_decode_backend": "tilelang"}),
    ("decode-radix", {"gpu": "H200", "tp_size": 8, "enable_hisparse": True, "disaggregation_mode": "decode",
                      "disaggregation_decode_enable_radix_cache": True}),
    ("buffer-below-topk", {"gpu": "H200", "tp_size": 8, **H,
                           "hisparse_config": '{"top_k": 2048, "device_buffer_size": 1024}'}),
    ("bad-json", {"gpu": "H200", "tp_size": 8, **H, "hisparse_config": "{ratio"}),
]
READINGS = {"pre_model_load_bytes": PRE_H200, "weights_bytes": 40 * GiB}
HISPARSE_KEYS = ("token.hisparse_host_to_device_ratio", "capacity.hisparse_logical_tokens")


HOST = {"ram": None, "ranks": 1}   # what the host pools' memory check reads (W8: the profile's RAM, its ranks)


def _coordinator_host_pool(kv, alloc):
    """The host copy ``HiSparseCoordinator.__init__`` builds over a HiSparse DSA pool (its arguments), on meta (W8),
    or the error its host-memory check raises."""
    from oracle_memory import meta_host_memory

    from sglang.srt.mem_cache.pool_host.mla import MLATokenToKVPoolHost

    try:
        with meta_host_memory(HOST["ram"], HOST["ranks"]):
            pool = MLATokenToKVPoolHost(
                buffer_info=kv.get_device_pool_infos()[0].buffer_info,
                device_capacity_tokens=kv.size if kv.host_capacity_tokens is None else kv.host_capacity_tokens,
                start_layer=kv.start_layer, end_layer=kv.end_layer, target_layer_num=kv.layer_num,
                host_to_device_ratio=alloc.size_full // alloc._size_hisparse, host_size=0, page_size=kv.page_size,
                layout="layer_first", override_kv_cache_dim=kv.kv_cache_dim)
        return pool.size, pool.size * pool.size_per_token
    except ValueError as e:
        return str(e)


@contextlib.contextmanager
def sglang_with_hisparse(host_pools: list | None = None):
    """The contract oracle with the HiSparse flags handed to ServerArgs, and SGLang's token allocator built over
    every KV pool it builds (the oracle stops at the pool; a launch also builds the allocator over it)."""
    import models_contract_oracle
    from models_contract_oracle import meta_device_module

    from sglang.srt.mem_cache.kv_cache_configurator import KVCacheConfigurator

    real_pass, real_build = models_contract_oracle.PASS, KVCacheConfigurator._build_token_to_kv_pool
    built: list = []

    def build(self, *, sizes, is_dsa_model, is_dsv4_model, req_to_token_pool):
        kv = real_build(self, sizes=sizes, is_dsa_model=is_dsa_model, is_dsv4_model=is_dsv4_model,
                        req_to_token_pool=req_to_token_pool)
        if self.is_draft_worker:   # an MTP draft worker's pool shares the target's allocator (the oracle builds the
            return kv              # draft pools on a decode server too, to resolve its retraction backup)
        with meta_device_module():
            alloc = self._build_token_to_kv_pool_allocator(sizes=sizes, token_to_kv_pool=kv, is_dsv4_model=False,
                                                           req_to_token_pool=req_to_token_pool,
                                                           token_to_kv_pool_allocator=None)
        built.append((sizes.max_total_num_tokens, alloc))
        if type(kv).__name__ == "HiSparseDSATokenToKVPool":
            host.append((sizes.max_total_num_tokens, _coordinator_host_pool(kv, alloc)))
        return kv

    host: list = []
    models_contract_oracle.PASS = real_pass + PASSED
    KVCacheConfigurator._build_token_to_kv_pool = build
    try:
        yield built
    finally:
        if host_pools is not None:
            host_pools.extend(host)
        models_contract_oracle.PASS = real_pass
        KVCacheConfigurator._build_token_to_kv_pool = real_build


def _problems(name: str, launch: dict) -> tuple[list[str], dict, list]:
    from test_models_contract import check

    with sglang_with_hisparse() as built:
        problems, sg = check(name, launch)
    return [p for p in problems if not p.startswith(HISPARSE_KEYS)], sg, built


@pytest.mark.parametrize("name", DSA_MODELS)
@pytest.mark.parametrize("pid,launch", LAUNCHES, ids=[c[0] for c in LAUNCHES])
def test_dsa_models_with_hisparse_agree_key_for_key(sglang_ready, name, pid, launch):
    problems, sg, built = _problems(name, launch)
    assert "errors" not in sg and problems == [], (name, pid, problems)
    assert built and all(type(a).__name__ == "HiSparseTokenToKVPoolAllocator" for _, a in built), built


@pytest.mark.parametrize("name", DSA_MODELS)
@pytest.mark.parametrize("pid,launch", [LAUNCHES[0], LAUNCHES[2], LAUNCHES[3]],
                         ids=[LAUNCHES[i][0] for i in (0, 2, 3)])
def test_logical_tokens_are_sglangs_allocator(sglang_ready, name, pid, launch):
    """capacity.hisparse_logical_tokens: SGLang's allocator's size_full at the token count SGLang sized, the
    ratio from SGLang's own parse of --hisparse-config (the allocators the pool build made agree with it)."""
    import torch

    from test_models_contract import glm_kv_side

    from sglang.srt.mem_cache.allocator.hisparse import HiSparseTokenToKVPoolAllocator
    from sglang.srt.mem_cache.sparsity import factory

    plan, err = glm_kv_side(name, launch)
    assert err is None, err
    _, sg, built = _problems(name, launch)
    real = factory.get_memory
    factory.get_memory = lambda: type("M", (), {"hisparse_config": launch.get("hisparse_config")})()
    try:
        ratio = factory.parse_hisparse_config().host_to_device_ratio
    finally:
        factory.get_memory = real
    assert all(a.size_full == tokens * ratio for tokens, a in built), [(t, a.size_full) for t, a in built]
    kv = type("KV", (), {"register_mapping": lambda self, m: None})()
    alloc = HiSparseTokenToKVPoolAllocator(sg["capacity"]["max_total_num_tokens"], page_size=64,
                                           dtype=torch.bfloat16, device="meta", kvcache=kv, need_sort=False,
                                           host_to_device_ratio=ratio)
    assert plan["token"]["hisparse_host_to_device_ratio"] == ratio
    assert plan["capacity"]["hisparse_logical_tokens"] == alloc.size_full, (plan["capacity"], alloc.size_full)


def test_hisparse_moves_the_pool(sglang_ready):
    """The launches compare something HiSparse changes: SGLang sizes fewer tokens, its index K per token doubles."""
    launch = LAUNCHES[0][1]
    _, on, _ = _problems("deepseek-v3.2", launch)
    _, off, _ = _problems("deepseek-v3.2", {**launch, "enable_hisparse": False})
    assert on["capacity"]["max_total_num_tokens"] < off["capacity"]["max_total_num_tokens"], (on, off)
    assert on["token"]["indexer_bytes_per_token"] == 2 * off["token"]["indexer_bytes_per_token"]


GLM_LAUNCHES = [LAUNCHES[0][1], LAUNCHES[1][1], LAUNCHES[2][1], LAUNCHES[5][1]]


@pytest.mark.parametrize("k", range(len(GLM_LAUNCHES)))
def test_glm_53_flash_is_refused_as_sglang_fails(sglang_ready, k):
    """SGLang resolves and sizes GLM-5.3-Flash with HiSparse, then its allocator fails over its hybrid pool."""
    from test_models_contract import glm_kv_side

    launch = GLM_LAUNCHES[k]
    _, sg, _ = _problems("glm-5.3-flash", launch)
    assert sg.get("errors", {}).get("type") == "AttributeError", sg.get("errors")
    _, err = glm_kv_side("glm-5.3-flash", launch)
    assert err is not None and sg["errors"]["message"] in err.rule, (sg["errors"], err)


@pytest.mark.parametrize("name", DSA_MODELS + ("glm-5.3-flash",))
@pytest.mark.parametrize("pid,launch", REFUSED, ids=[c[0] for c in REFUSED])
def test_hisparse_refusals_are_sglangs(sglang_ready, name, pid, launch):
    """Both refuse, glm-kv quoting the message SGLang raised."""
    from test_models_contract import glm_kv_side

    launch = {**launch, **READINGS}
    _, sg, _ = _problems(name, launch)
    _, err = glm_kv_side(name, launch)
    assert "errors" in sg and err is not None, (name, pid, sg.get("errors"), err)
    said = " ".join(sg["errors"]["message"].split()).strip()
    assert said and said in err.rule, (name, pid, said, err.rule)


def test_non_dsa_model_is_refused_in_sglangs_words(sglang_ready):
    from test_models_contract import glm_kv_side

    launch = {**LAUNCHES[0][1]}
    _, sg, _ = _problems("kimi-k3", launch)
    _, err = glm_kv_side("kimi-k3", launch)
    said = " ".join(sg["errors"]["message"].split()).strip()
    assert err is not None and said in err.rule, (sg["errors"], err)


def _failing(monkeypatch, plant) -> set:
    plant(monkeypatch)
    return {(name, pid) for name in DSA_MODELS for pid, launch in LAUNCHES if _problems(name, launch)[0]}


def _token_plant(field: str):
    """token_ledger with ``field``'s HiSparse ratio taken back out (the cell with it)."""
    import dataclasses

    import glm_kv.ledgers.plan as plan
    import glm_kv.ledgers.token as token

    real = token.token_ledger

    def planted(args, layers=None):
        t = real(args, layers)
        if not (args.hisparse_ratio and getattr(t, field)):
            return t
        v = getattr(t, field) // args.hisparse_ratio
        return dataclasses.replace(t, **{field: v}, cell_size_bytes=t.cell_size_bytes - getattr(t, field) + v)

    return lambda mp: (mp.setattr(token, "token_ledger", planted), mp.setattr(plan, "token_ledger", planted))


def test_planted_indexer_without_ratio_is_caught(sglang_ready, monkeypatch):
    failing = _failing(monkeypatch, _token_plant("indexer_bytes_per_token"))
    ratio_above_1 = {(n, pid) for n in DSA_MODELS for pid, _ in LAUNCHES if "ratio1" not in pid}
    assert failing == ratio_above_1, failing


def test_planted_draft_without_ratio_is_caught(sglang_ready, monkeypatch):
    failing = _failing(monkeypatch, _token_plant("draft_bytes_per_token"))
    eagle = {(n, pid) for n in DSA_MODELS for pid, _ in LAUNCHES if "eagle" in pid}
    assert failing == eagle, failing   # NEXTN's case has ratio 1


def test_planted_backend_arm_left_out_is_caught(sglang_ready, monkeypatch):
    import glm_kv.inputs.resolve as resolve

    failing = _failing(monkeypatch, lambda mp: mp.setattr(resolve, "hisparse_backends", lambda p, kv: None))
    # B200 FP8: trtllm's raw rows where SGLang's HiSparse arm picks flashmla_kv (and refuses trtllm)
    assert {(n, pid) for n in DSA_MODELS for pid in ("b200-tp8-fp8-eagle", "b200-tp4-dpattn-nextn-ratio1")} <= failing


def test_planted_glm_refusal_left_out_is_caught(sglang_ready, monkeypatch):
    import glm_kv.inputs.resolve as resolve
    from test_models_contract import glm_kv_side

    real = resolve.validate_hisparse
    monkeypatch.setattr(resolve, "validate_hisparse", lambda p, dsa, kv, pre, dec, state=False: real(p, dsa, kv, pre, dec))
    _, err = glm_kv_side("glm-5.3-flash", GLM_LAUNCHES[0])
    _, sg, _ = _problems("glm-5.3-flash", GLM_LAUNCHES[0])
    assert err is None and "errors" in sg   # glm-kv would plan a launch SGLang cannot start


CONFIGS = ['{}', '{"host_to_device_ratio": 3}', '{"host_to_device_ratio": 1}', '{"top_k": 1024}',
           '{"top_k": 1024, "device_buffer_size": 1024}', '{"top_k": 4096, "device_buffer_size": 2048}',
           '{"swap_in_block_size": 1024}', '{"swap_in_block_size": 1025}', '{"swap_in_block_size": 0}',
           '{"swap_in_block_size": 9.0}', '{"swap_in_block_size": false}', '{"algorithm": "quest", "x": 1}',
           '{"host_to_device_ratio": 1.5}', '{"host_to_device_ratio": 0}', '{"host_to_device_ratio": "2"}',
           '{"host_to_device_ratio": true}', 'nope', '']


@pytest.mark.parametrize("raw", CONFIGS)
def test_hisparse_config_is_read_as_sglang_reads_it(sglang_ready, raw):
    """glm-kv's ratio and refusals against SGLang's own ``parse_hisparse_config``; a ratio SGLang's parser lets
    through but its allocator cannot size with (a fraction, 0, a string) fails SGLang's allocator too."""
    import torch

    from sglang.srt.mem_cache.allocator.hisparse import HiSparseTokenToKVPoolAllocator
    from sglang.srt.mem_cache.sparsity import factory

    from glm_kv.errors import ProfileError
    from glm_kv.inputs.hisparse import hisparse_ratio
    from glm_kv.inputs.profile import make_profile

    real = factory.get_memory
    factory.get_memory = lambda: type("M", (), {"hisparse_config": raw or None})()
    try:
        theirs = factory.parse_hisparse_config().host_to_device_ratio
        said = None
    except Exception as e:  # noqa: BLE001 - SGLang's refusal
        theirs, said = None, str(e)
    finally:
        factory.get_memory = real
    p = make_profile({"model": "deepseek-ai/DeepSeek-V3.2", "enable_hisparse": True, "disable_radix_cache": True,
                      **({"hisparse_config": raw} if raw else {})}, default_name="x")
    try:
        mine, refused = hisparse_ratio(p), None
    except ProfileError as e:
        mine, refused = None, e.rule
    if said is not None:
        assert refused is not None and said in refused, (raw, said, refused)
        return
    if refused is None:
        assert mine == theirs, (raw, mine, theirs)
        return
    kv = type("KV", (), {"register_mapping": lambda self, m: None})()   # SGLang's parse took it: its allocator fails
    try:   # a ratio below 1 builds, with fewer logical slots than device ones (0: none to schedule)
        alloc = HiSparseTokenToKVPoolAllocator(4096, page_size=64, dtype=torch.bfloat16, device="meta", kvcache=kv,
                                               need_sort=False, host_to_device_ratio=theirs)
        usable = alloc.size_full >= alloc._size_hisparse > 0
    except (TypeError, RuntimeError, ValueError):
        usable = False
    assert not usable, (raw, theirs, refused)


@pytest.mark.parametrize("name", DSA_MODELS)
@pytest.mark.parametrize("pid,launch", [LAUNCHES[0], LAUNCHES[1], LAUNCHES[2]], ids=[LAUNCHES[i][0] for i in range(3)])
def test_host_copy_is_sglangs_coordinator_pool(sglang_ready, name, pid, launch):
    """host.hisparse_kv_tokens / _bytes: glm-kv's host copy at each device size SGLang built (the oracle's pools) is
    the MLATokenToKVPoolHost HiSparseCoordinator builds there; the plan's keys are it at SGLang's sized tokens."""
    from test_models_contract import check, glm_kv_side

    from glm_kv.inputs.profile import make_profile
    from glm_kv.inputs.resolve import resolve
    from glm_kv.ledgers.host import hisparse_host_pool
    from glm_kv.ledgers.plan import plan_from_args

    pools: list = []
    with sglang_with_hisparse(pools):
        problems, sg = check(name, launch)
    assert pools and not [x for x in pools if isinstance(x[1], str)], pools
    plan = plan_from_args(resolve(make_profile({"model": name, **launch})))
    for tokens, theirs in pools:
        assert hisparse_host_pool(plan.profile, tokens, plan.args.hisparse_ratio, plan.token) == theirs, (tokens, theirs)
    d, _ = glm_kv_side(name, launch)
    assert (d["host"]["hisparse_kv_tokens"], d["host"]["hisparse_kv_bytes"]) == hisparse_host_pool(
        plan.profile, sg["capacity"]["max_total_num_tokens"], plan.args.hisparse_ratio, plan.token)


def test_host_copy_refused_where_sglangs_host_memory_check_refuses(sglang_ready, monkeypatch):
    """host_memory_bytes just above SGLang's 10 GiB reserve: its check in the coordinator's host pool refuses, and
    glm-kv refuses in the same words (the numbers are each side's pool at its size)."""
    from test_models_contract import check, glm_kv_side

    launch = {**LAUNCHES[0][1], "host_memory_bytes": (10 << 30) + 8 * 4096}
    monkeypatch.setitem(HOST, "ram", launch["host_memory_bytes"])
    monkeypatch.setitem(HOST, "ranks", 8)
    pools: list = []
    with sglang_with_hisparse(pools):
        check("deepseek-v3.2", launch)
    said = [x[1] for x in pools if isinstance(x[1], str)]
    _, err = glm_kv_side("deepseek-v3.2", launch)
    assert said and err is not None and err.field == "host_memory_bytes", (pools, err)
    assert said[0].split(" Requesting")[0] in err.rule and "Please reduce the size" in err.rule, (said, err.rule)
