"""The flag table of SGLang 0.5.23 (issue 20): every ``ServerArgs`` field, one row, from the wheel.

Each field is *modelled* (glm_kv reads it into a profile field: ``glm_kv.inputs.launch.MODELLED``
says which ledger or buffer it moves), *inert* (SGLang's own sizing, driven on the CPU through
``oracle_memory.sglang_memory`` on every ``PROOF_PROFILES`` profile, gives the same fraction,
rest, mamba slots, token pool and request cap with and without the flag at a non-default value),
*refused* (glm-kv exits 2 naming the flag: not modelled), or *no-flag* (the field has no
command-line option: a launch command cannot set it).

Only fields in ``INERT_CANDIDATES`` are tried for inertness: the proof covers the target's pool
sizing, not the weights, the draft worker or buffers allocated after the pools, so a field that
could move those (quantization, offload, LoRA, speculative, HiCache, graphs, ...) is refused even
when the pools happen not to move. The exception is a handful of CUDA-graph fields (``INERT_FIELDS``):
for this MLA model SGLang reserves a flat 1.5 GiB for the prefill graph whatever its capture sizes
(``reserve_for_graph_mb``), so the prefill sizes, padding and graph debugging live inside the reserve
the fraction already leaves (test_flags_graph.py re-proves them on a third, DeepEP profile).

Regenerate (inside .venv-sglang)::

    GLM_KV_SGLANG=1 PYTHONPATH=. .venv-sglang/bin/python tests/sglang/flag_table.py

writes ``glm_kv/inputs/data/sglang-0.5.23-flag-table.json``; ``test_flags_table.py`` checks it
covers every field and re-runs every inert proof. After a flag becomes modelled (``launch.MODELLED``),
``python tests/sglang/flag_table.py --modelled-only`` rewrites only the modelled rows (no SGLang, no
re-proof of the inert ones); ``--prove field1,field2`` re-derives and re-proves only those rows.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
TABLE = ROOT / "glm_kv" / "inputs" / "data" / "sglang-0.5.23-flag-table.json"
GiB = 1 << 30

# Sizing inputs of the proof: one rank of an H200 and four-rank B200 DP attention with MTP, both with
# weights and pre-load memory as a real boot reads them.
PROOF_PROFILES = (
    ("h200-tp1", {"gpu": "H200", "tp_size": 1, "max_running_requests": None}, 139 * GiB, 70 * GiB),
    ("b200-tp4-dpattn-mtp", {"gpu": "B200", "tp_size": 4, "dp_size": 4, "enable_dp_attention": True,
                             "speculative_algorithm": "EAGLE", "max_running_requests": 64},
     176 * GiB, 40 * GiB),
)

# Namespaces whose fields are tried for inertness, and single fields elsewhere (serving, logging,
# scheduling order, networking, CPU-side tokenizer and media handling).
INERT_NAMESPACES = ("serving", "observability")
INERT_EXCLUDED = {  # in those namespaces but able to allocate device memory or change the model read
    "kv_canary", "kv_canary_real_data", "kv_canary_sweep_interval", "debug_tensor_dump_output_folder",
    "debug_tensor_dump_layers", "debug_tensor_dump_input_file", "forward_hooks", "msprobe_dump_config",
    "enable_forward_pass_metrics", "tokenizer_path", "skip_tokenizer_init", "weight_version",
    "sidecar", "sidecar_args", "stat_loggers",
}
INERT_FIELDS = {
    "trust_remote_code", "download_dir", "model_checksum", "weight_loader_disable_mmap",
    "weight_loader_prefetch_checkpoints", "weight_loader_prefetch_num_threads",
    "weight_loader_drop_cache_after_load", "checkpoint_engine_wait_weights_before_ready",
    "engine_info_bootstrap_port",
    "random_seed", "watchdog_timeout", "soft_watchdog_timeout", "sleep_on_idle", "gc_threshold", "numa_node",
    "max_queued_requests", "schedule_policy", "enable_priority_scheduling", "disable_priority_preemption",
    "default_priority_value", "abort_on_priority_when_disabled", "schedule_low_priority_values_first",
    "priority_scheduling_preemption_threshold", "retraction_policy", "schedule_conservativeness",
    "scheduler_recv_interval", "num_continuous_decode_steps", "enable_prefill_delayer",
    "prefill_delayer_max_delay_passes", "prefill_delayer_token_usage_low_watermark",
    "prefill_delayer_forward_passes_buckets", "prefill_delayer_wait_seconds_buckets",
    "prefill_delayer_queue_min_ratio", "prefill_delayer_max_delay_ms", "min_free_slots_delay",
    "radix_eviction_policy", "nccl_port", "dist_timeout", "dist_init_addr", "load_balance_method",
    "enable_custom_logit_processor", "disable_outlines_disk_cache", "grammar_backend", "sampling_backend",
    "allowed_media_domains", "media_url_max_file_size_mb", "mm_processor_worker_num", "mm_io_worker_num",
    # CUDA graphs captured after the pools: prefill capture sizes (reserve_for_graph_mb reads only the
    # prefill backend for an MLA model), decode padding, graph debugging (test_flags_graph.py too)
    "cuda_graph_max_bs_prefill", "cuda_graph_bs_prefill", "cuda_graph_max_seq_len_prefill",
    "cuda_graph_prefill_max_context", "disable_cuda_graph_padding", "enable_cudagraph_gc",
    "enable_profile_cuda_graph", "debug_cuda_graph",
}

# A non-default value per type when the parser's own choices do not give one.
_SAMPLE = {"int": "3", "float": "0.37", "str": "x", "human_readable_int": "3", "loads": "{}"}
_FIXED = {  # values that pass SGLang's own validators for fields a generic sample would not
    "dist_init_addr": "127.0.0.1:5000", "nccl_port": "29999", "engine_info_bootstrap_port": "29998",
    "port": "31000", "host": "0.0.0.0", "numa_node": "0", "gc_threshold": "700",
    "allowed_media_domains": "example.com", "radix_eviction_policy": "lfu",
    "schedule_policy": "lpm", "download_dir": "/tmp", "served_model_name": "glm",
    "cuda_graph_max_bs_prefill": "1024", "cuda_graph_bs_prefill": "256", "cuda_graph_max_seq_len_prefill": "4096",
    "cuda_graph_prefill_max_context": "8192",
}


def parser() -> argparse.ArgumentParser:
    from sglang.srt.server_args import ServerArgs

    p = argparse.ArgumentParser(prog="sglang", add_help=False)
    ServerArgs.add_cli_args(p)
    return p


def fields() -> list:
    """Every ServerArgs field of the installed wheel, with its namespace and default."""
    import msgspec

    from sglang.srt.server_args import ServerArgs

    ns = ServerArgs._NS_BY_FIELD
    return [(f.name, str(ns.get(f.name, "")), f.default) for f in msgspec.structs.fields(ServerArgs)]


def options_by_dest(p: argparse.ArgumentParser) -> dict[str, list]:
    out: dict[str, list] = {}
    for a in p._actions:
        longs = [o for o in a.option_strings if o.startswith("--")]
        if longs and a.dest != "help":
            out.setdefault(a.dest, []).append(a)
    return out


def sample_argv(action: argparse.Action, default) -> list[str] | None:
    """A command-line fragment giving the field a value other than its default."""
    flag = action.option_strings[0]
    if action.nargs == 0:
        return [flag] if not default else None
    if action.dest in _FIXED:
        return [flag, _FIXED[action.dest]]
    if action.choices:
        for c in action.choices:
            if c != default and str(c) != str(default):
                return [flag, str(c)]
        return None
    kind = getattr(action.type, "__name__", "str") if action.type else "str"
    raw = _SAMPLE.get(kind, "x")
    if kind in ("int", "human_readable_int") and isinstance(default, int) and not isinstance(default, bool):
        raw = str(default + 3)
    if kind == "float" and isinstance(default, float):
        raw = str(round(default * 0.5 + 0.1, 3))
    return [flag, raw]


def sizing(extra: dict, profile: dict, pre: int, weights: int) -> dict:
    """SGLang's fraction, rest and pool sizes with ``extra`` ServerArgs kwargs on top of a profile."""
    import oracle_memory

    original = oracle_memory.kwargs_for
    oracle_memory.kwargs_for = lambda prof, raw: {**original(prof, raw), **extra}
    try:
        out = oracle_memory.sglang_memory(dict(profile), {}, pre_model_load_bytes=pre, weights_bytes=weights)
    finally:
        oracle_memory.kwargs_for = original
    if "errors" in out:
        return out
    return {"fraction": out["resolved"]["mem_fraction_static"], "request": out["request"],
            "capacity": out["capacity"]}


def baselines() -> dict:
    return {pid: sizing({}, prof, pre, w) for pid, prof, pre, w in PROOF_PROFILES}


def prove_inert(field: str, kwargs: dict, base: dict) -> str | None:
    """None when every proof profile sizes the pools the same with the flag; else why not."""
    for pid, prof, pre, w in PROOF_PROFILES:
        got = sizing(kwargs, prof, pre, w)
        if "errors" in got:
            e = got["errors"]
            return f"SGLang refuses it on {pid} ({e['type']}: {e['message'][:160]})"
        if got != base[pid]:
            diff = [k for k in ("fraction", "request", "capacity") if got[k] != base[pid][k]]
            return f"moves the pools on {pid}: {', '.join(diff)}"
    return None


def build_table(progress=None, only: set | None = None, previous: dict | None = None) -> dict:
    """Every row from the wheel; with ``only``, just those fields are re-derived (and re-proven), the
    other rows kept from ``previous``."""
    from glm_kv.inputs.launch import MODELLED, REFUSED_BY_SGLANG

    p = parser()
    by_dest = options_by_dest(p)
    base = baselines()
    assert all("errors" not in b for b in base.values()), base
    kept = {r["field"]: r for r in (previous or {}).get("rows", [])}
    rows = []
    for name, ns, default in fields():
        if only is not None and name not in only and name in kept:
            rows.append(kept[name])
            continue
        actions = by_dest.get(name, [])
        flags = sorted({o for a in actions for o in a.option_strings if o.startswith("--")})
        row = {"field": name, "namespace": ns, "flags": flags}
        if not flags:
            row.update(status="no-flag", why="no command-line option in 0.5.23 (set by SGLang itself)")
        elif name in MODELLED:
            row.update(status="modelled", moves=MODELLED[name])
        elif name in REFUSED_BY_SGLANG:
            row.update(status="refused", why=REFUSED_BY_SGLANG[name])
        elif (ns in INERT_NAMESPACES and name not in INERT_EXCLUDED) or name in INERT_FIELDS:
            argv = sample_argv(actions[0], default)
            if argv is None:
                row.update(status="refused", why="no non-default value to prove it inert with")
            else:
                try:
                    ns_ = p.parse_args(["--model-path", "unused", *argv])
                except SystemExit:
                    ns_ = None
                why = ("SGLang's parser refuses the sample value " + " ".join(argv) if ns_ is None
                       else prove_inert(name, {name: getattr(ns_, name)}, base))
                if why is None:
                    row.update(status="inert", proof={"argv": argv, "profiles": [q[0] for q in PROOF_PROFILES]})
                else:
                    row.update(status="refused", why=f"not proven inert: {why}")
        else:
            row.update(status="refused", why="not modelled by glm-kv")
        if progress:
            progress(row)
        rows.append(row)
    return {"_provenance": "Every field of SGLang 0.5.23's ServerArgs (msgspec.structs.fields, the wheel's "
                           "namespaces) with its long options (ServerArgs.add_cli_args); status modelled / inert "
                           "(proof: tests/sglang/test_flags_table.py re-runs SGLang's sizing with proof.argv) / "
                           "refused / no-flag. Generated by tests/sglang/flag_table.py.",
            "sglang": "0.5.23", "rows": rows}


def reclassify_modelled(table: dict) -> dict:
    """The table with every row's modelled status re-read from ``launch.MODELLED`` (inert proofs kept):
    a flag that became modelled moves to *modelled*; one that left MODELLED goes back to *refused*."""
    from glm_kv.inputs.launch import MODELLED, REFUSED_BY_SGLANG

    rows = []
    for r in table["rows"]:
        base = {"field": r["field"], "namespace": r["namespace"], "flags": r["flags"]}
        if r["status"] == "no-flag":
            rows.append(r)
        elif r["field"] in MODELLED:
            rows.append({**base, "status": "modelled", "moves": MODELLED[r["field"]]})
        elif r["field"] in REFUSED_BY_SGLANG:   # SGLang cannot start this model with it: its reason
            rows.append({**base, "status": "refused", "why": REFUSED_BY_SGLANG[r["field"]]})
        elif r["status"] == "modelled":
            rows.append({**base, "status": "refused", "why": "not modelled by glm-kv"})
        else:
            rows.append(r)
    return {**table, "rows": rows}


def main() -> int:
    if "--prove" in sys.argv[1:]:   # re-derive (and re-prove) only the named fields: python flag_table.py --prove a,b
        only = set(sys.argv[sys.argv.index("--prove") + 1].split(","))
        sys.path.insert(0, str(HERE))
        from cpu_workarounds import quiet_sglang_logs

        quiet_sglang_logs()
        table = build_table(progress=lambda r: print(r["status"], r["field"], r.get("why", ""), file=sys.stderr),
                            only=only, previous=json.loads(TABLE.read_text()))
        TABLE.write_text(json.dumps(table, indent=1) + "\n")
        print(f"rewrote {len(only)} rows of {TABLE}")
        return 0
    if "--modelled-only" in sys.argv[1:]:   # no SGLang needed: re-read MODELLED, keep every inert proof
        sys.path.insert(0, str(ROOT))
        TABLE.write_text(json.dumps(reclassify_modelled(json.loads(TABLE.read_text())), indent=1) + "\n")
        print(f"rewrote the modelled rows of {TABLE}")
        return 0
    sys.path.insert(0, str(HERE))
    from cpu_workarounds import quiet_sglang_logs

    quiet_sglang_logs()
    table = build_table(progress=lambda r: print(r["status"], r["field"], r.get("why", ""), file=sys.stderr))
    TABLE.write_text(json.dumps(table, indent=1) + "\n")
    counts: dict = {}
    for r in table["rows"]:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    print(f"wrote {TABLE}: {len(table['rows'])} fields, {counts}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
