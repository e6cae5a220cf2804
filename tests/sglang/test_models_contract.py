"""Issue 31, deliverable 3: every model's whole plan contract against SGLang 0.5.23, capacity from GPU memory.

For each of the six shipped models, a handful of random launches per run (seed: the suite's run seed,
``tests.pytest_glm_kv.run_seed()``, printed in every failure; coverage accumulates across seeds) over
gpu (H200 / B200), tp, DP attention, kv dtype, mamba ssm dtype, max_running_requests (unset too),
page_size, disable_radix_cache, disable_overlap_schedule, chunked_prefill_size, max_total_tokens,
max_mamba_cache_size, the CUDA-graph switches and per-phase backends, and HiCache with hicache_ratio or
hicache_size. The capacity comes FROM GPU MEMORY: the suite states the two hardware readings itself
(``pre_model_load_bytes``: free memory before the weights, ``weights_bytes``: the weights per rank),
SGLang reads them through its own ``get_available_gpu_memory`` and ``_profile_available_bytes``
(models_contract_oracle.py), and glm-kv gets the same numbers as profile fields. SGLang gets the
model's files and the launch flags only; nothing glm-kv computes goes in.

Every plan-contract key is compared both ways: the plan's keys (``profile.*`` inputs aside, a null
value counting as absent) less the engine-only keys below must equal SGLang's keys, then every value
must be equal; a key one side has and the other lacks fails, named. SGLang's own tensors are checked
against its own sizing functions (``checks``). A launch SGLang refuses at start-up (or while sizing
or assembling the pools) must be refused by glm-kv (``ProfileError``), and vice versa.

Compared (where SGLang computes them for the model): model.num_hidden_layers / full_attention_layers /
linear_attention_layers; gpu.sm / memory_bytes; parallel.*; token.kv_cache_dtype, page_size,
cell_size_bytes, kv_cache_dim, kv_storage_dtype, kv_item_bytes, kv_row_bytes, num_full_layers,
kv_bytes_per_token, indexer_bytes_per_token, indexer_page_bytes, indexer_tokens_per_page,
dsa_prefill_backend / dsa_decode_backend (DSA models); request.state_slot_bytes,
state_bytes_per_request, and for the hybrids slots_per_request, mamba_strategy, linear_attn_tp_size,
conv / temporal shapes, dtypes and bytes, num_linear_layers, state_bytes_per_layer,
replayssm_ring_bytes_per_slot; tail.* (rows, bytes_per_row, bytes, num_layers; width, head_dim, dtype
where a tail exists); capacity.mem_fraction_static, available_bytes, rest_bytes,
token_pool_budget_bytes, max_total_num_tokens, max_running_requests, context_length, and for the hybrids
max_mamba_cache_size, mamba_pool_bytes, spec_scratch_bytes; memory.mem_fraction_static;
speculative.draft_tokens; with HiCache host.entries, entry_classes, kv_row_bytes, kv_bytes_per_token,
kv_page_size, indexer_bytes_per_token, indexer_page_bytes, mamba_slot_bytes, mamba_page_size (hybrids),
mem_layout, kv_tokens, kv_bytes, kv_layers, indexer_bytes, mamba_slots, mamba_bytes, total_bytes,
hicache_ratio and the older alias names of the same sizes (kv_host_tokens, ..., total_host_bytes).
A pool SGLang does not build holds nothing: its byte and count keys are 0 on SGLang's side (no
IndexKeyCache: indexer bytes 0; no MambaPool: state bytes 0; no compress tail: tail rows/bytes 0).

Keys SGLang never computes for these models (engine-only; the same tables in tests/sglang/README.md,
section "Keys SGLang never computes per model", kept equal by test_engine_only_tables_in_readme):

ENGINE_ONLY (every launch): labels, inputs echoed back, glm-kv's own splits and the book's answer.
ENGINE_ONLY_NO_STATE (DeepSeek-V3.2, GLM-5.1: no state layers): SGLang builds a plain ReqToTokenPool and
no MambaPool, so no state shape, dtype, strategy, ratio or mamba pool sizing exists.
ENGINE_ONLY_NO_DSA (Kimi-K3, Qwen3.5, Nemotron-3-Super: no DSA indexer): the DSA backends SGLang
resolves are never read for a model without a DSA indexer.
ENGINE_ONLY_NO_TAIL (every model but GLM-5.3-Flash: index_kpool 1 or no indexer): SGLang allocates no
compress-tail tensor, so it has no width, head_dim or dtype.
ENGINE_ONLY_NO_HICACHE (a launch without --enable-hierarchical-cache): SGLang builds no host pool group.
"""
from __future__ import annotations

import random
import time

import pytest

from tests.pytest_glm_kv import run_seed

GiB, MiB = 1 << 30, 1 << 20
MODELS = ["kimi-k3", "qwen3.5-35b-a3b", "nemotron-3-super-120b-a12b-fp8", "deepseek-v3.2", "glm-5.1", "glm-5.3-flash"]
# issue 32: real configs of other architectures SGLang 0.5.23 serves in the families above (Qwen3-Next and
# dense Qwen3.5: GQA + Gated DeltaNet; Nemotron-H dense, Nemotron-3 Nano, Nemotron-3 Ultra's layers_block_type:
# GQA + Mamba-2); fewer launches each (the families' rules are drawn above already), every seed a new draw
MODELS_ADDED = ["qwen3-next-80b-a3b-thinking", "qwen3.5-27b", "nemotron-h-56b-base-8k", "nemotron-3-nano-30b-a3b-bf16",
                "nemotron-3-ultra-550b-a55b-bf16", "qwen3.5-122b-a10b", "qwen3.5-397b-a17b",
                # GQA + JetBlock (issue 32: a new layer kind; SGLang sizes it with Mamba2StateShape.create)
                "jet-nemotron-2b", "jet-nemotron-4b", "gpt-oss-120b", "gpt-oss-20b",
                # Qwen3.6 MoE (GQA + Gated DeltaNet); ModelOpt MIXED_PRECISION checkpoints whose FP8 KV SGLang reads
                # from config.json's kv_cache_scheme (Qwen3.6-27B) or hf_quant_config.json (Nemotron-3.5 Lightning)
                "qwen3.6-35b-a3b", "qwen3.6-27b-nvfp4", "nemotron-3.5-lightning-30b-a3b-nvfp4",
                # more hybrid-SWA models (issue 32): the SWA pool with its own heads / head dims
                "gemma-4-26b-a4b", "mimo-v2-flash", "llama-4-scout-17b-16e-instruct", "llama-4-maverick-17b-128e-instruct"]
# (state layers, DSA indexer, compress tail): facts of the shipped configs, read by neither side here
FACTS = {"kimi-k3": (True, False, False), "qwen3.5-35b-a3b": (True, False, False),
         "nemotron-3-super-120b-a12b-fp8": (True, False, False), "deepseek-v3.2": (False, True, False),
         "glm-5.1": (False, True, False), "glm-5.3-flash": (True, True, True),
         **{name: (True, False, False) for name in MODELS_ADDED},
         **{name: (False, False, False) for name in ("gpt-oss-120b", "gpt-oss-20b", "gemma-4-26b-a4b", "mimo-v2-flash",
                                                     "llama-4-scout-17b-16e-instruct", "llama-4-maverick-17b-128e-instruct")}}  # hybrid SWA
# hybrid SWA (issue 32): the full pool and the SWA pool (HybridSWAPoolConfigurator, SWARequestCapPoolConfigurator)
SWA_MODELS = ("gpt-oss-120b", "gpt-oss-20b", "gemma-4-26b-a4b", "mimo-v2-flash", "llama-4-scout-17b-16e-instruct",
              "llama-4-maverick-17b-128e-instruct")
LAUNCHES_PER_MODEL = 4
LAUNCHES_PER_ADDED_MODEL = 3
GPUS = {"H200": 143771 * MiB, "B200": 183359 * MiB}   # cpu_workarounds.GPU_FACTS, the suite's own table

ENGINE_ONLY: dict[str, str] = {
    "model.name": "a label of the model config file",
    "model.source": "a label",
    "model.model_type": "the config's model_type, echoed",
    "model.family": "glm-kv's name for the layer kinds",
    "gpu.name": "the profile's input, echoed",
    "gpu.memory_source": "a label",
    "gpu.nominal": "a label of glm-kv's GPU table",
    "gpu.integrated": "a label of glm-kv's GPU table",
    "token.kv_layout": "glm-kv's name for the row layout (token.kv_row_bytes, kv_storage_dtype compared)",
    "token.index_kpool": "glm-kv's factor page_size / 64 (token.page_size compared)",
    "token.indexer_row_bytes": "one indexer row before pooling; SGLang stores pages (indexer_page_bytes compared)",
    "token.indexer_bytes_per_token_per_layer": "a per-layer split of a measured total",
    "token.indexer_effective_bytes_per_token_per_layer": "a per-layer split of a measured total",
    "token.indexer_effective_bytes_per_token": "the article's name for token.indexer_bytes_per_token",
    "token.index_groups_per_page": "a compute quantity of sparse attention, no buffer",
    "token.index_topk_groups": "a compute quantity of sparse attention, no buffer",
    "token.draft_bytes_per_token": "the draft's share of cell_size (cell_size_bytes compared)",
    "token.target_cell_size_bytes": "cell_size without the draft (cell_size_bytes compared)",
    "token.dflash_draft_bytes_per_token": "a DFLASH draft's pool; SGLang sizes it only with a draft model loaded",
    "memory.mem_fraction_static_source": "a label",
    "request.spec_scratch_bytes_per_request": "one request's verify scratch; SGLang keeps only the pool total",
    "request.state_kind": "glm-kv's name for the state layer kind",
    "layers.*": "glm-kv's regrouping per layer kind of figures compared under token.* and request.*",
    "notes": "text for the reader",
    "capacity.available_source": "a label",
    "capacity.mamba_pool_source": "a label",
    "capacity.mamba_budget_bytes": "rest x mamba ratio before the integer slot count; not kept by SGLang",
    "capacity.token_pool_bytes": "max_total_num_tokens x cell_size; SGLang keeps no such product",
    "capacity.requested_max_running_requests": "the request count before the caps; SGLang keeps the capped one",
    "capacity.requested_source": "a label",
    "capacity.binding_limit": "glm-kv's explanation of which pool caps the requests",
    "capacity.capped_message": "SGLang prints it as a log line, it returns no value",
    "capacity.mem_fraction_static_source": "a label",
    "capacity.pre_model_load_bytes": "a hardware reading: an input here, given to both sides",
    "capacity.pre_model_load_bytes_source": "a label",
    "capacity.weights_bytes": "a hardware reading: an input here, given to both sides",
    "capacity.weights_bytes_source": "a label",
    "capacity.draft_weights_bytes": "a hardware reading: an input here, given to both sides (0 without a draft)",
    "capacity.weights_estimate_bytes": "glm-kv's checkpoint estimate; SGLang measures weights, never estimates",
    "capacity.requests_fit_at_context": "the book's answer from three compared SGLang figures",
    "capacity.binds_at_context": "which of those three figures is smallest",
    "host.enabled": "the profile's input, echoed",
    "host.hicache_ratio_source": "a label",
    "host.indexer_logged_bytes": "the figure SGLang's log line prints, not a value it returns",
    "host.device_bytes": "the device pools' total the ratio / size split is taken over; SGLang keeps no sum",
}
_NO_STATE_WHY = "no MambaPool: SGLang builds a plain ReqToTokenPool, so this is never computed"
ENGINE_ONLY_NO_STATE: dict[str, str] = {k: _NO_STATE_WHY for k in (
    "request.num_linear_layers", "request.linear_attn_tp_size", "request.conv_state_shape",
    "request.temporal_state_shape", "request.conv_dtype", "request.temporal_dtype", "request.conv_state_bytes",
    "request.temporal_state_bytes", "request.state_bytes_per_layer", "request.mamba_strategy",
    "request.slots_per_request", "request.replayssm_ring_bytes_per_slot", "capacity.max_mamba_cache_size",
    "capacity.mamba_pool_bytes", "capacity.spec_scratch_bytes", "host.mamba_page_size")}
ENGINE_ONLY_NO_DSA: dict[str, str] = {
    "token.dsa_prefill_backend": "no DSA indexer: the backend SGLang resolves is never read",
    "token.dsa_decode_backend": "no DSA indexer: the backend SGLang resolves is never read"}
ENGINE_ONLY_NO_TAIL: dict[str, str] = {k: "no compress tail tensor: nothing has this shape or dtype"
                                       for k in ("tail.width", "tail.head_dim", "tail.dtype")}
ENGINE_ONLY_NO_HICACHE: dict[str, str] = {"host.*": "no host pool group without --enable-hierarchical-cache "
                                                    "(or a decode server's host-pool retraction backup)"}
TABLES = {"ENGINE_ONLY": ENGINE_ONLY, "ENGINE_ONLY_NO_STATE": ENGINE_ONLY_NO_STATE,
          "ENGINE_ONLY_NO_DSA": ENGINE_ONLY_NO_DSA, "ENGINE_ONLY_NO_TAIL": ENGINE_ONLY_NO_TAIL,
          "ENGINE_ONLY_NO_HICACHE": ENGINE_ONLY_NO_HICACHE}


# compared wherever either side has it, host pools or not: a decode server's retraction backup as SGLang resolves it
ALWAYS_COMPARED = ("host.retraction_backup",)


def engine_only(name: str, launch: dict, sg: dict | None = None) -> dict[str, str]:
    """The keys SGLang never computes for this launch; ``sg``: SGLang's answer, whose resolved retraction backup
    (a decode server's ``host_pool``) builds the host pool group without HiCache."""
    state, dsa, tail = FACTS[name]
    out = dict(ENGINE_ONLY)
    host_pools = (launch.get("enable_hierarchical_cache")
                  or (sg or {}).get("host", {}).get("retraction_backup") == "host_pool")
    for cond, table in ((not state, ENGINE_ONLY_NO_STATE), (not dsa, ENGINE_ONLY_NO_DSA),
                        (not tail, ENGINE_ONLY_NO_TAIL), (not host_pools, ENGINE_ONLY_NO_HICACHE)):
        if cond:
            out.update(table)
    return out


def _declared(key: str, table: dict) -> bool:
    return key in table or any(k.endswith(".*") and key.startswith(k[:-1]) for k in table)


def random_launch(rng: random.Random) -> dict:
    """One launch: flags, the GPU, and the suite's two hardware readings (stated here, never computed)."""
    gpu = rng.choice(sorted(GPUS))
    tp = rng.choice([1, 2, 4, 8])
    d: dict = {"gpu": gpu, "tp_size": tp}
    if tp > 1 and rng.random() < 0.25:
        d.update(dp_size=rng.choice([x for x in (2, 4, 8) if tp % x == 0]), enable_dp_attention=True)
    if rng.random() < 0.5:
        d["kv_cache_dtype"] = rng.choice(["auto", "bfloat16", "fp8_e4m3"])
    if rng.random() < 0.25:
        d["mamba_ssm_dtype"] = rng.choice(["float32", "bfloat16"])
    mrr = rng.choice([None, None, 8, 64, 256, 1024])
    if mrr is not None:
        d["max_running_requests"] = mrr
    if rng.random() < 0.3:
        d["page_size"] = rng.choice([1, 16, 32, 64, 128])
    if rng.random() < 0.15:
        d["disable_radix_cache"] = True
    if rng.random() < 0.2:
        d["disable_overlap_schedule"] = True
    if rng.random() < 0.25:
        d["chunked_prefill_size"] = rng.choice([-1, 2048, 4096, 16384])
    if rng.random() < 0.15:
        d["max_total_tokens"] = rng.randrange(1000, 2_000_000)
    if rng.random() < 0.15:
        d["max_mamba_cache_size"] = rng.randrange(20, 2000)
    if rng.random() < 0.3:
        flag = rng.choice(["disable_cuda_graph", "disable_decode_cuda_graph", "disable_prefill_cuda_graph",
                           "cuda_graph_backend_decode", "cuda_graph_backend_prefill"])
        d[flag] = rng.choice(["full", "breakable", "disabled"]) if flag.startswith("cuda_graph_backend") else True
    if rng.random() < 0.35:
        d["enable_hierarchical_cache"] = True
        if rng.random() < 0.5:
            d["hicache_ratio"] = round(rng.uniform(0.5, 3.0), 2)
        else:
            d["hicache_size"] = rng.randrange(20, 400)
    mem = GPUS[gpu]
    d["pre_model_load_bytes"] = mem - rng.randrange(300, 4000) * MiB - rng.randrange(0, MiB)
    # mostly weights that fit, sometimes more than the device leaves (both sides must refuse)
    top = 0.7 if rng.random() < 0.85 else 1.0
    d["weights_bytes"] = rng.randrange(2 * GiB, int(mem * top)) + rng.randrange(0, MiB)
    return d


def launches(name: str, seed: int, n: int = LAUNCHES_PER_MODEL) -> list[dict]:
    rng = random.Random(f"{seed}:{name}")
    out = [random_launch(rng) for _ in range(n)]
    # --enable-two-batch-overlap (issue 30), drawn apart so the launches above stay what each seed gave before:
    # refused without DP attention, else the prefill graph SGLang drops before the fraction
    tbo = random.Random(f"{seed}:{name}:two-batch-overlap")
    for d in out:
        if tbo.random() < 0.15:
            d["enable_two_batch_overlap"] = True
    # EAGLE / NEXTN with the model's own MTP layers (issue 31), drawn apart too, for the configs that declare them
    spec = random.Random(f"{seed}:{name}:speculative")
    for d in out:
        if name in MTP_MODELS and spec.random() < 0.4:
            d.update(speculative_spec(spec))
    # --enable-linear-replayssm-spec (issue 31), on every model: a ring per KDA slot, fixed request scratch for
    # Gated DeltaNet / JetBlock, nothing for Mamba-2 and attention-only models (their verify scratch stays)
    rep = random.Random(f"{seed}:{name}:replayssm")
    for d in out:
        if rep.random() < 0.2:
            d["enable_linear_replayssm_spec"] = True
            if rep.random() < 0.3:
                d["linear_replayssm_cache_len"] = rep.choice([8, 32, 64])
    # context parallel (issue 31): an attention CP width, prefill CP with a strategy (or none: SGLang refuses)
    cp = random.Random(f"{seed}:{name}:context-parallel")
    for d in out:
        if cp.random() < 0.2:
            if cp.random() < 0.7:
                d["attn_cp_size"] = cp.choice([c for c in (2, 4, 8) if d["tp_size"] % c == 0] or [1])
            if cp.random() < 0.6:
                d["enable_prefill_cp"] = True
                d["cp_strategy"] = cp.choice(["interleave", "interleave", "zigzag", None])
    # hybrid SWA (issue 32), drawn apart too: --swa-full-tokens-ratio (the SWA pool's share of the full pool's
    # tokens; small ratios reach SGLang's "cannot hold even one request") and --disable-hybrid-swa-memory
    swa_draw = random.Random(f"{seed}:{name}:swa")
    for d in out:
        if name in SWA_MODELS:
            if swa_draw.random() < 0.5:
                d["swa_full_tokens_ratio"] = swa_draw.choice([0.01, 0.1, 0.25, 0.5, 1.0, round(swa_draw.uniform(0.05, 1), 3)])
            if swa_draw.random() < 0.25:
                d["disable_hybrid_swa_memory"] = True
            if swa_draw.random() < 0.3:   # PD (a decode server's request cap); HiCache there: both refuse
                d["disaggregation_mode"] = swa_draw.choice(["prefill", "decode"])
                if d["disaggregation_mode"] == "decode" and swa_draw.random() < 0.3:
                    d["disaggregation_decode_extra_slots"] = swa_draw.choice([0, 5, 64])
    # a decode server's retraction backup (issue 30 / 32 follow-up), drawn apart too: host_pool builds the host pools
    # without HiCache (compared key for key), priority preemption or the decode radix cache keep cpu_tensor
    back = random.Random(f"{seed}:{name}:retraction")
    for d in out:
        if d.get("disaggregation_mode") == "decode" and back.random() < 0.5:
            d.update(back.choice([{"enable_priority_scheduling": True},
                                  {"enable_priority_scheduling": True, "disable_priority_preemption": True},
                                  {"disaggregation_decode_host_receive_threshold": back.choice([0.0, 0.5, 1.0])},
                                  {"disaggregation_decode_retraction_backup": back.choice(["cpu_tensor", "host_pool", "none"])},
                                  {"disaggregation_decode_enable_radix_cache": True}]))
    return out


# configs that declare MTP layers (num_nextn_predict_layers, or Qwen3.5's mtp_num_hidden_layers), and Qwen3-Next,
# whose released checkpoints ship one (its config names no count; SGLang's ModelConfig rewrites it to its MTP draft)
MTP_MODELS = ("deepseek-v3.2", "glm-5.1", "glm-5.3-flash", "qwen3.5-35b-a3b", "nemotron-3-super-120b-a12b-fp8",
              "qwen3-next-80b-a3b-thinking", "qwen3.5-27b", "nemotron-3-ultra-550b-a55b-bf16", "qwen3.5-122b-a10b",
              "qwen3.5-397b-a17b", "qwen3.6-35b-a3b", "qwen3.6-27b-nvfp4", "nemotron-3.5-lightning-30b-a3b-nvfp4")


def speculative_spec(rng: random.Random) -> dict:
    """EAGLE with its three counts, or NEXTN with SGLang's defaults; the draft's weights a stated reading."""
    if rng.random() < 0.5:
        steps = rng.choice([1, 2, 3, 5])
        d = {"speculative_algorithm": "EAGLE", "speculative_num_steps": steps, "speculative_eagle_topk": 1,
             "speculative_num_draft_tokens": steps + 1}
    else:
        d = {"speculative_algorithm": "NEXTN"}
    d["draft_weights_bytes"] = rng.randrange(1 * GiB, 12 * GiB) + rng.randrange(0, MiB)
    return d


def glm_kv_side(name: str, launch: dict):
    """(contract dict, None) or (None, the ProfileError) for the launch as a profile."""
    from glm_kv.errors import ProfileError
    from glm_kv.inputs.profile import make_profile
    from glm_kv.ledgers.plan import load_plan

    try:
        return load_plan(make_profile({"model": name, **launch})).to_dict(), None
    except ProfileError as e:
        return None, e


def _norm(v):
    return list(v) if isinstance(v, tuple) else v


def contract_problems(name: str, launch: dict, plan: dict | None, err, sg: dict) -> list[str]:
    """Refused alike, else every key both ways and every value; each problem names its key."""
    from compare import NO_REST_WORDS, leaves

    if err is not None or "errors" in sg:
        if err is not None and "errors" in sg:
            said = sg["errors"]["message"]
            if said.startswith(NO_REST_WORDS) and said not in err.rule:   # the fraction that would do, in its words
                return [f"errors: glm-kv's refusal ({err.field}: {err.rule}) lacks SGLang's words ({said})"]
            return []
        if err is not None:
            return [f"errors: glm-kv refuses ({err.field}: {err.rule}); SGLang starts"]
        return [f"errors: SGLang refuses ({sg['errors']['stage']}: {sg['errors']['message'][:300]} "
                f"at {sg['errors']['where']}); glm-kv starts"]
    declared = engine_only(name, launch, sg)
    ours = {k: v for k, v in leaves(plan).items()
            if not k.startswith("profile.") and v is not None
            and (not _declared(k, declared) or k in ALWAYS_COMPARED)}
    theirs = {k: v for k, v in leaves(sg).items() if not k.startswith("checks.") and v is not None}
    problems = [f"sglang-self-check {k}: tensors {got!r} != sizing {want!r}"
                for k, (got, want) in sg.get("checks", {}).items() if got != want]
    problems += [f"{k}: only glm-kv has it ({ours[k]!r})" for k in sorted(set(ours) - set(theirs))]
    problems += [f"{k}: only SGLang has it ({theirs[k]!r})" for k in sorted(set(theirs) - set(ours))]
    problems += [f"{k}: glm-kv {ours[k]!r} != SGLang {theirs[k]!r}" for k in sorted(set(ours) & set(theirs))
                 if _norm(ours[k]) != _norm(theirs[k])]
    return problems


def check(name: str, launch: dict, sg: dict | None = None) -> tuple[list[str], dict]:
    from models_contract_oracle import sglang_contract

    plan, err = glm_kv_side(name, launch)
    sg = sglang_contract(name, launch) if sg is None else sg
    return contract_problems(name, launch, plan, err, sg), sg


def planted(monkeypatch, name: str, launch: dict, plant) -> list[str]:
    """The launch agrees before the plant (SGLang asked once), then the planted glm-kv's problems."""
    clean, sg = check(name, launch)
    assert clean == [], clean
    plant(monkeypatch)
    return check(name, launch, sg)[0]


@pytest.mark.parametrize("name", MODELS + MODELS_ADDED)
def test_random_launches_agree_key_for_key(sglang_ready, name):
    seed = run_seed()
    failures, summary, t0 = [], [], time.time()
    n = LAUNCHES_PER_ADDED_MODEL if name in MODELS_ADDED else LAUNCHES_PER_MODEL
    for i, launch in enumerate(launches(name, seed, n)):
        problems, sg = check(name, launch)
        summary.append("refused" if "errors" in sg else f"{len(problems)} problems")
        if problems:
            failures.append(f"launch {i} {launch}:\n    " + "\n    ".join(problems))
    assert not failures, (f"seed {seed} (reproduce: GLM_KV_SEED={seed}), {name}, "
                          f"{time.time() - t0:.1f} s:\n" + "\n".join(failures))


# launches the random draw found disagreeing, checked on every run (fixed since in glm_kv)
_B200 = {"gpu": "B200", "pre_model_load_bytes": 189_707_837_347, "weights_bytes": 60 * GiB}
PLANT_H200 = {"gpu": "H200", "pre_model_load_bytes": 147_412_123_456, "weights_bytes": 40 * GiB}
# seed 11: nothing left after the mamba pool (a code-3 / code-4 refusal): SGLang says "Loaded weights leave no GPU
# memory" there too, naming its minimum fraction; glm-kv's refusal quotes it
NO_REST_AFTER_MAMBA = [
    ("glm-5.3-flash", {"gpu": "H200", "tp_size": 2, "dp_size": 2, "enable_dp_attention": True,
                       "kv_cache_dtype": "bfloat16", "max_running_requests": 256, "disable_overlap_schedule": True,
                       "max_mamba_cache_size": 1110, "enable_hierarchical_cache": True, "hicache_size": 399,
                       "pre_model_load_bytes": 147_121_024_760, "weights_bytes": 11_053_342_035,
                       "speculative_algorithm": "NEXTN", "draft_weights_bytes": 8_212_773_445, "attn_cp_size": 2,
                       "enable_prefill_cp": True, "cp_strategy": "zigzag"}),
    ("qwen3-next-80b-a3b-thinking", {"gpu": "H200", "tp_size": 4, "max_running_requests": 256,
                                     "disable_radix_cache": True, "chunked_prefill_size": 4096,
                                     "max_total_tokens": 1_246_421, "pre_model_load_bytes": 147_059_344_278,
                                     "weights_bytes": 125_659_064_321, "speculative_algorithm": "NEXTN",
                                     "draft_weights_bytes": 8_386_289_888}),
]
FOUND = NO_REST_AFTER_MAMBA + [
    # seed 1488805360: SGLang's auto strategy reads --page-size as given (the Blackwell backend's 64-token
    # page comes after it): no_buffer, which trtllm_mha (Nemotron's Blackwell default) refuses
    ("nemotron-3-super-120b-a12b-fp8", {**_B200, "tp_size": 1, "max_running_requests": 8,
                                        "disable_overlap_schedule": True}),
    ("nemotron-3-super-120b-a12b-fp8", {**_B200, "tp_size": 4, "disable_overlap_schedule": True, "page_size": 1}),
    # ... and Kimi-K3 (trtllm_mla) starts with no_buffer on 64-token pages: 3 slots per request, not 4
    ("kimi-k3", {**_B200, "tp_size": 4, "disable_overlap_schedule": True}),
    # with --page-size 64 given the strategy sees paging: extra_buffer
    ("nemotron-3-super-120b-a12b-fp8", {**_B200, "tp_size": 4, "disable_overlap_schedule": True, "page_size": 64}),
    # seed 1189594772: Qwen3.5 on SM100, the qwen3_5 override sets page 1 before the strategy pass (no_buffer)
    ("qwen3.5-35b-a3b", {**_B200, "tp_size": 4, "page_size": 128, "disable_overlap_schedule": True}),
    # fresh-clone seed 1435354290: ... and trtllm_mha on 64-token pages with the radix cache off
    ("qwen3.5-35b-a3b", {**_B200, "tp_size": 1, "page_size": 128, "disable_radix_cache": True,
                         "max_running_requests": 256}),
    # issue 32, seed 12: MiMo-V2 prefill CP takes zigzag only (refused alike); with zigzag it starts
    ("mimo-v2-flash", {**PLANT_H200, "tp_size": 2, "disable_radix_cache": True, "attn_cp_size": 2,
                       "enable_prefill_cp": True, "cp_strategy": "interleave", "disaggregation_mode": "prefill"}),
    ("mimo-v2-flash", {**PLANT_H200, "tp_size": 2, "disable_radix_cache": True, "attn_cp_size": 2,
                       "enable_prefill_cp": True, "cp_strategy": "zigzag", "disaggregation_mode": "prefill"}),
]
# --enable-two-batch-overlap under DP attention, every model (issue 30): SGLang drops the breakable prefill
# graph before the fraction (MLA's flat 1.5 GiB, the other backends' 8 MiB per capture size; Kimi-K3's KDA
# rule already drops it), and without DP attention refuses it
_H200_DPA_TBO = {"gpu": "H200", "tp_size": 8, "dp_size": 8, "enable_dp_attention": True,
                 "enable_two_batch_overlap": True, "pre_model_load_bytes": 147_412_123_456, "weights_bytes": 40 * GiB}
TWO_BATCH_OVERLAP = [(name, _H200_DPA_TBO) for name in MODELS] + [
    ("qwen3.5-35b-a3b", {**_H200_DPA_TBO, "dp_size": 1, "enable_dp_attention": False}),
    ("deepseek-v3.2", {**_B200, "tp_size": 4, "dp_size": 4, "enable_dp_attention": True,
                       "enable_two_batch_overlap": True}),
    # found by a random launch (CI seed 1411162953): zigzag DSA prefill CP sets --moe-a2a-backend deepep
    # (model_overrides/deepseek_v2.py), so two-batch overlap starts without DP attention
    ("glm-5.1", {"gpu": "H200", "tp_size": 8, "max_running_requests": 64, "enable_two_batch_overlap": True,
                 "attn_cp_size": 8, "enable_prefill_cp": True, "cp_strategy": "zigzag",
                 "pre_model_load_bytes": 148_677_318_418, "weights_bytes": 88_936_918_953}),
    ("glm-5.1", {"gpu": "H200", "tp_size": 8, "max_running_requests": 64, "enable_two_batch_overlap": True,
                 "attn_cp_size": 8, "enable_prefill_cp": True, "cp_strategy": "interleave",
                 "pre_model_load_bytes": 148_677_318_418, "weights_bytes": 88_936_918_953}),
]


@pytest.mark.parametrize("name, launch", TWO_BATCH_OVERLAP, ids=[f"{n}-{i}" for i, (n, _) in enumerate(TWO_BATCH_OVERLAP)])
def test_two_batch_overlap_agrees_key_for_key(sglang_ready, name, launch):
    problems, _ = check(name, launch)
    assert problems == [], problems


@pytest.mark.parametrize("name, launch", FOUND, ids=[f"{n}-{i}" for i, (n, _) in enumerate(FOUND)])
def test_found_launches_agree_key_for_key(sglang_ready, name, launch):
    problems, _ = check(name, launch)
    assert problems == [], problems


# ---- planted errors: the comparison catches each, naming the key (fixed launches, not random)
PLANT = {"gpu": "H200", "tp_size": 8, "pre_model_load_bytes": 147_412_123_456, "weights_bytes": 40 * GiB}


def test_a_planted_mla_row_is_caught(sglang_ready, monkeypatch):
    """Planted: one byte more per MLA row; caught in token.* and the capacity it sizes (Kimi-K3)."""
    from glm_kv.ledgers import layers

    problems = planted(monkeypatch, "kimi-k3", PLANT, lambda mp: mp.setattr(
        layers.MlaKv, "bytes_per_token", property(lambda s: s.kv_cache_dim * s.item_bytes + 1)))
    keys = {p.split(":")[0] for p in problems}
    assert {"token.cell_size_bytes", "token.kv_row_bytes", "capacity.max_total_num_tokens"} <= keys, problems


def test_a_planted_multimodal_reservation_is_caught(sglang_ready, monkeypatch):
    """Planted: no multimodal reservation: Qwen3.5's rest from GPU memory moves."""
    import glm_kv.ledgers.memory as memory

    problems = planted(monkeypatch, "qwen3.5-35b-a3b", PLANT,
                       lambda mp: mp.setattr(memory, "mm_reservation_gib", lambda multimodal: 0.0))
    assert any(p.startswith("capacity.rest_bytes:") for p in problems), problems


def test_a_planted_host_size_is_caught(sglang_ready, monkeypatch):
    """Planted: --hicache-size given whole to each host pool (no split): caught for a hybrid (Nemotron)."""
    import glm_kv.ledgers.host as host

    real = host.host_size
    problems = planted(monkeypatch, "nemotron-3-super-120b-a12b-fp8",
                       {**PLANT, "enable_hierarchical_cache": True, "hicache_size": 100},
                       lambda mp: mp.setattr(host, "host_size", lambda cap, page, ratio, size_gb, per: real(
                           cap, page, ratio, 100 if size_gb else 0, per)))
    assert any(p.startswith("host.kv_tokens:") for p in problems), problems


def test_a_planted_acceptance_is_caught(sglang_ready, monkeypatch):
    """Planted: glm-kv accepts weights that leave no memory (SGLang refuses while sizing)."""
    import glm_kv.ledgers.plan as plan_module

    real = plan_module.pools_budget

    def lenient(p, gpu, mem):
        try:
            return real(p, gpu, mem)
        except Exception:   # noqa: BLE001 - the planted error: no refusal
            return GiB, "planted", 1.0

    problems = planted(monkeypatch, "deepseek-v3.2", {**PLANT, "weights_bytes": 140 * GiB},
                       lambda mp: mp.setattr(plan_module, "pools_budget", lenient))
    assert problems and problems[0].startswith("errors: SGLang refuses"), problems


@pytest.mark.parametrize("name, launch", NO_REST_AFTER_MAMBA, ids=[n for n, _ in NO_REST_AFTER_MAMBA])
def test_a_planted_refusal_without_sglangs_words_is_caught(sglang_ready, monkeypatch, name, launch):
    """Planted: nothing left after the mamba pool refused in glm-kv's words only (max_mamba_cache_size for the
    given cap, available_bytes for the budget's): caught, SGLang's words named."""
    import glm_kv.ledgers.capacity as capacity
    from compare import NO_REST_WORDS

    _, sg = check(name, launch)
    assert sg["errors"]["message"].startswith(NO_REST_WORDS), sg   # SGLang refuses, in those words
    problems = planted(monkeypatch, name, launch, lambda mp: mp.setattr(capacity, "NO_REST_CODES", frozenset()))
    assert problems and "lacks SGLang's words" in problems[0], problems


def test_a_planted_legacy_only_nemotron_reading_is_caught(sglang_ready, monkeypatch):
    """Planted (issue 32): glm-kv reads hybrid_override_pattern only, as before; Nemotron-3 Ultra's config has
    layers_block_type alone, so glm-kv refuses it where SGLang's NemotronHConfig starts."""
    import glm_kv.ledgers.model_layers as model_layers

    real = model_layers.nemotron_pattern
    problems = planted(monkeypatch, "nemotron-3-ultra-550b-a55b-bf16", PLANT, lambda mp: mp.setattr(
        model_layers, "nemotron_pattern",
        lambda t, where: real({k: v for k, v in t.items() if k != "layers_block_type"}, where)))
    assert problems and problems[0].startswith("errors: glm-kv refuses (model.hybrid_override_pattern"), problems


LIGHTNING = "nemotron-3.5-lightning-30b-a3b-nvfp4"


def test_lightning_is_refused_alike_in_sglangs_words(sglang_ready):
    """Nemotron-3.5-Lightning-NVFP4 as shipped (config.json without quantization_config, MIXED_PRECISION in
    hf_quant_config.json): SGLang 0.5.23's nemotron_h override fails on every launch, and glm-kv refuses it
    quoting SGLang's message."""
    launch = {**PLANT, "tp_size": 1}
    plan, err = glm_kv_side(LIGHTNING, launch)
    from models_contract_oracle import sglang_contract

    sg = sglang_contract(LIGHTNING, launch)
    assert sg["errors"]["stage"] == "server_args" and "nemotron_h.py" in sg["errors"]["where"], sg
    assert plan is None and err.field == "model" and sg["errors"]["message"] in err.rule, (err, sg)


def lightning_with_quantization_config(folder) -> str:
    """The same checkpoint with hf_quant_config.json's ModelOpt section written into config.json as
    ``quantization_config`` (the flat form a ModelOpt export also takes, as Qwen3.6-27B-NVFP4's config.json
    carries it): SGLang then starts, and its pools size Lightning's layers."""
    import json

    from models_oracle import MODELS as MODELS_DIR, STEMS

    stem = STEMS[LIGHTNING]
    cfg = json.loads((MODELS_DIR / f"{stem}_config.json").read_text())
    quant = json.loads((MODELS_DIR / f"{stem}_hf_quant_config.json").read_text())["quantization"]
    cfg["quantization_config"] = {**quant, "quant_method": "modelopt"}
    (folder / "config.json").write_text(json.dumps(cfg))
    return str(folder)


def test_lightning_layers_agree_key_for_key_when_sglang_starts(sglang_ready, tmp_path):
    """Random launches of Lightning with its quantization in config.json: every key both ways (FP8 KV from
    kv_cache_quant_algo, 52 layers: 23 Mamba-2 with 8 groups, 6 attention)."""
    from models_contract_oracle import sglang_contract

    path = lightning_with_quantization_config(tmp_path)
    seed, failures = run_seed(), []
    for i, launch in enumerate(launches(LIGHTNING + ":config-json", seed, LAUNCHES_PER_ADDED_MODEL)):
        plan, err = glm_kv_side(path, launch)
        sg = sglang_contract(path, launch)
        problems = contract_problems(LIGHTNING, launch, plan, err, sg)
        if problems:
            failures.append(f"launch {i} {launch}:\n    " + "\n    ".join(problems))
    assert not failures, f"seed {seed} (reproduce: GLM_KV_SEED={seed}):\n" + "\n".join(failures)


def test_a_planted_start_of_lightning_is_caught(sglang_ready, monkeypatch):
    """Planted: glm-kv forgets SGLang's nemotron_h override refusal; it starts where SGLang refuses."""
    import glm_kv.inputs.resolve as resolve

    monkeypatch.setattr(resolve, "refuse_model_override", lambda cfg: None)
    problems, _ = check(LIGHTNING, {**PLANT, "tp_size": 1})
    assert problems and problems[0].startswith("errors: SGLang refuses (server_args:"), problems


def test_a_planted_kv_cache_scheme_reading_is_caught(sglang_ready, monkeypatch):
    """Planted: glm-kv reads kv_cache_quant_algo only (as before issue 32); Qwen3.6-27B-NVFP4 states its FP8 KV
    as kv_cache_scheme in config.json, which SGLang's ModelOptMixedPrecisionConfig reads: --kv-cache-dtype auto
    is fp8_e4m3 there, bfloat16 here."""
    from glm_kv.inputs.hf_config import HfConfig

    problems = planted(monkeypatch, "qwen3.6-27b-nvfp4", {**PLANT, "kv_cache_dtype": "auto"}, lambda mp: mp.setattr(
        HfConfig, "kv_cache_quant_algo", property(lambda s: (s.top.get("quantization_config") or {}).get(
            "kv_cache_quant_algo"))))
    keys = {p.split(":")[0] for p in problems}
    assert {"token.kv_cache_dtype", "token.cell_size_bytes", "capacity.max_total_num_tokens"} <= keys, problems


# gpt-oss-120b (hybrid SWA, issue 32) on fixed launches the draw reaches only sometimes: B200's 64-token pages,
# --max-total-tokens re-deriving both pools, and the request-cap SWA pool (SWARequestCapPoolConfigurator)
SWA_LAUNCHES = [
    {**PLANT},
    {**_B200, "tp_size": 4, "max_total_tokens": 1_000_003},
    {**PLANT, "max_running_requests": 64, "disable_radix_cache": True},
    {**PLANT, "max_running_requests": 256, "disable_radix_cache": True, "disable_overlap_schedule": True,
     "chunked_prefill_size": 4096, "enable_dp_attention": True, "dp_size": 2},
    {**PLANT, "kv_cache_dtype": "fp8_e4m3", "page_size": 16},
    # --swa-full-tokens-ratio and --disable-hybrid-swa-memory (issue 32): the split moves, or the SWA pool goes
    {**PLANT, "swa_full_tokens_ratio": 0.5},
    {**_B200, "tp_size": 4, "swa_full_tokens_ratio": 1.0, "max_total_tokens": 1_000_003},
    {**PLANT, "swa_full_tokens_ratio": 0.123, "page_size": 64, "kv_cache_dtype": "fp8_e4m3"},
    {**PLANT, "swa_full_tokens_ratio": 0.25, "max_running_requests": 64, "disable_radix_cache": True},   # cap: inert
    {**PLANT, "disable_hybrid_swa_memory": True},
    {**_B200, "tp_size": 2, "disable_hybrid_swa_memory": True, "swa_full_tokens_ratio": 0.3,
     "max_running_requests": 64, "disable_radix_cache": True},
    # HiCache (issue 32): _SwaStrategy's KV + SWA host pools, by ratio and by --hicache-size (split over both
    # device pools' bytes), and without the SWA pool the plain KV host pool
    {**PLANT, "enable_hierarchical_cache": True, "hicache_ratio": 1.5},
    {**PLANT, "enable_hierarchical_cache": True, "hicache_size": 100, "swa_full_tokens_ratio": 0.4},
    {**_B200, "tp_size": 4, "enable_hierarchical_cache": True, "hicache_size": 250, "kv_cache_dtype": "fp8_e4m3"},
    {**PLANT, "enable_hierarchical_cache": True, "hicache_ratio": 2.5, "disable_hybrid_swa_memory": True},
    # PD disaggregation (issue 32): a decode server runs without the radix cache, so a request cap sizes its SWA
    # pool (compute_swa_request_cap: (window + page) per pre-allocated row, no prefill chunk); a prefill server
    # as a co-located one
    {**PLANT, "disaggregation_mode": "decode", "max_running_requests": 64},                       # 15
    {**PLANT, "disaggregation_mode": "decode", "max_running_requests": 256, "disaggregation_decode_extra_slots": 9,
     "page_size": 64},
    {**PLANT, "disaggregation_mode": "decode"},                                  # no cap given: the ratio path
    {**PLANT, "disaggregation_mode": "decode", "max_running_requests": 64, "disaggregation_decode_enable_radix_cache": True},
    {**PLANT, "disaggregation_mode": "prefill", "max_running_requests": 64, "disable_radix_cache": True},
    # seed 11: prefill CP on a decode server is refused by SGLang's DSA override only; gpt-oss starts
    {**_B200, "tp_size": 4, "max_running_requests": 8, "page_size": 64, "attn_cp_size": 4, "enable_prefill_cp": True,
     "cp_strategy": "zigzag", "disable_hybrid_swa_memory": True, "disaggregation_mode": "decode"},
]


@pytest.mark.parametrize("launch", SWA_LAUNCHES, ids=[str(i) for i in range(len(SWA_LAUNCHES))])
def test_gpt_oss_fixed_launches_agree_key_for_key(sglang_ready, launch):
    problems, sg = check("gpt-oss-120b", launch)
    assert "errors" not in sg and problems == [], (problems, sg.get("errors"))


# more hybrid-SWA models (issue 32), each on a few fixed launches: its own SWA heads / head dims across TP widths,
# fp8 KV and big pages, the ratio, no SWA pool, HiCache's two host pools and a PD decode server's request cap
SWA_MORE_LAUNCHES = [
    {**PLANT},
    {**PLANT, "tp_size": 2, "kv_cache_dtype": "fp8_e4m3", "page_size": 64},
    {**_B200, "tp_size": 4, "swa_full_tokens_ratio": 0.3, "max_total_tokens": 1_000_003},
    {**PLANT, "tp_size": 1, "weights_bytes": 50 * GiB, "disable_hybrid_swa_memory": True},
    {**PLANT, "tp_size": 4, "enable_hierarchical_cache": True, "hicache_size": 100},
    {**PLANT, "disaggregation_mode": "decode", "max_running_requests": 64, "disaggregation_decode_extra_slots": 9},
]
SWA_MORE = [(name, launch) for name in ("gemma-4-26b-a4b", "mimo-v2-flash", "llama-4-scout-17b-16e-instruct",
                                        "llama-4-maverick-17b-128e-instruct")
            for launch in SWA_MORE_LAUNCHES]


@pytest.mark.parametrize("name,launch", SWA_MORE, ids=[f"{n}-{i % len(SWA_MORE_LAUNCHES)}"
                                                       for i, (n, _) in enumerate(SWA_MORE)])
def test_more_swa_models_fixed_launches_agree_key_for_key(sglang_ready, name, launch):
    problems, sg = check(name, launch)
    assert "errors" not in sg and problems == [], (problems, sg.get("errors"))


def test_a_planted_gemma4_swa_first_reading_is_caught(sglang_ready, monkeypatch):
    """Planted: Gemma-4's config read as it is written (SWA-first: head_dim 256 / 8 KV heads for every layer,
    global_head_dim and num_global_key_value_heads ignored), not as SGLang flips it at load."""
    import glm_kv.ledgers.model_layers as model_layers
    import glm_kv.tensors.model_pools as model_pools

    def plant(mp):
        mp.setattr(model_layers, "sglang_swa_view", lambda cfg: cfg)
        mp.setattr(model_pools, "sglang_swa_view", lambda cfg: cfg)
    problems = planted(monkeypatch, "gemma-4-26b-a4b", {**PLANT, "tp_size": 2}, plant)
    keys = {p.split(":")[0] for p in problems}
    assert {"token.cell_size_bytes", "capacity.max_total_num_tokens"} <= keys, problems


def test_a_planted_mimo_symmetric_swa_row_is_caught(sglang_ready, monkeypatch):
    """Planted: MiMo-V2-Flash's SWA rows with V as wide as K (swa_v_head_dim 128 dropped: 192 both)."""
    import glm_kv.ledgers.model_layers as model_layers
    from glm_kv.inputs import swa

    def plant(mp):
        def view(cfg):
            v = swa.sglang_swa_view(cfg)
            return dataclasses_replace(v, text={k: x for k, x in v.text.items() if k != "swa_v_head_dim"})
        mp.setattr(model_layers, "sglang_swa_view", view)
    problems = planted(monkeypatch, "mimo-v2-flash", PLANT, plant)
    keys = {p.split(":")[0] for p in problems}
    assert {"token.swa_kv_bytes_per_token", "token.cell_size_bytes", "capacity.max_total_num_tokens"} <= keys, problems


def test_a_planted_mimo_window_read_as_gpt_oss_is_caught(sglang_ready, monkeypatch):
    """Planted: MiMo-V2-Flash's window as gpt-oss's (sliding_window - 1: 127), not ModelConfig's 128."""
    import glm_kv.ledgers.model_layers as model_layers

    problems = planted(monkeypatch, "mimo-v2-flash", PLANT, lambda mp: mp.setattr(
        model_layers, "sliding_window_size", lambda cfg, where: cfg.text["sliding_window"] - 1))
    assert "token.sliding_window_size" in {p.split(":")[0] for p in problems}, problems


def test_a_planted_llama4_split_off_by_one_is_caught(sglang_ready, monkeypatch):
    """Planted: Llama-4's full layers counted from 0 (i % 4 == 0: 0, 4, ...) rather than get_hybrid_layer_ids'
    (i + 1) % 4 == 0 (3, 7, ...): the same counts per pool, other layer ids."""
    from glm_kv.inputs import swa

    problems = planted(monkeypatch, "llama-4-scout-17b-16e-instruct", PLANT, lambda mp: mp.setattr(
        swa, "llama4_layer_types", lambda t: ["full_attention" if i % 4 == 0 else "sliding_attention"
                                              for i in range(t["num_hidden_layers"])]))
    assert "model.full_attention_layers" in {p.split(":")[0] for p in problems}, problems


def test_a_planted_llama4_window_is_caught(sglang_ready, monkeypatch):
    """Planted: Llama-4's chunk read minus one (8191), as the classes with a window method give theirs."""
    import glm_kv.ledgers.model_layers as model_layers

    real = model_layers.sliding_window_size
    problems = planted(monkeypatch, "llama-4-scout-17b-16e-instruct", PLANT, lambda mp: mp.setattr(
        model_layers, "sliding_window_size", lambda cfg, where: real(cfg, where) - 1))
    assert "token.sliding_window_size" in {p.split(":")[0] for p in problems}, problems


def test_a_planted_swa_layer_in_the_full_pool_is_caught(sglang_ready, monkeypatch):
    """Planted: gpt-oss's sliding-window layers kept in the full pool (glm-kv before issue 32) but one."""
    import glm_kv.ledgers.model_layers as model_layers

    problems = planted(monkeypatch, "gpt-oss-120b", PLANT, lambda mp: mp.setattr(
        model_layers, "swa_layer_types", lambda t, where: ["full_attention"] * 35 + ["sliding_attention"]))
    keys = {p.split(":")[0] for p in problems}
    assert {"model.full_attention_layers", "token.num_full_layers", "token.cell_size_bytes",
            "capacity.max_total_num_tokens"} <= keys, problems


def test_a_planted_swa_ratio_is_caught(sglang_ready, monkeypatch):
    """Planted: the SWA pool as large as the full pool (ratio 1, no --swa-full-tokens-ratio given)."""
    import dataclasses

    import glm_kv.inputs.profile as profile

    spec = profile.FIELDS["swa_full_tokens_ratio"]
    problems = planted(monkeypatch, "gpt-oss-120b", PLANT, lambda mp: mp.setitem(
        profile.FIELDS, "swa_full_tokens_ratio", dataclasses.replace(spec, default=1.0)))
    keys = {p.split(":")[0] for p in problems}
    assert {"token.swa_full_tokens_ratio", "token.cell_size_bytes", "capacity.swa_max_total_num_tokens"} <= keys, \
        problems


def test_a_planted_ignored_swa_ratio_is_caught(sglang_ready, monkeypatch):
    """Planted: --swa-full-tokens-ratio read but the fallback 0.8 used (the flag dropped as before issue 32)."""
    import glm_kv.ledgers.token as token

    problems = planted(monkeypatch, "gpt-oss-120b", {**PLANT, "swa_full_tokens_ratio": 0.5},
                       lambda mp: mp.setattr(token, "swa_full_tokens_ratio", lambda p: 0.8))
    keys = {p.split(":")[0] for p in problems}
    assert {"token.swa_full_tokens_ratio", "token.cell_size_bytes", "capacity.max_total_num_tokens",
            "capacity.swa_max_total_num_tokens"} <= keys, problems


def test_a_planted_ignored_disable_hybrid_swa_memory_is_caught(sglang_ready, monkeypatch):
    """Planted: --disable-hybrid-swa-memory dropped (the SWA pool kept): SGLang builds one full pool of 36 layers."""
    import glm_kv.ledgers.model_layers as model_layers

    real = model_layers.cache_args
    problems = planted(monkeypatch, "gpt-oss-120b", {**PLANT, "disable_hybrid_swa_memory": True},
                       lambda mp: mp.setattr(model_layers, "cache_args",
                                             lambda args: dataclasses_replace(real(args), hybrid_swa=True)))
    keys = {p.split(":")[0] for p in problems}
    assert {"model.full_attention_layers", "token.num_full_layers", "token.cell_size_bytes",
            "capacity.max_total_num_tokens", "capacity.swa_max_total_num_tokens"} <= keys, problems


def test_a_planted_decode_cap_as_colocated_is_caught(sglang_ready, monkeypatch):
    """Planted: a decode server's SWA request cap taken as a co-located server's (prefill chunks, no extra rows)."""
    import glm_kv.ledgers.plan as plan_module

    real = plan_module.swa_request_cap
    problems = planted(monkeypatch, "gpt-oss-120b", SWA_LAUNCHES[15], lambda mp: mp.setattr(
        plan_module, "swa_request_cap", lambda **k: real(**{**k, "decode_server": False})))
    keys = {p.split(":")[0] for p in problems}
    assert {"capacity.swa_max_total_num_tokens", "capacity.max_total_num_tokens"} <= keys, problems


def test_a_planted_unsplit_swa_host_size_is_caught(sglang_ready, monkeypatch):
    """Planted: --hicache-size split over the full pool alone (the SWA device pool left out of the shares)."""
    import glm_kv.ledgers.plan as plan_module

    real = plan_module.host_ledger
    problems = planted(monkeypatch, "gpt-oss-120b", SWA_LAUNCHES[12], lambda mp: mp.setattr(
        plan_module, "host_ledger", lambda *a, **k: real(*a, **{**k, "swa_device_tokens": 0})))
    keys = {p.split(":")[0] for p in problems}
    assert {"host.kv_tokens", "host.swa_tokens", "host.swa_bytes"} <= keys, problems


@pytest.mark.parametrize("launch", [SWA_LAUNCHES[0], SWA_LAUNCHES[2]], ids=["ratio", "request-cap"])
def test_swa_prefix_tails_is_inert_for_gpt_oss(sglang_ready, launch):
    """--swa-prefix-tails (DeepSeek-V4's request-cap headroom): SGLang's whole contract for gpt-oss is the same
    with and without it, so glm-kv lists it as inert (swa.refuse_swa_flags refuses only a negative count)."""
    from models_contract_oracle import sglang_contract

    without = sglang_contract("gpt-oss-120b", launch)
    assert "errors" not in without and sglang_contract("gpt-oss-120b", {**launch, "swa_prefix_tails": 7}) == without


def dataclasses_replace(obj, **changes):
    import dataclasses

    return dataclasses.replace(obj, **changes)


def test_a_planted_ratio_pool_under_the_request_cap_is_caught(sglang_ready, monkeypatch):
    """Planted: the ratio path where SGLang sizes the SWA pool from the request cap."""
    import glm_kv.ledgers.plan as plan_module

    problems = planted(monkeypatch, "gpt-oss-120b", SWA_LAUNCHES[2],
                       lambda mp: mp.setattr(plan_module, "_swa_cap", lambda args, tok: None))
    keys = {p.split(":")[0] for p in problems}
    assert {"capacity.swa_max_total_num_tokens", "capacity.max_total_num_tokens"} <= keys, problems


def test_key_sets_are_compared_both_ways():
    """A key one side lacks fails, named, on either side; a declared engine-only key does not."""
    launch = {"gpu": "H200"}
    plan = {"profile": {"x": 1}, "token": {"page_size": 1, "kv_layout": "bf16"}, "host": {"entries": ["kv"]}}
    assert contract_problems("kimi-k3", launch, plan, None, {"token": {"page_size": 1}}) == []
    assert contract_problems("kimi-k3", launch, {"token": {"page_size": 1, "new": 2}}, None,
                             {"token": {"page_size": 1}}) == ["token.new: only glm-kv has it (2)"]
    assert contract_problems("kimi-k3", launch, {"token": {}}, None,
                             {"token": {"page_size": 1}}) == ["token.page_size: only SGLang has it (1)"]
    assert contract_problems("kimi-k3", {"enable_hierarchical_cache": True}, plan, None,
                             {"token": {"page_size": 1}}) == ["host.entries: only glm-kv has it (['kv'])"]


def test_engine_only_tables_in_readme():
    """tests/sglang/README.md lists exactly these engine-only tables, key for key."""
    import re
    from pathlib import Path

    text = (Path(__file__).parent / "README.md").read_text()
    section = text.split("## Keys SGLang never computes per model", 1)[1].split("\n## ", 1)[0]
    for table, keys in TABLES.items():
        part = section.split(f"### {table}\n", 1)[1].split("\n### ", 1)[0]
        listed = set(re.findall(r"^\| `([a-z_.*]+)` \|", part, flags=re.M))
        assert listed == set(keys), (table, sorted(listed - set(keys)), sorted(set(keys) - listed))


# ---- speculative decoding with the model's own MTP layers (issue 31): pinned launches, then planted errors
_SPEC = {"speculative_algorithm": "NEXTN", "draft_weights_bytes": 3 * GiB}
SPECULATIVE = [
    ("deepseek-v3.2", {**PLANT, **_SPEC}),                                   # NextN layer + indexer in cell_size
    ("glm-5.1", {**PLANT, **_SPEC, "enable_hierarchical_cache": True}),      # packed into the host KV + indexer pools
    ("qwen3.5-35b-a3b", {**_B200, "tp_size": 4, **_SPEC}),   # no NextN count: no draft in cell_size; triton, page 1
    ("qwen3.5-27b", {**PLANT, "tp_size": 2, **_SPEC, "enable_hierarchical_cache": True}),   # ... but packed in the host
    ("nemotron-3-super-120b-a12b-fp8", {**_B200, "tp_size": 4, **_SPEC, "disable_overlap_schedule": True}),   # page 64,
    # extra_buffer (model_overrides/nemotron_h.py); on H200 with HiCache the draft reads the FP8 KV quant too
    ("nemotron-3-super-120b-a12b-fp8", {**PLANT, **_SPEC, "enable_hierarchical_cache": True}),
    ("qwen3-next-80b-a3b-thinking", {**_B200, "tp_size": 4, "speculative_algorithm": "EAGLE", "speculative_num_steps": 2,
                                     "speculative_eagle_topk": 2, "speculative_num_draft_tokens": 4,
                                     "draft_weights_bytes": GiB}),   # tree verify: triton on page 1, SGLang starts
]


@pytest.mark.parametrize("name, launch", SPECULATIVE, ids=[f"{n}-{i}" for i, (n, _) in enumerate(SPECULATIVE)])
def test_speculative_launches_agree_key_for_key(sglang_ready, name, launch):
    problems, sg = check(name, launch)
    assert "errors" not in sg and problems == [], problems


def test_kimi_k3_without_mtp_layers_is_refused_though_sglang_sizes_it(sglang_ready):
    """A declared difference: Kimi-K3's config has num_nextn_predict_layers 0 and SGLang 0.5.23 rewrites no
    KimiK3 target to an MTP draft; its sizing starts (no draft layer in cell_size) but the draft worker would
    load the target's own architecture. glm-kv refuses, naming the config's count."""
    problems, sg = check("kimi-k3", {**PLANT, **_SPEC})
    assert "errors" not in sg and problems == ["errors: glm-kv refuses (speculative_algorithm: the model config has no "
                                               "MTP layer (num_nextn_predict_layers is 0, no mtp_num_hidden_layers)); "
                                               "SGLang starts"], problems


def test_gpt_oss_eagle_without_a_draft_is_refused_though_sglang_sizes_it(sglang_ready):
    """A declared difference (issue 32), as Kimi-K3's: gpt-oss's config names no MTP layer, so EAGLE / NEXTN
    without a draft checkpoint would load the target as its own draft; SGLang's sizing starts (no draft layer in
    the SWA cell), glm-kv refuses naming the config's count. Its drafts are planned as DFLASH / DSPARK checkpoints
    (draft_checkpoint_launches)."""
    problems, sg = check("gpt-oss-120b", {**PLANT, **_SPEC})
    assert "errors" not in sg and problems == ["errors: glm-kv refuses (speculative_algorithm: the model config has no "
                                               "MTP layer (num_nextn_predict_layers is 0, no mtp_num_hidden_layers)); "
                                               "SGLang starts"], problems


def test_a_planted_draft_in_the_cell_is_caught(sglang_ready, monkeypatch):
    """Planted: Qwen3.5's MTP layer folded into the cell size (its config names no NextN count, SGLang folds none)."""
    import glm_kv.inputs.resolve as resolve_module
    from glm_kv.inputs.hf_config import HfConfig

    problems = planted(monkeypatch, "qwen3.5-35b-a3b", {**_B200, "tp_size": 4, **_SPEC}, lambda mp: mp.setattr(
        HfConfig, "num_nextn_predict_layers", property(lambda s: 1)))
    assert any(p.startswith("token.cell_size_bytes:") for p in problems), problems
    assert resolve_module.MTP_WITHOUT_COUNT   # the rewrite list the plant bypasses


def test_a_planted_unpacked_draft_is_caught(sglang_ready, monkeypatch):
    """Planted: no draft layer packed into the host pools (SGLang packs the draft worker's own layer)."""
    import glm_kv.ledgers.host as host

    real = host.host_ledger
    problems = planted(monkeypatch, "qwen3.5-27b", {**PLANT, "tp_size": 2, **_SPEC, "enable_hierarchical_cache": True},
                       lambda mp: mp.setattr("glm_kv.ledgers.plan.host_ledger",
                                             lambda *a, **k: real(*a, **{**k, "draft_layers": 0})))
    assert any(p.startswith("host.kv_layers:") for p in problems), problems


def test_a_planted_trtllm_under_nextn_is_caught(sglang_ready, monkeypatch):
    """Planted: Qwen3.5 under NEXTN on B200 given trtllm_mha's 64-token pages (SGLang: triton, page 1)."""
    import glm_kv.inputs.resolve as resolve_module

    problems = planted(monkeypatch, "qwen3.5-35b-a3b", {**_B200, "tp_size": 4, **_SPEC},
                       lambda mp: mp.setattr(resolve_module, "mha_default_is_trtllm", lambda p: True))
    assert any(p.startswith("token.page_size:") for p in problems), problems


# ---- ReplaySSM (issue 31): where the ring sits for each state kind, then a planted error
_REPLAY = {**PLANT, "tp_size": 4, **_SPEC, "max_running_requests": 64, "enable_linear_replayssm_spec": True}
REPLAYSSM = [
    ("qwen3.5-35b-a3b", _REPLAY),                                   # GDN: fixed request scratch, K from the rest
    ("qwen3-next-80b-a3b-thinking", {**_REPLAY, "tp_size": 8, "dp_size": 2, "enable_dp_attention": True,
                                     "linear_replayssm_cache_len": 32}),   # per DP worker
    ("jet-nemotron-2b", {**PLANT, "tp_size": 2, "max_running_requests": 32, "enable_linear_replayssm_spec": True}),
    ("kimi-k3", {**PLANT, "tp_size": 4, "max_running_requests": 32, "enable_linear_replayssm_spec": True}),   # KDA: per slot
    ("nemotron-3-super-120b-a12b-fp8", _REPLAY),                    # Mamba-2: no ring, the verify scratch stays
    ("deepseek-v3.2", _REPLAY),                                     # no state layer: inert
    ("qwen3.5-27b", {**PLANT, "tp_size": 2, "enable_linear_replayssm_spec": True}),   # no max_running_requests: SGLang's TypeError
    # seed 6: --hicache-size splits over MambaPool's bytes, which hold the ring over the CAPPED requests (+1)
    ("qwen3.5-397b-a17b", {"gpu": "B200", "tp_size": 1, "kv_cache_dtype": "fp8_e4m3", "max_running_requests": 256,
                           "page_size": 64, "disable_overlap_schedule": True, "chunked_prefill_size": 4096,
                           "disable_cuda_graph": True, "enable_hierarchical_cache": True, "hicache_size": 96,
                           "pre_model_load_bytes": 191318201100, "weights_bytes": 43139301329,
                           "enable_linear_replayssm_spec": True, "linear_replayssm_cache_len": 8}),
]


@pytest.mark.parametrize("name, launch", REPLAYSSM, ids=[f"{n}-{i}" for i, (n, _) in enumerate(REPLAYSSM)])
def test_replayssm_launches_agree_key_for_key(sglang_ready, name, launch):
    problems, _ = check(name, launch)
    assert problems == [], problems


def test_a_planted_gdn_ring_per_slot_is_caught(sglang_ready, monkeypatch):
    """Planted: Gated DeltaNet's fixed ring scratch left out (the slots take the whole state budget)."""
    import glm_kv.ledgers.plan as plan_module

    problems = planted(monkeypatch, "qwen3.5-35b-a3b", _REPLAY,
                       lambda mp: mp.setattr(plan_module, "replayssm_fixed_bytes", lambda args, layers=None: 0))
    assert any(p.startswith("capacity.max_mamba_cache_size:") for p in problems), problems


# ---- context parallel (issue 31): SGLang's widths and refusals per model, then a planted error
CONTEXT_PARALLEL = [
    ("qwen3.5-35b-a3b", {**PLANT, "attn_cp_size": 2}),                                   # attention TP 4: state / 4
    ("kimi-k3", {**PLANT, "attn_cp_size": 2, "enable_prefill_cp": True, "cp_strategy": "zigzag"}),
    ("glm-5.1", {**PLANT, "attn_cp_size": 2, "enable_prefill_cp": True, "cp_strategy": "zigzag"}),   # DSA: TP-wide CP
    ("deepseek-v3.2", {**PLANT, "enable_prefill_cp": True, "cp_strategy": "interleave"}),   # no width: TP-wide CP
    ("deepseek-v3.2", {**PLANT, "attn_cp_size": 2, "enable_prefill_cp": True, "cp_strategy": "zigzag"}),   # refused
    ("glm-5.3-flash", {**PLANT, "enable_prefill_cp": True, "cp_strategy": "interleave"}),   # CP-TP group sharing
    ("nemotron-3-super-120b-a12b-fp8", {**PLANT, "attn_cp_size": 2}),                    # refused
    ("qwen3-next-80b-a3b-thinking", {**PLANT, "enable_prefill_cp": True}),               # refused: no strategy
]


@pytest.mark.parametrize("name, launch", CONTEXT_PARALLEL, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CONTEXT_PARALLEL)])
def test_context_parallel_launches_agree_key_for_key(sglang_ready, name, launch):
    problems, _ = check(name, launch)
    assert problems == [], problems


def test_a_planted_narrow_dsa_prefill_cp_is_caught(sglang_ready, monkeypatch):
    """Planted: a DSA model's prefill CP kept at the width the user gave (SGLang widens it to the TP group)."""
    import glm_kv.inputs.resolve as resolve_module

    problems = planted(monkeypatch, "glm-5.1", {**PLANT, "attn_cp_size": 2, "enable_prefill_cp": True,
                                                "cp_strategy": "zigzag"},
                       lambda mp: mp.setattr(resolve_module, "resolve_dsa_prefill_cp", lambda p, facts: p))
    assert any(p.startswith("parallel.attn_tp_size:") for p in problems), problems


# ---- DFLASH / DSPARK draft checkpoints for every model (issue 31): pinned launches with drafts written here,
# shaped as SGLang reads them (test_flags_dflash.DRAFT: five Qwen3-style layers), each target's vocabulary
def _draft(tmp_path, name: str, arch: str, vocab: int, target_layers: int, dflash_config: dict) -> str:
    import json

    from test_flags_dflash import DRAFT

    d = tmp_path / name
    d.mkdir()
    (d / "config.json").write_text(json.dumps({**DRAFT, "architectures": [arch], "vocab_size": vocab,
                                               "num_target_layers": target_layers, "dflash_config": dflash_config}))
    return str(d)


def draft_checkpoint_launches(tmp_path) -> list[tuple[str, dict]]:
    from test_flags_dspark import DSPARK_CFG

    def dflash(name, vocab, layers, **over):
        path = _draft(tmp_path, name, "DFlashDraftModel", vocab, layers, {"block_size": 5, "mask_token_id": vocab - 300})
        return {**PLANT, "draft_weights_bytes": 2 * GiB, "speculative_algorithm": "DFLASH",
                "speculative_draft_model_path": path, **over}

    def dspark(name, vocab, layers, **over):
        path = _draft(tmp_path, name, "DSparkDraftModel", vocab, layers, {**DSPARK_CFG, "mask_token_id": vocab - 300})
        return {**PLANT, "draft_weights_bytes": 2 * GiB, "speculative_algorithm": "DSPARK",
                "speculative_draft_model_path": path, **over}

    return [
        ("qwen3.5-35b-a3b", dflash("q1", 248320, 40)),
        ("qwen3.5-35b-a3b", dflash("q2", 248320, 40, enable_hierarchical_cache=True)),   # the draft's host sidecar
        ("qwen3.5-35b-a3b", dspark("q3", 248320, 40)),
        # a non-KDA hybrid's request pool refuses the ring with a draft checkpoint (kv_cache_configurator.py)
        ("qwen3.5-35b-a3b", dflash("q4", 248320, 40, enable_linear_replayssm_spec=True, max_running_requests=32)),
        ("kimi-k3", dflash("k1", 163840, 93, enable_linear_replayssm_spec=True, max_running_requests=32)),
        ("deepseek-v3.2", dflash("d1", 129280, 61, enable_hierarchical_cache=True)),
        ("deepseek-v3.2", dspark("d2", 129280, 61, gpu="B200", pre_model_load_bytes=189_707_837_347)),
        # the draft worker's KV dtype is the server's flag over the draft's own: bf16 beside the FP8 KV quant
        ("nemotron-3-super-120b-a12b-fp8", dflash("n1", 131072, 88)),
        ("nemotron-3-super-120b-a12b-fp8", dflash("n2", 131072, 88, kv_cache_dtype="fp8_e4m3",
                                                  enable_hierarchical_cache=True)),
        # gpt-oss (hybrid SWA, issue 32): the draft's pool in the SWA cell; its draft tokens in the request cap
        # (overlap: twice them; spec-v1: page-aligned); its HiCache sidecar beside the KV and SWA host pools
        ("gpt-oss-120b", dflash("g1", 201088, 36)),                                                     # 9
        ("gpt-oss-120b", dflash("g2", 201088, 36, max_running_requests=64, disable_radix_cache=True)),   # 10
        ("gpt-oss-120b", dflash("g3", 201088, 36, max_running_requests=32, disable_radix_cache=True,
                                disable_overlap_schedule=True, chunked_prefill_size=4096)),
        ("gpt-oss-120b", dspark("g4", 201088, 36, enable_hierarchical_cache=True, hicache_ratio=1.5)),
        ("gpt-oss-120b", dflash("g5", 201088, 36, disaggregation_mode="decode", max_running_requests=32,
                                swa_full_tokens_ratio=0.5)),
        ("gpt-oss-20b", dflash("g6", 201088, 24, gpu="B200", pre_model_load_bytes=189_707_837_347, tp_size=2)),
    ]


def test_draft_checkpoint_launches_agree_key_for_key(sglang_ready, tmp_path):
    bad = []
    for i, (name, launch) in enumerate(draft_checkpoint_launches(tmp_path)):
        problems, _ = check(name, launch)
        bad += [f"{i} {name}: {p}" for p in problems]
    assert bad == [], bad


def test_a_planted_swa_cell_without_the_draft_is_caught(sglang_ready, tmp_path, monkeypatch):
    """Planted (issue 32): gpt-oss's SWA cell without the DFLASH draft's rows (SGLang adds _draft_cell_size)."""
    import glm_kv.ledgers.token as token

    name, launch = draft_checkpoint_launches(tmp_path)[9]
    real = token.token_ledger

    def no_draft(args, layers=None):
        import dataclasses

        return real(dataclasses.replace(args, draft_kv_bytes_per_token=0), layers)

    problems = planted(monkeypatch, name, launch, lambda mp: mp.setattr("glm_kv.ledgers.plan.token_ledger", no_draft))
    keys = {p.split(":")[0] for p in problems}
    assert {"token.cell_size_bytes", "capacity.max_total_num_tokens"} <= keys, problems


def test_a_planted_request_cap_without_draft_tokens_is_caught(sglang_ready, tmp_path, monkeypatch):
    """Planted (issue 32): the SWA request cap of a DFLASH launch counted as without speculative decoding."""
    import glm_kv.ledgers.plan as plan_module

    name, launch = draft_checkpoint_launches(tmp_path)[10]
    real = plan_module.swa_request_cap
    problems = planted(monkeypatch, name, launch, lambda mp: mp.setattr(
        plan_module, "swa_request_cap", lambda **k: real(**{**k, "draft_tokens": 0})))
    assert any(p.startswith("capacity.swa_max_total_num_tokens:") for p in problems), problems


def test_a_planted_draft_kv_dtype_is_caught(sglang_ready, tmp_path, monkeypatch):
    """Planted: the DFLASH draft's KV in the target's resolved dtype (Nemotron's FP8 KV quant), not the server's."""
    import glm_kv.inputs.resolve as resolve_module

    name, launch = draft_checkpoint_launches(tmp_path)[7]
    real = resolve_module.draft_kv_bytes_per_token
    problems = planted(monkeypatch, name, launch, lambda mp: mp.setattr(
        resolve_module, "draft_kv_bytes_per_token", lambda draft, tp, item: real(draft, tp, 1)))
    assert any(p.startswith("token.cell_size_bytes:") for p in problems), problems
