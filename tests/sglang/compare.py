"""Key-by-key comparison of `glm_kv.ledgers.plan.build_plan` with what SGLang 0.5.23 says (oracle.py)."""

from __future__ import annotations

import json
import platform
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
REPORT_PATH = REPO / "book" / "_static" / "sglang-agreement.json"

# Plan-contract keys (plus a few extra keys the engine offers) and why each is SGLang's:
# "measured" = bytes/shapes read from SGLang's pool tensors on CPU; "function" = SGLang's
# own sizing/resolution function; "resolved" = ServerArgs resolution.
KEYS: dict[str, str] = {
    "model.num_hidden_layers": "function: ModelConfig.num_hidden_layers (SGLang's reading of config.json)",
    "model.full_attention_layers": "measured: DSATokenToKVPool.full_attention_layer_id_mapping",
    "model.linear_attention_layers": "function: mamba2_cache_params.layers",
    "gpu.sm": "input fact (profile GPU)",
    "gpu.memory_bytes": "input fact (profile GPU)",
    "parallel.attn_dp_size": "function: get_parallel().attn_dp_size after ServerArgs resolution",
    "parallel.attn_tp_size": "function: get_parallel().attn_tp_size",
    "parallel.linear_attn_tp_size": "function: runtime_context.linear_attn_tp_size()",
    "parallel.max_running_requests_per_worker": "function: max(1, resolved max_running_requests // attn_dp)",
    "token.kv_cache_dtype": "resolved: _dsa_kv_cache_dtype_default",
    "token.dsa_prefill_backend": "resolved: _dsa_split_backend_resolution",
    "token.dsa_decode_backend": "resolved: _dsa_split_backend_resolution",
    "token.page_size": "resolved: _deepseek_family_overrides (64 x index_kpool)",
    "token.kv_cache_dim": "function: calculate_mla_kv_cache_dim (= kv_buffer.shape[-1], checked)",
    "token.kv_storage_dtype": "measured: DSATokenToKVPool.kv_buffer dtype (uint8 for fp8)",
    "token.kv_item_bytes": "measured: kv_buffer element size",
    "token.kv_row_bytes": "measured: DSATokenToKVPool.kv_buffer row",
    "token.num_full_layers": "measured: len(DSATokenToKVPool.kv_buffer)",
    "token.kv_bytes_per_token": "measured: kv_buffer bytes / token",
    "token.indexer_bytes_per_token": "measured: IndexKeyCache bytes / token",
    "token.indexer_page_bytes": "measured: IndexKeyCache row bytes",
    "token.indexer_tokens_per_page": "measured: DSATokenToKVPool.page_size",
    "token.cell_size_bytes": "function: DefaultPoolConfigurator._cell_size",
    "request.linear_attn_tp_size": "function: runtime_context.linear_attn_tp_size()",
    "request.conv_state_shape": "measured: MambaPool conv state",
    "request.conv_state_bytes": "measured: MambaPool conv states, bytes per slot and layer",
    "request.temporal_state_bytes": "measured: MambaPool temporal state, bytes per slot and layer",
    "request.state_bytes_per_layer": "measured: conv + temporal bytes per slot and layer",
    "request.temporal_state_shape": "measured: MambaPool temporal state",
    "request.conv_dtype": "measured",
    "request.temporal_dtype": "measured",
    "request.num_linear_layers": "measured",
    "request.state_slot_bytes": "measured: MambaPool bytes / slot (= mamba_cache_per_req, checked)",
    "request.slots_per_request": "function: KVCacheConfigurator._calculate_mamba_ratio",
    "request.state_bytes_per_request": "measured slot bytes x slots per request",
    "request.mamba_strategy": "resolved: _mamba_radix_cache_resolution",
    "request.replayssm_ring_bytes_per_slot": "function: replayssm_ring_bytes_per_req (0 without the flag)",
    "tail.rows": "measured: _compress_tail_k rows (requests + 2), at the resolved requests",
    "tail.width": "measured: _compress_tail_k width",
    "tail.head_dim": "measured: _compress_tail_k last dimension",
    "tail.dtype": "measured: _compress_tail_k dtype",
    "tail.num_layers": "measured: _compress_tail_k layers with rows",
    "tail.bytes_per_row": "measured: tail k + score bytes / row",
    "tail.bytes": "measured: rows x bytes per row",
    "capacity.available_bytes": "function: _profile_available_bytes (rest before the mamba pool)",
    "capacity.max_mamba_cache_size": "function: _handle_max_mamba_cache",
    "capacity.mamba_pool_bytes": "function: (K + 1) x mamba_cache_per_req",
    "capacity.spec_scratch_bytes": "function: _handle_max_mamba_cache (verify scratch)",
    "capacity.token_pool_budget_bytes": "function: rest after the mamba pool",
    "capacity.max_total_num_tokens": "function: config_from_budget",
    "capacity.context_length": "function: ModelConfig.context_len (the context the pools are sized for)",
    "memory.mem_fraction_static": "function: ServerArgs resolution (memory_hook's default-fraction heuristic)",
    "capacity.max_running_requests": "function: resolve_max_num_reqs",
    "host.entries": "measured: build_hybrid_mamba_stack HostPoolGroup entries",
    "host.entry_classes": "measured: host pool classes",
    "host.kv_row_bytes": "measured: MLATokenToKVPoolHost size_per_token / layers",
    "host.kv_bytes_per_token": "measured: MLATokenToKVPoolHost size_per_token",
    "host.kv_page_size": "measured",
    "host.indexer_bytes_per_token": "measured: DSAIndexerPoolHost size_per_token",
    "host.mamba_slot_bytes": "measured: MambaPoolHost size_per_token",
    "host.mamba_page_size": "measured",
    "host.mem_layout": "resolved: hicache_mem_layout",
    "speculative.draft_tokens": "resolved: speculative_num_draft_tokens (0 without an algorithm)",
}

# Oracle keys no plan key matches, each with why and where else it is looked at.
SGLANG_ONLY: dict[str, str] = {
    "token.pool_classes": "the device pool classes SGLang builds; the plan names none (it names the host "
                          "pool classes, host.entry_classes); kept in the report",
    "resolved.mem_fraction_static": "the plan states the fraction only under capacity.*; compared in "
                                    "test_memory_agreement (resolved.mem_fraction_static vs the memory ledger)",
    "resolved.disable_overlap_schedule": "no plan key; its effect is compared as request.slots_per_request",
    "resolved.max_running_requests": "no plan key for the global value; compared per worker as "
                                     "parallel.max_running_requests_per_worker",
    "resolved.speculative_num_draft_tokens": "compared as speculative.draft_tokens",
    "resolved.speculative_num_steps": "the plan keeps the draft token count only (speculative.draft_tokens)",
    "resolved.speculative_eagle_topk": "the plan keeps the draft token count only (speculative.draft_tokens)",
    "resolved.context_len": "the plan has no resolved context length (profile.context_length is an input); "
                            "it enters capacity.max_running_requests when that is automatic",
    "capacity.available_source": "a label saying where the bytes came from, not a value",
}

# Keys of glm-kv's plan that SGLang never computes: (why no counterpart, how else it is checked).
# tests/sglang/README.md lists the same table; `test_engine_only_table_in_readme` keeps them equal.
# Keys compared with SGLang by test_memory_agreement (compare_memory.KEYS) are not listed here.
ENGINE_ONLY: dict[str, tuple[str, str]] = {
    "memory.mem_fraction_static_source": ("a label: the profile's fraction or SGLang's default",
                                          "memory.mem_fraction_static compared"),
    "request.spec_scratch_bytes_per_request": ("the verify scratch one request reserves; SGLang keeps only the "
                                               "pool's total", "tests/sglang/test_flags_plan_keys.py (SGLang's "
                                               "_handle_max_mamba_cache at two request caps)"),
    "capacity.requests_fit_at_context": ("the book's answer: the smallest of three SGLang figures; SGLang "
                                         "never computes it", "max_running_requests, max_total_num_tokens, "
                                         "max_mamba_cache_size, slots_per_request and context_length compared"),
    "capacity.binds_at_context": ("which of those three is smallest (the book's 'binds')",
                                  "the same three figures compared"),
    "model.name": ("a label of the model config file", "tests/test_inputs (config loading)"),
    "model.source": ("a label", "none needed"),
    "gpu.name": ("the profile's input, echoed", "tests/inputs (GPU table)"),
    "gpu.memory_source": ("a label", "none needed"),
    "gpu.nominal": ("a label of the GPU table: the memory figure is the vendor's, not a CUDA printout",
                    "tests/inputs (GPU table sources)"),
    "gpu.integrated": ("a label of the GPU table: memory shared with the CPU (GB10)",
                       "tests/inputs (GPU table sources)"),
    "token.dflash_draft_bytes_per_token": ("the DFLASH draft's KV per token (0 without DFLASH); SGLang sizes "
                                           "it only with a draft model loaded",
                                           "tests/sglang/test_flags_dflash.py (SGLang's own draft pool bytes)"),
    "token.kv_layout": ("glm-kv's name for the row layout (bf16 / fp8_scaled / fp8_raw)",
                        "token.kv_row_bytes and kv_storage_dtype compared"),
    "token.index_kpool": ("glm-kv's factor page_size / 64; SGLang keeps no such value",
                          "token.page_size compared"),
    "token.indexer_row_bytes": ("one indexer row (key + scale) before pooling; SGLang stores pages",
                                "token.indexer_page_bytes and indexer_bytes_per_token compared"),
    "token.indexer_bytes_per_token_per_layer": ("a per-layer split of a measured total",
                                                "token.indexer_bytes_per_token compared"),
    "token.indexer_effective_bytes_per_token_per_layer": ("a per-layer split of a measured total",
                                                          "token.indexer_bytes_per_token compared"),
    "token.indexer_effective_bytes_per_token": ("the article's name for the same total",
                                                "token.indexer_bytes_per_token compared"),
    "token.index_groups_per_page": ("the sparse-attention group count (a compute quantity, no buffer)",
                                    "tests/ledgers (article figures)"),
    "token.index_topk_groups": ("the top-k group count (a compute quantity, no buffer)",
                                "tests/ledgers (article figures)"),
    "token.draft_layers": ("the NextN draft's layers inside cell_size; SGLang folds them in",
                           "token.cell_size_bytes compared (with and without EAGLE)"),
    "token.draft_bytes_per_token": ("the draft's share of cell_size", "token.cell_size_bytes compared"),
    "token.target_cell_size_bytes": ("cell_size without the draft", "token.cell_size_bytes compared"),
    "speculative.draft_layers": ("the same count as token.draft_layers", "token.cell_size_bytes compared"),
    "host.enabled": ("the profile's input, echoed", "none needed"),
    "host.kv_host_tokens": ("alias of host.kv_tokens", "host.kv_tokens in test_memory_agreement"),
    "host.kv_host_bytes": ("alias of host.kv_bytes", "host.kv_bytes in test_memory_agreement"),
    "host.indexer_host_bytes": ("alias of host.indexer_bytes", "host.indexer_bytes in test_memory_agreement"),
    "host.mamba_host_slots": ("alias of host.mamba_slots", "host.mamba_slots in test_memory_agreement"),
    "host.mamba_host_bytes": ("alias of host.mamba_bytes", "host.mamba_bytes in test_memory_agreement"),
    "host.total_host_bytes": ("alias of host.total_bytes", "host.total_bytes in test_memory_agreement"),
    "host.hicache_ratio_source": ("a label", "none needed"),
    "host.indexer_logged_bytes": ("the figure SGLang's log line prints (its own rounding of the indexer "
                                  "host pool)", "glm-kv verify on composed boot logs (test_verify_on_freshly_"
                                                "emitted_log, tests/ledgers/boot_logs)"),
    "host.device_bytes": ("the device pools' total that the host ratio multiplies; SGLang keeps no sum",
                          "host.kv_tokens / host.mamba_slots in test_memory_agreement"),
    "notes": ("text for the reader", "none needed"),
    "capacity.available_source": ("a label", "none needed"),
    "capacity.mamba_pool_source": ("a label (budget / max_mamba_cache_size)", "none needed"),
    "capacity.mamba_budget_bytes": ("rest x mamba ratio before SGLang's integer slot count; not kept by "
                                    "_handle_max_mamba_cache", "capacity.max_mamba_cache_size compared"),
    "capacity.token_pool_bytes": ("max_total_num_tokens x cell_size; SGLang logs no such product",
                                  "capacity.max_total_num_tokens and token.cell_size_bytes compared"),
    "capacity.requested_max_running_requests": ("the profile's input, echoed",
                                                "parallel.max_running_requests_per_worker compared"),
    "capacity.requested_source": ("a label", "none needed"),
    "capacity.binding_limit": ("glm-kv's explanation of which pool caps the requests",
                               "capacity.max_running_requests compared; tests/ledgers/test_capacity"),
    "capacity.capped_message": ("SGLang prints it as a log line, it returns no value",
                                "glm-kv verify on composed boot logs"),
    "capacity.mem_fraction_static_source": ("a label (profile / default)", "none needed"),
    "capacity.pre_model_load_bytes": ("a hardware reading: an input here (profiles.hardware)",
                                      "given to both sides; capacity.rest_bytes compared"),
    "capacity.pre_model_load_bytes_source": ("a label", "none needed"),
    "capacity.weights_bytes": ("a hardware reading (target + draft): an input here",
                               "given to both sides; capacity.rest_bytes compared"),
    "capacity.weights_bytes_source": ("a label", "none needed"),
    "capacity.draft_weights_bytes": ("a hardware reading: an input here (profiles.hardware)",
                                     "given to both sides; capacity.rest_bytes compared"),
    "model.model_type": ("the config's model_type, echoed (issue 31)", "none needed"),
    "model.family": ("glm-kv's name for the model's layer kinds (issue 31)", "none needed"),
    "request.state_kind": ("glm-kv's name for the state layer kind (issue 31)", "none needed"),
    "host.indexer_page_bytes": ("one DSAIndexerPoolHost page over every indexed layer (issue 31); this oracle "
                                "reads no host page", "compared with SGLang's DSAIndexerPoolHost in "
                                                      "test_models_contract.py"),
    "layers.*": ("glm-kv's regrouping per layer kind of figures compared under token.* and request.* "
                 "(issue 31)", "token.kv_bytes_per_token, indexer_bytes_per_token, request.state_slot_bytes"),
    "capacity.weights_estimate_bytes": ("glm-kv's estimate of the checkpoint per rank; SGLang measures "
                                        "weights, never estimates them", "informational only: no test can "
                                                                         "check it against SGLang on a CPU"),
}

# Known, explained differences: (profile id or "*", key) -> explanation. Empty when all agree.
EXPLAINED: dict[tuple[str, str], str] = {}


def dig(d: dict, dotted: str):
    cur = d
    for part in dotted.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return _MISSING
        cur = cur[part]
    return cur


_MISSING = object()


def raw_profile(base: str | None, overrides: dict) -> dict:
    """The profile as the user wrote it: the shipped YAML's fields plus the overrides (dashes read
    as underscores). No default is filled in: a field the user omits is SGLang's default on
    SGLang's side and glm-kv's default on glm-kv's."""
    from profiles import PROFILES_DIR

    data = {}
    if base is not None:
        data = yaml.safe_load((PROFILES_DIR / f"{base}.yaml").read_text()) or {}
    data = {**data, **overrides}
    return {k.replace("-", "_"): v for k, v in data.items()}


def glm_kv_side(raw: dict) -> dict:
    """The profile glm-kv plans for ``raw``: as written, except that weights the profile does not
    state stay unknown (``weights_estimate: false``), because SGLang is never given glm-kv's estimate
    (its side then sizes no pools either, and the two compare the ledgers)."""
    given = raw.get("weights_bytes") is not None or raw.get("available_bytes") is not None
    return dict(raw) if given or "weights_estimate" in raw else {**raw, "weights_estimate": False}


def engine_plan(raw: dict, pid: str, measured: dict | None = None):
    """(plan contract dict or None, error or None) for the profile as the user wrote it.

    ``measured``: hardware readings that are not profile fields (the MTP draft's weights), given
    to the engine the way ``glm-kv verify`` gives it a boot log's reading.
    """
    from glm_kv.errors import ProfileError
    from glm_kv.inputs.profile import make_profile
    from glm_kv.inputs.resolve import resolve
    from glm_kv.ledgers.plan import plan_from_args

    try:
        prof = make_profile(glm_kv_side(raw), default_name=pid.replace(":", "-").replace("@", "-"))
        return plan_from_args(resolve(prof), dict(measured) if measured else None).to_dict(), None
    except ProfileError as e:
        return None, {"field": e.field, "rule": e.rule}


def leaves(d: dict, prefix: str = "") -> dict:
    """{dotted key: value} for every leaf of a nested dict."""
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(leaves(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def undeclared_engine_keys(plan: dict, compared=None, engine_only=None) -> list[str]:
    """Plan keys that are neither compared with SGLang (KEYS, compare_memory.KEYS) nor declared
    SGLang-free (ENGINE_ONLY)."""
    from compare_memory import KEYS as MEMORY_KEYS

    compared = set(KEYS) | set(MEMORY_KEYS) if compared is None else compared
    engine_only = ENGINE_ONLY if engine_only is None else engine_only
    out = []
    for key in leaves(plan):
        if key.startswith("profile.") or key in compared or key in engine_only \
                or any(k.endswith(".*") and key.startswith(k[:-1]) for k in engine_only):
            continue
        out.append(key)
    return out


def undeclared_sglang_keys(sg: dict, compared=None) -> list[str]:
    """Oracle keys that nothing compares (neither KEYS nor SGLANG_ONLY)."""
    compared = KEYS if compared is None else compared
    return [k for k in leaves(sg) if k.split(".")[0] not in ("checks", "errors")
            and k not in compared and k not in SGLANG_ONLY]


@dataclass
class ProfileResult:
    pid: str
    inputs: dict
    sglang_error: dict | None
    engine_error: dict | None
    compared: list = field(default_factory=list)
    mismatches: list = field(default_factory=list)
    checks: dict = field(default_factory=dict)
    seconds: float = 0.0


# SGLang's refusal when the rest is not positive (_profile_available_bytes): glm-kv must quote it whole
NO_REST_WORDS = "Loaded weights leave no GPU memory for the KV cache"


def compare_one(pid: str, base: str | None, overrides: dict, engine=engine_plan) -> ProfileResult:
    """SGLang and glm-kv on the same user inputs; every key of either side compared or declared.

    A key one side has and the other lacks is a mismatch naming it; a plan key that is neither
    compared nor in ENGINE_ONLY, or an oracle key neither compared nor in SGLANG_ONLY, is too.
    """
    from oracle import sglang_plan
    from profiles import hardware

    t0 = time.time()
    raw, measured = hardware(raw_profile(base, overrides))
    plan, eng_err = engine(raw, pid, measured)
    sg = sglang_plan(raw, measured)
    res = ProfileResult(pid=pid, inputs=_jsonable({**raw, **measured}), sglang_error=sg.get("errors"),
                        engine_error=eng_err)
    if res.sglang_error or eng_err:
        res.compared.append("errors")
        if bool(res.sglang_error) != bool(eng_err):
            res.mismatches.append({
                "key": "errors",
                "sglang": res.sglang_error,
                "engine": eng_err,
                "explanation": "one side starts, the other refuses",
            })
        elif (said := res.sglang_error.get("message", "")).startswith(NO_REST_WORDS) and said not in eng_err["rule"]:
            res.mismatches.append({
                "key": "errors",
                "sglang": res.sglang_error,
                "engine": eng_err,
                "explanation": "glm-kv's refusal lacks SGLang's words (the fraction that would do)",
            })
        res.seconds = time.time() - t0
        return res
    res.checks = sg.get("checks", {})
    for name, (got, want) in res.checks.items():
        if got != want:
            res.mismatches.append({"key": f"sglang-self-check:{name}", "sglang": got, "engine": want,
                                   "explanation": "SGLang's tensors disagree with its own sizing"})
    for key in undeclared_engine_keys(plan):
        res.mismatches.append({"key": key, "sglang": "<not computed>", "engine": _jsonable(dig(plan, key)),
                               "explanation": "unexplained: plan key neither compared with SGLang nor "
                                              "listed in compare.ENGINE_ONLY"})
    for key in undeclared_sglang_keys(sg):
        res.mismatches.append({"key": key, "sglang": _jsonable(dig(sg, key)), "engine": "<not compared>",
                               "explanation": "unexplained: SGLang computes it, nothing compares it"})
    for key in KEYS:
        s_val, e_val = dig(sg, key), dig(plan, key)
        if s_val is _MISSING and e_val is _MISSING:
            # Neither side sizes this in this profile; only capacity.* may be absent on both
            # (no available_bytes / weights_bytes given).
            if not key.startswith("capacity."):
                res.mismatches.append({"key": key, "sglang": "<missing>", "engine": "<missing>",
                                       "explanation": "unexplained: key absent on both sides"})
            continue
        res.compared.append(key)
        if s_val is _MISSING or e_val is _MISSING:
            who = "SGLang" if s_val is _MISSING else "the engine plan"
            res.mismatches.append({"key": key, "sglang": "<missing>" if s_val is _MISSING else _jsonable(s_val),
                                   "engine": "<missing>" if e_val is _MISSING else _jsonable(e_val),
                                   "explanation": f"unexplained: {who} lacks the key"})
            continue
        if _norm(s_val) != _norm(e_val):
            why = EXPLAINED.get((pid, key)) or EXPLAINED.get(("*", key))
            res.mismatches.append({"key": key, "sglang": _jsonable(s_val), "engine": _jsonable(e_val),
                                   "explanation": why or "unexplained"})
    res.seconds = time.time() - t0
    return res


def _norm(v):
    if isinstance(v, tuple):
        return list(v)
    return v


def _jsonable(v):
    return json.loads(json.dumps(v, default=str))


def write_report(results: list[ProfileResult], started: float, path: Path = REPORT_PATH) -> dict:
    import sglang
    import torch

    report = {
        "what": "glm-kv plan (layout 0.5.23) vs SGLang 0.5.23's own pool classes, sizing "
                "functions and start-up validators, run on CPU (tests/sglang)",
        "sglang_version": getattr(sglang, "__version__", "0.5.23"),
        "torch_version": torch.__version__,
        "python": platform.python_version(),
        "finished_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "suite_seconds": round(time.time() - started, 1),
        "profiles_checked": len(results),
        "profiles_refused_by_both": sum(1 for r in results if r.sglang_error and r.engine_error),
        "keys_compared": sum(len(r.compared) for r in results),
        "distinct_keys": sorted({k for r in results for k in r.compared}),
        "mismatches": sum(len(r.mismatches) for r in results),
        "unexplained_mismatches": sum(
            1 for r in results for m in r.mismatches if m["explanation"].startswith("unexplained")
            or m["key"].startswith("sglang-self-check") or m["key"] == "errors"
        ),
        "key_sources": KEYS,
        "sglang_only_keys": SGLANG_ONLY,
        "engine_only_keys": {k: {"why": w, "checked": c} for k, (w, c) in ENGINE_ONLY.items()},
        "profiles": [
            {
                "id": r.pid,
                "seconds": round(r.seconds, 2),
                "keys_compared": len(r.compared),
                "sglang_error": r.sglang_error,
                "engine_error": r.engine_error,
                "mismatches": r.mismatches,
            }
            for r in results
        ],
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=1) + "\n")
    return report
