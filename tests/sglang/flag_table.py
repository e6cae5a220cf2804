"""The flag table of SGLang 0.5.23 (issues 20, 30): every ``ServerArgs`` field, one row, decided by SGLang.

Each field is

* *modelled*: glm_kv reads it into a profile field (``glm_kv.inputs.launch.MODELLED`` says which ledger
  or buffer it moves);
* *inert*: SGLang's own sizing, driven on the CPU through ``oracle_memory.sglang_memory`` on every
  ``PROOF_PROFILES`` profile (one H200 rank, DP attention with MTP, HiCache, a decode server), gives the
  same fraction, state slot, rest, mamba slots, token pool, request cap and HiCache host pools with and
  without the flag at a valid non-default value (built from the wheel's argparse type and choices);
* *refused*: SGLang refuses the flag for this model on every proof profile (the row's ``why`` is SGLang's
  own message), or SGLang's sizing moves a pool with it and glm-kv does not compute that yet (``why`` says
  what moved where), or SGLang's sizing cannot be run for it on a CPU (``why`` says why);
* *no-flag*: the field has no command-line option: a launch command cannot set it.

Run in pieces (inside .venv-sglang, niced: each field is up to a dozen sizings)::

    GLM_KV_SGLANG=1 PYTHONPATH=. nice .venv-sglang/bin/python tests/sglang/flag_table.py --shard 1/4
    ... --shard 4/4
    GLM_KV_SGLANG=1 PYTHONPATH=. .venv-sglang/bin/python tests/sglang/flag_table.py --merge 4

A shard writes ``SHARD_DIR/shard-i-of-n.json``; ``--merge n`` writes
``glm_kv/inputs/data/sglang-0.5.23-flag-table.json`` from all n shards in the wheel's field order.
``--modelled-only`` re-reads ``launch.MODELLED`` / ``REFUSED_BY_SGLANG`` into the rows (no SGLang);
``--prove a,b`` re-derives only those rows in the committed table.
``test_flags_table.py`` checks the table covers every field and re-proves a seeded sample of its rows.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
TABLE = ROOT / "glm_kv" / "inputs" / "data" / "sglang-0.5.23-flag-table.json"
SHARD_DIR = Path(os.environ.get("GLM_KV_FLAG_SHARDS", "/tmp/glm-kv-flag-table"))
GiB = 1 << 30

# Sizing inputs of the proof, each with weights and pre-load memory as a real boot reads them: one H200
# rank; four-rank B200 DP attention with MTP (speculative); HiCache on one H200 rank (the host pool
# group at full size, host RAM given); a two-rank decode server (PD disaggregation).
PROOF_PROFILES = (
    ("h200-tp1", {"gpu": "H200", "tp_size": 1, "max_running_requests": None}, 139 * GiB, 70 * GiB),
    ("b200-tp4-dpattn-mtp", {"gpu": "B200", "tp_size": 4, "dp_size": 4, "enable_dp_attention": True,
                             "speculative_algorithm": "EAGLE", "max_running_requests": 64},
     176 * GiB, 40 * GiB),
    ("h200-tp1-hicache", {"gpu": "H200", "tp_size": 1, "max_running_requests": None,
                          "enable_hierarchical_cache": True, "host_memory_bytes": 128 * GiB,
                          "ranks_per_host": 1}, 139 * GiB, 70 * GiB),
    ("h200-tp2-decode", {"gpu": "H200", "tp_size": 2, "disaggregation_mode": "decode",
                         "max_running_requests": None}, 139 * GiB, 36 * GiB),
)
COMPARED = ("fraction", "request", "capacity", "host")   # what a flag must leave alone to be inert

# The weights are a reading in the CPU sizing (weights_bytes): a field that changes what SGLang loads
# (its format, quantization, dtype, offloading, adapters) moves the rest by the weights' change, which
# only a load on a GPU measures.
WEIGHTS_FIELDS = {
    "quantization": "the checkpoint's quantization (the weights' bytes)",
    "quantization_param_path": "the KV scaling factors file read with the weights",
    "load_format": "how the weights are loaded (dummy / sharded / layered ...)",
    "dtype": "the weights' dtype",
    "cpu_offload_gb": "weights offloaded to host memory",
    "offload_group_size": "weights offloaded per layer group", "offload_num_in_group": "weights offloaded",
    "offload_prefetch_step": "weights offloaded", "offload_mode": "weights offloaded",
    "enable_lora": "LoRA adapter buffers allocated with the weights", "lora_paths": "LoRA adapters",
    "max_lora_rank": "LoRA adapter buffers", "max_loras_per_batch": "LoRA adapter buffers",
    "max_loaded_loras": "LoRA adapter buffers", "lora_target_modules": "LoRA adapter buffers",
    "lora_backend": "LoRA adapter buffers", "revision": "which checkpoint revision is loaded",
    "modelopt_quant": "the weights' quantization", "modelopt_checkpoint_restore_path": "the weights' quantization",
    "modelopt_checkpoint_save_path": "the weights' quantization", "modelopt_export_path": "the weights' quantization",
    "torchao_config": "the weights' quantization", "model_loader_extra_config": "how the weights are loaded",
    "remote_instance_weight_loader_seed_instance_ip": "where the weights are loaded from",
    "speculative_draft_model_quantization": "the draft model's weights",
    "speculative_draft_load_format": "the draft model's weights",
}

# Sample values (argparse text) for fields a generic sample would not satisfy; "@MODEL@" is the model
# directory the oracle writes (oracle.model_dir), "@TMP@" a scratch directory.
_FIXED = {
    "dist_init_addr": ["127.0.0.1:5000"], "nccl_port": ["29999"], "engine_info_bootstrap_port": ["29998"],
    "port": ["31000"], "host": ["0.0.0.0"], "numa_node": ["0"], "gc_threshold": ["700"],
    "allowed_media_domains": ["example.com"], "radix_eviction_policy": ["lfu"], "schedule_policy": ["lpm"],
    "download_dir": ["@TMP@"], "served_model_name": ["glm"], "tokenizer_path": ["@MODEL@"],
    "cuda_graph_max_bs_prefill": ["1024"], "cuda_graph_bs_prefill": ["256"],
    "cuda_graph_max_seq_len_prefill": ["4096"], "cuda_graph_prefill_max_context": ["8192"],
    # validation_hook.validate_buckets_rule: the rule's first word is tse / default / custom
    "prompt_tokens_buckets": ["default"], "generation_tokens_buckets": ["default"],
    # mamba_hook.validate_mamba_extra_buffer: a multiple of the page (256 here) and >= the draft tokens; the
    # generic default + 3 (259) is refused wherever extra_buffer runs, which proved nothing there
    "mamba_track_interval": ["512"],
}
_PATHLIKE = ("_path", "_dir", "_file", "_folder")


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


def _substitute(argv: list[str]) -> list[str]:
    """The placeholders of a sample argv made real (the oracle's model directory, a scratch folder)."""
    from oracle import model_dir, shipped_config

    tmp = SHARD_DIR / "scratch"
    tmp.mkdir(parents=True, exist_ok=True)
    return [w.replace("@MODEL@", model_dir(shipped_config())).replace("@TMP@", str(tmp)) for w in argv]


def candidates(action: argparse.Action, default) -> list[list[str]]:
    """Command-line fragments that give the field a valid value other than its default (best first)."""
    longs = [o for o in action.option_strings if o.startswith("--")]
    flag = longs[0]
    if action.nargs == 0:   # a switch, or both halves of a BooleanOptionalAction (--x / --no-x)
        return [[o] for o in longs]
    if action.dest in _FIXED:
        return [[flag, *_FIXED[action.dest]]]
    if action.choices:
        return [[flag, str(c)] for c in action.choices if str(c) != str(default)][:3] or [[flag, str(default)]]
    kind = getattr(action.type, "__name__", "str") if action.type else "str"
    if kind in ("int", "human_readable_int"):
        if isinstance(default, int) and not isinstance(default, bool):
            return [[flag, str(v)] for v in dict.fromkeys((default + 3, default * 2 if default > 0 else 8, 1))
                    if v != default]
        return [[flag, v] for v in ("3", "64", "1")]
    if kind == "float":
        if isinstance(default, float) and default:
            return [[flag, str(round(default * 0.5 + 0.1, 3))], [flag, str(round(default * 2, 3))]]
        return [[flag, v] for v in ("0.37", "1.0", "2.0")]
    if kind in ("loads", "json_loads") or "json" in action.dest:
        return [[flag, "{}"], [flag, "[]"]]
    if action.dest.endswith(("_file", "_config_path")):   # a file: the model's own config.json
        return [[flag, "@MODEL@/config.json"], [flag, "@MODEL@"], [flag, "x"]]
    if action.dest.endswith(_PATHLIKE):
        return [[flag, "@MODEL@"], [flag, "@TMP@"], [flag, "x"]]
    return [[flag, "x"], [flag, "1"], [flag, "@TMP@"]]


def sizing(extra: dict, profile: dict, pre: int, weights: int) -> dict:
    """SGLang's fraction, rest and pool sizes with ``extra`` ServerArgs kwargs on top of a profile."""
    import oracle_memory

    original = oracle_memory.kwargs_for
    environ = dict(os.environ)
    oracle_memory.kwargs_for = lambda prof, raw: {**original(prof, raw), **extra}
    try:
        out = oracle_memory.sglang_memory(dict(profile), {}, pre_model_load_bytes=pre, weights_bytes=weights)
    except BaseException as e:  # noqa: BLE001 - a crash outside the oracle's stages is an answer too
        if isinstance(e, KeyboardInterrupt):
            raise
        return {"errors": {"stage": "outside", "type": type(e).__name__, "message": str(e), "where": ""}}
    finally:
        oracle_memory.kwargs_for = original
        os.environ.clear()
        os.environ.update(environ)   # a flag that exports an env var must not leak into the next proof
    if "errors" in out:
        return out
    return {"fraction": out["resolved"]["mem_fraction_static"], "request": out["request"],
            "capacity": out["capacity"], "host": out.get("host")}


def baselines() -> dict:
    return {pid: sizing({}, prof, pre, w) for pid, prof, pre, w in PROOF_PROFILES}


def is_cpu_failure(err: dict) -> bool:
    """A failure of the CPU stand-in, not an SGLang refusal.

    SGLang refuses a launch in its start-up validators (``ServerArgs.resolve_once``: the oracle's
    ``server_args`` stage) and in the pool sizing's "Not enough memory"; anything else raised past that
    point (a process group, a kernel, a GPU library the stand-in does not provide) or a keyword the stand-in
    sets itself (``device``) says only that the CPU cannot run SGLang's sizing for this flag.
    """
    if err["type"] in ("ModuleNotFoundError", "ImportError", "OSError"):
        return True   # a GPU-side library or file the stand-in lacks
    if err["type"] == "TypeError" and "got multiple values for keyword argument" in err["message"]:
        return True   # the oracle passes that ServerArgs field itself (device="cuda")
    if err["stage"] == "server_args":
        return False   # the launch validators: SGLang's own refusal
    if "Not enough memory" in err["message"]:
        return False
    # a validator inside the pool builders (kv_cache_configurator ...) speaks as SGLang; the stand-in's
    # own seams (parallel groups it overrides or never wrote) do not
    stand_in = ("override", "has not been written", "process group")
    return not (err["type"] in ("ValueError", "AssertionError", "NotImplementedError")
                and not any(m in err["message"] for m in stand_in))


def refuses_every_launch(err: dict) -> bool:
    """A refusal raised while building the device pools: SGLang builds them for every launch, so it refuses
    the flag on every profile, even where the CPU oracle sized only the budgets (no pools built)."""
    return err["stage"] == "host_pools" and "kv_cache_configurator" in err.get("where", "")


def prove(field: str, kwargs: dict, base: dict) -> dict:
    """Run SGLang's sizing on every proof profile with ``kwargs``: the first pool it moves, else per
    profile whether SGLang refused it (its message) or sized every pool the same."""
    result: dict = {"inert_on": [], "refused_on": {}}
    for pid, prof, pre, w in PROOF_PROFILES:
        got = sizing(kwargs, prof, pre, w)
        if "errors" in got:
            result["refused_on"][pid] = got["errors"]
            continue
        diff = [k for k in COMPARED if got[k] != base[pid][k]]
        if diff:
            result["moves"] = {"profile": pid, "what": diff}
            return result
        result["inert_on"].append(pid)
    return result


def prove_inert(field: str, kwargs: dict, base: dict) -> str | None:
    """None when every proof profile sizes the pools the same with the flag (or SGLang refuses it there
    with its own validator, as it refuses on a GPU); else why not."""
    r = prove(field, kwargs, base)
    if "moves" in r:
        return f"moves the pools on {r['moves']['profile']}: {', '.join(r['moves']['what'])}"
    cpu = {p: e for p, e in r["refused_on"].items() if is_cpu_failure(e)}
    if cpu:
        p, e = next(iter(cpu.items()))
        return f"SGLang's sizing fails on the CPU on {p} ({e['type']}: {e['message'][:160]})"
    if not r["inert_on"]:
        return "SGLang refuses it on every proof profile"
    return None


def _quote(err: dict) -> str:
    msg = " ".join(err["message"].split())
    if len(msg) > 300:   # the CLI's one line holds 600 characters (errors.RULE_MAX)
        msg = msg[:297] + "..."
    where = f" ({err['where']})" if err.get("where") else ""
    return f"\"{msg}\"{where}"


def classify(name: str, actions: list, default, p: argparse.ArgumentParser, base: dict) -> dict:
    """One unmodelled field decided by SGLang: inert, moves a pool, refused by SGLang, or not runnable."""
    first_refusal = None
    only_default = None
    tried = []
    for argv in candidates(actions[0], default):
        real = _substitute(argv)
        try:
            ns_ = p.parse_args(["--model-path", "unused", *real])
        except SystemExit:
            tried.append(" ".join(argv))
            continue
        value = getattr(ns_, name)
        if value == default:
            only_default = only_default or argv
            continue
        r = prove(name, {name: value}, base)
        if "moves" in r:
            m = r["moves"]
            return {"status": "refused", "moves": m, "proof": {"argv": argv},
                    "why": (f"SGLang 0.5.23's own sizing moves the {' and '.join(m['what'])} with "
                            f"{' '.join(argv)} (proof profile {m['profile']}) and glm-kv does not compute that "
                            f"yet, so no plan is given for this command")}
        cpu = {pid: e for pid, e in r["refused_on"].items() if is_cpu_failure(e)}
        if cpu:
            pid, e = next(iter(cpu.items()))
            return {"status": "refused", "cpu": True, "proof": {"argv": argv}, "sglang_error": e,
                    "why": (f"SGLang 0.5.23's sizing cannot be run for it on a CPU (with {' '.join(argv)} on "
                            f"{pid} the CPU stand-in fails: {e['type']}: {_quote(e)}), so its effect on memory "
                            f"is not proven and no plan is given for this command")}
        always = [e for e in r["refused_on"].values() if refuses_every_launch(e)]
        if always:
            e = always[0]
            return {"status": "refused", "sglang_refuses": True, "proof": {"argv": argv}, "sglang_error": e,
                    "why": (f"SGLang 0.5.23 refuses {' '.join(argv)} for GLM-5.3-Flash when it builds the pools: "
                            f"{e['type']}: {_quote(e)}")}
        if r["inert_on"]:
            row = {"status": "inert", "proof": {"argv": argv, "profiles": r["inert_on"]}}
            if r["refused_on"]:   # SGLang's own validator refuses the combination on these profiles
                row["sglang_refuses_on"] = {pid: _quote(e) for pid, e in r["refused_on"].items()}
            return row
        first_refusal = first_refusal or (argv, r["refused_on"])
    if first_refusal is not None:
        argv, refused = first_refusal
        e = refused[PROOF_PROFILES[0][0]]
        return {"status": "refused", "sglang_refuses": True, "proof": {"argv": argv}, "sglang_error": e,
                "why": (f"SGLang 0.5.23 refuses {' '.join(argv)} for GLM-5.3-Flash on every proof profile: "
                        f"{e['type']}: {_quote(e)}")}
    if tried:
        return {"status": "refused", "sglang_refuses": True,
                "why": (f"SGLang 0.5.23's parser refuses every sample value ({'; '.join(tried)}); "
                        "no value to prove it inert with")}
    if only_default is not None:   # every value the parser takes is the default: nothing can move
        r = prove(name, {}, base)
        return {"status": "inert", "proof": {"argv": only_default, "profiles": r["inert_on"]},
                "note": "every value SGLang 0.5.23's parser takes for it is its default"}
    return {"status": "refused", "cpu": True,
            "why": ("SGLang 0.5.23's sizing cannot be run for it on a CPU: no value reachable from the command "
                    "line to run it with")}


def static_row(name: str, ns: str, flags: list) -> dict | None:
    """The rows decided without running SGLang: no flag, modelled, refused in SGLang's words by
    ``launch.REFUSED_BY_SGLANG``, or changing the weights (a GPU reading)."""
    from glm_kv.inputs.launch import MODELLED, REFUSED_BY_SGLANG

    row = {"field": name, "namespace": ns, "flags": flags}
    if not flags:
        return {**row, "status": "no-flag", "why": "no command-line option in 0.5.23 (set by SGLang itself)"}
    if name in MODELLED:
        return {**row, "status": "modelled", "moves": MODELLED[name]}
    if name in REFUSED_BY_SGLANG:
        return {**row, "status": "refused", "sglang_refuses": True, "why": REFUSED_BY_SGLANG[name]}
    if name in WEIGHTS_FIELDS:
        return {**row, "status": "refused", "cpu": True,
                "why": (f"it changes {WEIGHTS_FIELDS[name]}; SGLang 0.5.23 measures the free memory after "
                        "loading the weights on the GPU, a reading its sizing cannot take on a CPU, so its "
                        "effect on memory is not proven and no plan is given for this command")}
    return None


def build_rows(shard: tuple[int, int] | None = None, only: set | None = None, progress=None) -> tuple[list, list]:
    """(rows of this shard / of ``only``, the wheel's field order)."""
    p = parser()
    by_dest = options_by_dest(p)
    base = baselines()
    assert all("errors" not in b for b in base.values()), base
    order = [name for name, _, _ in fields()]
    rows = []
    for k, (name, ns, default) in enumerate(fields()):
        if shard is not None and k % shard[1] != shard[0] - 1:
            continue
        if only is not None and name not in only:
            continue
        actions = by_dest.get(name, [])
        flags = sorted({o for a in actions for o in a.option_strings if o.startswith("--")})
        t0 = time.time()
        row = static_row(name, ns, flags) or {"field": name, "namespace": ns, "flags": flags,
                                              **classify(name, actions, default, p, base)}
        if progress:
            progress(row, time.time() - t0)
        rows.append(row)
    again = baselines()   # no proof may leave SGLang's global state changed
    assert again == base, "the baselines moved during the run: a proof leaked state"
    return rows, order


PROVENANCE = ("Every field of SGLang 0.5.23's ServerArgs (msgspec.structs.fields, the wheel's namespaces) with "
              "its long options (ServerArgs.add_cli_args); status modelled / inert (proof.argv run through "
              "SGLang's own sizing on proof.profiles moves no pool and not the fraction; test_flags_table.py "
              "re-proves a sample) / refused (why: SGLang's own refusal, the pool SGLang's sizing moves, or why "
              "it cannot be run on a CPU) / no-flag. Generated by tests/sglang/flag_table.py.")


def merged(rows: list, order: list) -> dict:
    by = {r["field"]: r for r in rows}
    missing = [f for f in order if f not in by]
    assert not missing, f"no row for {missing[:5]} (a shard missing?)"
    return {"_provenance": PROVENANCE, "sglang": "0.5.23",
            "proof_profiles": [{"id": pid, "profile": prof, "pre_model_load_bytes": pre, "weights_bytes": w}
                               for pid, prof, pre, w in PROOF_PROFILES],
            "rows": [by[f] for f in order]}


def reclassify_modelled(table: dict) -> dict:
    """The table with every row's static status re-read from ``launch`` (SGLang-decided rows kept)."""
    rows = []
    for r in table["rows"]:
        s = static_row(r["field"], r["namespace"], r["flags"])
        if s is not None:
            rows.append(s)
        elif r["status"] == "modelled":   # left MODELLED: must be re-decided by SGLang (--prove)
            rows.append({**{k: r[k] for k in ("field", "namespace", "flags")}, "status": "refused",
                         "why": "left glm-kv's modelled flags; re-run tests/sglang/flag_table.py --prove"})
        else:
            rows.append(r)
    return {**table, "rows": rows}


def _progress(row: dict, seconds: float) -> None:
    print(f"{seconds:6.1f}s {row['status']:8} {row['field']} {row.get('why', '')[:150]}", file=sys.stderr,
          flush=True)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shard", help="i/n: decide every n-th field starting at the i-th (1-based)")
    ap.add_argument("--merge", type=int, metavar="N", help="write the table from the N shards in SHARD_DIR")
    ap.add_argument("--prove", help="comma-separated fields: re-decide only those rows of the committed table")
    ap.add_argument("--modelled-only", action="store_true", help="re-read launch.MODELLED (no SGLang)")
    a = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    if a.modelled_only:
        TABLE.write_text(json.dumps(reclassify_modelled(json.loads(TABLE.read_text())), indent=1) + "\n")
        print(f"rewrote the static rows of {TABLE}")
        return 0
    if a.merge:
        rows, order = [], None
        for i in range(1, a.merge + 1):
            part = json.loads((SHARD_DIR / f"shard-{i}-of-{a.merge}.json").read_text())
            rows += part["rows"]
            order = part["order"]
        table = merged(rows, order)
        TABLE.write_text(json.dumps(table, indent=1) + "\n")
        counts: dict = {}
        for r in table["rows"]:
            counts[r["status"]] = counts.get(r["status"], 0) + 1
        print(f"wrote {TABLE}: {len(table['rows'])} fields, {counts}")
        return 0
    sys.path.insert(0, str(HERE))
    from cpu_workarounds import quiet_sglang_logs

    quiet_sglang_logs()
    if a.prove:
        only = set(a.prove.split(","))
        rows, _ = build_rows(only=only, progress=_progress)
        old = json.loads(TABLE.read_text())
        new = {r["field"]: r for r in rows}
        old["rows"] = [new.get(r["field"], r) for r in old["rows"]]
        TABLE.write_text(json.dumps(old, indent=1) + "\n")
        print(f"rewrote {len(rows)} rows of {TABLE}")
        return 0
    i, n = (int(x) for x in (a.shard or "1/1").split("/"))
    rows, order = build_rows(shard=(i, n), progress=_progress)
    SHARD_DIR.mkdir(parents=True, exist_ok=True)
    out = SHARD_DIR / f"shard-{i}-of-{n}.json"
    out.write_text(json.dumps({"shard": [i, n], "order": order, "rows": rows}, indent=1) + "\n")
    if n == 1:
        TABLE.write_text(json.dumps(merged(rows, order), indent=1) + "\n")
    print(f"wrote {out}: {len(rows)} rows")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
