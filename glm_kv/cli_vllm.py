"""``glm-kv plan --vllm-args`` and ``glm-kv compare``: vLLM 0.33.0's plan, and SGLang beside it (issue 33).

Rendering and argument checks only (cli.py's rule): the vLLM plan is ``ledgers.vllm.vllm_plan``, the
side-by-side figures are ``ledgers.compare``; the SGLang side is the plan ``glm-kv plan`` computes (the
same ``cli._sglang_plan``, passed in). Bad input: one line naming the flag and the rule, exit 2; a launch vLLM
itself refuses: its stage and words, exit 3.
"""
from __future__ import annotations

import json
import sys

from .errors import ProfileError, one_line
from .units import fmt_bytes

REFUSED_EXIT = 3


def _vllm_launch(args):
    """The launch from --vllm-args (a pasted command) or --vllm-profile (a YAML file), the model as
    load_hf_config takes it, and the GPU (--gpu, else the file's, else H200; both and different: refused)."""
    from .inputs.vllm_launch import parse_vllm_command, resolve_model

    command, profile = getattr(args, "vllm_args", None), getattr(args, "vllm_profile", None)
    if (command is None) == (profile is None):
        raise ProfileError("--vllm-args", "give one vLLM launch: a pasted command (--vllm-args) or a YAML file "
                                          "(--vllm-profile)")
    file_gpu = None
    if command is not None:
        launch = parse_vllm_command(command)
    else:
        from .inputs.vllm_profile import load_vllm_profile

        launch, file_gpu = load_vllm_profile(profile)
    if args.gpu and file_gpu and args.gpu != file_gpu:
        raise ProfileError("--gpu", f"{args.gpu} beside the profile's gpu {file_gpu}: give one")
    return launch, resolve_model(launch.model), _check_gpu(args.gpu or file_gpu or "H200")


def _vllm_args(launch, gpu: str, kv_cache_memory_bytes=None):
    from .ledgers.vllm import VllmArgs

    return VllmArgs(gpu=gpu, **launch.vllm_fields(kv_cache_memory_bytes))


def _vllm_plan(config, vargs):
    """``vllm_plan``, its NotModelled as bad input (exit 2, named)."""
    from .inputs.vllm_launch import VllmNotModelled
    from .ledgers.vllm import NotModelled, vllm_plan

    try:
        return vllm_plan(config, vargs)
    except NotModelled as e:
        raise VllmNotModelled("--vllm-args", f"vLLM 0.33.0 serves this launch but glm-kv does not model {e}") from None


def _check_gpu(gpu: str) -> str:
    from .ledgers.vllm import GPU_CAPABILITY

    if gpu not in GPU_CAPABILITY:
        raise ProfileError("--gpu", f"must be one of {', '.join(GPU_CAPABILITY)} (the GPUs whose vLLM backend "
                                    f"choice is derived), got {gpu!r}")
    return gpu


def _print_refusal(refused: dict, as_json: bool) -> int:
    if as_json:
        print(json.dumps({"refused": refused}, indent=2))
    print(f"glm-kv: vLLM 0.33.0 refuses this launch at {refused['stage']} ({refused['type']}): "
          f"{one_line(refused['message'], 2000)}", file=sys.stderr)
    return REFUSED_EXIT


def cmd_plan_vllm(args) -> int:
    """``glm-kv plan --vllm-args "vllm serve ..." | --vllm-profile FILE [--gpu H200] [--json]``."""
    from .inputs.hf_config import load_hf_config

    if args.profile is not None or args.sglang_args is not None or args.set:
        raise ProfileError("--vllm-args", "plans vLLM alone: leave out --profile, --sglang-args and --set "
                                          "(glm-kv compare puts the two engines side by side)")
    launch, model, gpu = _vllm_launch(args)
    config = load_hf_config(model)
    plan = _vllm_plan(config, _vllm_args(launch, gpu))
    if plan.refused is not None:
        return _print_refusal(plan.refused, args.json)
    if args.json:
        d = {"model": config.name, "gpu": gpu, **plan.to_dict()}
        if launch.inert:
            d["inert_flags"] = list(launch.inert)
        print(json.dumps(d, indent=2, allow_nan=False))
        return 0
    render_vllm_plan(plan, config.name, gpu, launch)
    return 0


def render_vllm_plan(plan, model: str, gpu: str, launch) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from .ledgers.compare import vllm_blocks_per_request

    t = Table(title=escape(f"glm-kv plan: vLLM {plan.vllm_version} ({one_line(model)}, {gpu} sm_"
                           f"{plan.gpu_capability[0]}{plan.gpu_capability[1]}, tp {plan.tp})"))
    for c in ("ledger", "quantity", "per rank"):
        t.add_column(c, justify="right" if c == "per rank" else "left")
    kinds: dict[str, int] = {}
    for _, spec in plan.layers:
        kinds[spec.kind] = kinds.get(spec.kind, 0) + 1
    rows = [
        ("launch", "max_model_len", f"{plan.max_model_len:,}"),
        ("launch", "decode context parallel (-dcp)", f"{plan.decode_context_parallel_size}"),
        ("launch", "kv_cache_dtype / layout", f"{plan.kv_cache_dtype} / {plan.layout}"),
        ("launch", "prefix caching / mamba_cache_mode",
         f"{'on' if plan.enable_prefix_caching else 'off'} / {plan.mamba_cache_mode}"),
        ("launch", "KV memory (--kv-cache-memory-bytes)", fmt_bytes(plan.kv_cache_memory_bytes)),
        *[("backends", "attention backend", escape(b)) for b in plan.attention_backends],
        ("specs", "layers by spec kind", ", ".join(f"{k} x {n}" for k, n in kinds.items())),
        ("blocks", "cache_block_size / mamba_block_size",
         f"{plan.cache_block_size} / {plan.mamba_block_size if plan.mamba_block_size is not None else '-'}"),
        ("blocks", "KV cache groups", f"{len(plan.groups)}"),
        ("blocks", "bytes per block (all groups)", f"{plan.bytes_per_block:,} B"),
        ("blocks", "num_blocks (with the null block)", f"{plan.num_blocks:,}"),
        ("blocks", f"blocks per request of {plan.max_model_len:,} tokens",
         f"{vllm_blocks_per_request(plan, plan.max_model_len):,}"),
        ("capacity", "GPU KV cache size", f"{plan.gpu_kv_cache_size_tokens:,} tokens"),
        ("capacity", f"Maximum concurrency for {plan.max_model_len:,} tokens per request",
         plan.maximum_concurrency_printed),
    ]
    for r in rows:
        t.add_row(*r)
    con = Console(width=None if sys.stdout.isatty() else 140)
    con.print(t)
    con.print(escape(f"gpu: {gpu} (glm-kv's --gpu: vLLM has no GPU flag)"), highlight=False)
    if launch.inert:
        con.print(escape("inert (not EngineArgs fields: vLLM's sizing cannot see them): "
                         + " ".join(one_line(w, 200) for w in launch.inert)), highlight=False)


def _model_key(model: str) -> str:
    """One spelling per model: the shipped short name, else the config file's resolved path."""
    from pathlib import Path

    from .inputs.hf_config import shipped_name

    name = shipped_name(model)
    if name is not None:
        return name
    p = Path(model)
    return str((p / "config.json" if p.is_dir() else p).resolve())


def cmd_compare(args, sglang_plan) -> int:
    """``glm-kv compare --sglang-args ... --vllm-args ... [--gpu G] [--context N] [--same-kv-bytes] [--json]``;
    ``sglang_plan``: cli's ``_sglang_plan``, the function ``glm-kv plan`` plans with (passed in, not imported:
    cli imports this module)."""
    import argparse

    from .inputs.hf_config import load_hf_config
    from .ledgers.compare import sglang_pool_bytes, sglang_side, vllm_side

    if args.sglang_args is None or (args.vllm_args is None and args.vllm_profile is None):
        raise ProfileError("compare", "needs both --sglang-args and --vllm-args (one launch command per engine)")
    launch, vmodel, gpu = _vllm_launch(args)   # every input read before anything is computed
    sets = list(args.set or []) + ([f"gpu={gpu}"] if gpu != "H200" or args.gpu else [])
    splan, _ = sglang_plan(argparse.Namespace(profile=None, sglang_args=args.sglang_args, set=sets))
    if splan.gpu.name != gpu:
        raise ProfileError("--gpu", f"the SGLang plan is for {splan.gpu.name}, the vLLM one for {gpu}: one GPU "
                                    f"for both (give --gpu)")
    if _model_key(splan.profile.model) != _model_key(vmodel):
        raise ProfileError("--vllm-args", f"names {launch.model!r}, the SGLang command {splan.profile.model!r}: "
                                          f"compare one model")
    vtp = launch.engine_args.get("tensor_parallel_size", 1)
    if splan.profile.tp_size != vtp:
        raise ProfileError("--vllm-args", f"tensor parallel {vtp}, the SGLang command --tp-size "
                                          f"{splan.profile.tp_size}: compare the same TP (the same GPUs per "
                                          f"deployment)")
    if splan.capacity is None:
        raise ProfileError("--sglang-args", "the SGLang plan states no memory, so no capacity to compare")
    own = launch.engine_args.get("kv_cache_memory_bytes")
    if args.same_kv_bytes or not own:
        mem, source = sglang_pool_bytes(splan), ("the SGLang plan's token + state pool bytes per rank"
                                                 + (" (--same-kv-bytes)" if args.same_kv_bytes
                                                    else " (the vLLM command gives no --kv-cache-memory-bytes)"))
    else:
        mem, source = own, "--kv-cache-memory-bytes"
    config = load_hf_config(vmodel)
    vargs = _vllm_args(launch, gpu, mem)
    if args.same_kv_bytes:
        from dataclasses import replace

        vargs = replace(vargs, kv_cache_memory_bytes=mem)
    vplan = _vllm_plan(config, vargs)
    if vplan.refused is not None:
        return _print_refusal(vplan.refused, args.json)
    context = args.context if args.context is not None else vplan.max_model_len
    for limit, what in ((vplan.max_model_len, "vLLM's max_model_len"),
                        (splan.profile.context_length, "SGLang's context length")):
        if context > limit:
            raise ProfileError("--context", f"{context:,} is above {what} ({limit:,}): that engine refuses "
                                            f"such requests")
    sides = [sglang_side(splan, context), vllm_side(vplan, gpu, vargs.max_num_seqs, context, source)]
    if args.json:
        print(json.dumps({"model": config.name, "gpu": gpu, "tp": vtp, "context": context,
                          "vllm_kv_bytes_source": source, "engines": [s.to_dict() for s in sides],
                          "inert_flags": {"vllm": list(launch.inert)}}, indent=2, allow_nan=False))
        return 0
    render_compare(sides, config.name, gpu, vtp, context)
    return 0


def render_compare(sides, model: str, gpu: str, tp: int, context: int) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    s, v = sides
    t = Table(title=escape(f"glm-kv compare: {one_line(model)} on {tp} x {gpu}, requests of {context:,} tokens"))
    for c in ("quantity", s.engine, v.engine):
        t.add_column(c, justify="left" if c == "quantity" else "right")
    rows = [
        ("KV + state pool bytes per rank", fmt_bytes(s.kv_bytes_per_rank), fmt_bytes(v.kv_bytes_per_rank)),
        ("workers (each with its own pools)", f"{s.workers} (attention DP)", f"{v.workers} (TP engine)"),
        ("tokens that fit per worker", f"{s.tokens_per_worker:,}", f"{v.tokens_per_worker:,}"),
        ("state slots per worker", "-" if s.state_slots_per_worker is None else f"{s.state_slots_per_worker:,}",
         "- (one block pool)"),
        ("vLLM blocks (num_blocks / per request)", "-", f"{v.num_blocks:,} / {v.blocks_per_request:,}"),
        ("request cap per worker", f"{s.request_cap_per_worker:,}", f"{v.request_cap_per_worker:,}"),
        (f"requests of {context:,} tokens per worker", f"{s.requests_per_worker:,}", f"{v.requests_per_worker:,}"),
        ("binds", s.binds, v.binds),
        (f"requests of {context:,} tokens in all", f"{s.requests_total:,}", f"{v.requests_total:,}"),
        (f"vLLM's Maximum concurrency at {v.max_model_len:,}", "-", v.maximum_concurrency_printed),
    ]
    for r in rows:
        t.add_row(*r)
    con = Console(width=None if sys.stdout.isatty() else 140)
    con.print(t)
    for line in (f"vLLM KV memory: {v.kv_bytes_source}", f"vLLM request cap: {v.request_cap_source}",
                 f"SGLang: {s.kv_bytes_source}; tokens: {s.tokens_source}",
                 f"vLLM tokens: {v.tokens_source}; requests: (num_blocks - 1 null block) // blocks per request, "
                 f"at most max_num_seqs",
                 *([f"SGLang's {s.workers} attention-DP workers each hold their own requests; vLLM is one engine over "
                    f"its TP ranks (each rank holds its share of every request's KV: for MLA a copy of the latent "
                    f"row); vLLM's data parallel (-dp) is not modelled"] if s.workers > 1 else [])):
        con.print(escape(line), highlight=False)


def cmd_verify_vllm(args, render) -> int:
    """``glm-kv verify --boot-log FILE --vllm-args "vllm serve ..." [--gpu G] [--json]``: vLLM 0.33.0's boot lines
    against glm-kv's vLLM plan. Exit 0 when every checked line agrees, 1 on a disagreement, 2 on bad input, 3 when
    the log states no sizing line. Without --kv-cache-memory-bytes in the command the per-rank KV memory is read
    off the log (``ledgers.vllm_verify``; the notes say so). ``render``: cli's ``render_verify`` (passed in: cli
    imports this module)."""
    from dataclasses import replace

    from .inputs.hf_config import load_hf_config
    from .inputs.vllm_boot_log import read_vllm_boot_log
    from .ledgers.verify import NothingToVerify
    from .ledgers.vllm_verify import verify_vllm_boot_log

    launch, model, gpu = _vllm_launch(args)
    log = read_vllm_boot_log(args.boot_log)
    given = launch.engine_args.get("kv_cache_memory_bytes")
    vargs = _vllm_args(launch, gpu, given or 1)   # every field the command sets, checked
    if not given:
        vargs = replace(vargs, kv_cache_memory_bytes=0)   # the memory is the log's (vllm_verify reads it)
    config = load_hf_config(model)
    try:
        res = verify_vllm_boot_log(config, vargs, log, label=f"{config.name} on {vargs.tp} x {gpu} (vLLM 0.33.0)")
    except NothingToVerify as e:
        if args.json:
            print(json.dumps({"ok": None, "nothing_to_verify": True, "looked_for": e.looked_for,
                              "found": e.found}, indent=1))
        print(f"glm-kv verify: {one_line(str(e), 4000)}", file=sys.stderr)
        return REFUSED_EXIT
    if args.json:
        print(json.dumps(res.to_dict(), indent=1, allow_nan=False))
    else:
        render(res, res.label)
    return 0 if res.ok else 1
