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
    "token.kv_row_bytes": "measured: DSATokenToKVPool.kv_buffer row",
    "token.num_full_layers": "measured: len(DSATokenToKVPool.kv_buffer)",
    "token.kv_bytes_per_token": "measured: kv_buffer bytes / token",
    "token.indexer_bytes_per_token": "measured: IndexKeyCache bytes / token",
    "token.indexer_page_bytes": "measured: IndexKeyCache row bytes",
    "token.indexer_tokens_per_page": "measured: DSATokenToKVPool.page_size",
    "token.cell_size_bytes": "function: DefaultPoolConfigurator._cell_size",
    "request.conv_state_shape": "measured: MambaPool conv state",
    "request.temporal_state_shape": "measured: MambaPool temporal state",
    "request.conv_dtype": "measured",
    "request.temporal_dtype": "measured",
    "request.num_linear_layers": "measured",
    "request.state_slot_bytes": "measured: MambaPool bytes / slot (= mamba_cache_per_req, checked)",
    "request.slots_per_request": "function: KVCacheConfigurator._calculate_mamba_ratio",
    "request.state_bytes_per_request": "measured slot bytes x slots per request",
    "request.mamba_strategy": "resolved: _mamba_radix_cache_resolution",
    "tail.rows": "measured: _compress_tail_k rows (requests + 2), at the resolved requests",
    "tail.width": "measured: _compress_tail_k width",
    "tail.bytes_per_row": "measured: tail k + score bytes / row",
    "tail.bytes": "measured: rows x bytes per row",
    "capacity.available_bytes": "function: _profile_available_bytes (rest before the mamba pool)",
    "capacity.max_mamba_cache_size": "function: _handle_max_mamba_cache",
    "capacity.mamba_pool_bytes": "function: (K + 1) x mamba_cache_per_req",
    "capacity.spec_scratch_bytes": "function: _handle_max_mamba_cache (verify scratch)",
    "capacity.token_pool_budget_bytes": "function: rest after the mamba pool",
    "capacity.max_total_num_tokens": "function: config_from_budget",
    "capacity.max_running_requests": "function: resolve_max_num_reqs",
    "host.entries": "measured: build_hybrid_mamba_stack HostPoolGroup entries",
    "host.entry_classes": "measured: host pool classes",
    "host.kv_row_bytes": "measured: MLATokenToKVPoolHost size_per_token / layers",
    "host.kv_bytes_per_token": "measured: MLATokenToKVPoolHost size_per_token",
    "host.kv_page_size": "measured",
    "host.indexer_bytes_per_token": "measured: DSAIndexerPoolHost size_per_token",
    "host.mamba_slot_bytes": "measured: MambaPoolHost size_per_token",
    "host.mamba_page_size": "measured",
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
    from glm_kv.inputs.profile import PACKAGE_DIR, canonical_fields

    data = {}
    if base is not None:
        data = yaml.safe_load((PACKAGE_DIR / "profiles" / f"{base}.yaml").read_text()) or {}
    data = canonical_fields(data)
    data.update(canonical_fields(overrides))
    return data


def engine_plan(raw: dict, pid: str):
    """(profile dict for SGLang, plan or None, error or None)."""
    from glm_kv.errors import ProfileError
    from glm_kv.ledgers.plan import build_plan
    from glm_kv.inputs.profile import make_profile

    try:
        prof = make_profile(dict(raw), default_name=pid.replace(":", "-").replace("@", "-"))
    except ProfileError as e:
        return raw, None, {"field": e.field, "rule": e.rule}
    inputs = prof.model_dump()
    try:
        return inputs, build_plan(prof), None
    except ProfileError as e:
        return inputs, None, {"field": e.field, "rule": e.rule}


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


def compare_one(pid: str, base: str | None, overrides: dict, engine=engine_plan) -> ProfileResult:
    from oracle import sglang_plan

    t0 = time.time()
    raw = raw_profile(base, overrides)
    inputs, plan, eng_err = engine(raw, pid)
    sg = sglang_plan(inputs)
    res = ProfileResult(pid=pid, inputs=_jsonable(inputs), sglang_error=sg.get("errors"),
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
        res.seconds = time.time() - t0
        return res
    res.checks = sg.get("checks", {})
    for name, (got, want) in res.checks.items():
        if got != want:
            res.mismatches.append({"key": f"sglang-self-check:{name}", "sglang": got, "engine": want,
                                   "explanation": "SGLang's tensors disagree with its own sizing"})
    for key in KEYS:
        s_val = dig(sg, key)
        e_val = dig(plan, key)
        if s_val is _MISSING or s_val is None:
            continue  # SGLang has no value for this key in this profile (e.g. no capacity inputs)
        res.compared.append(key)
        if e_val is _MISSING:
            res.mismatches.append({"key": key, "sglang": s_val, "engine": "<missing>",
                                   "explanation": "engine plan lacks the key"})
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
            1 for r in results for m in r.mismatches if m["explanation"] == "unexplained"
            or m["key"].startswith("sglang-self-check") or m["key"] == "errors"
        ),
        "key_sources": KEYS,
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
