"""``glm-kv``: plan, measure and book from the command line.

The top of the layering: all argument parsing and terminal rendering live here; the layers below
return typed objects. Each command imports only what it needs, inside its function (issue 23):
``plan``/``verify`` with ``--json`` load no numpy, torch, pandas, pydantic or rich
(``tests/test_imports.py``); ``advise`` needs numpy (its candidate grid is vectorised). Bad input prints one line naming the field and the rule on stderr and
exits 2, never a traceback.
"""
from __future__ import annotations

import argparse
import json
import sys

from .errors import ProfileError, one_line, shown
from .inputs.rules import rules_for
from .units import fmt_bytes


# The profile a command without --profile plans: the book's default (a 0.5.23 deployment, issue 21),
# so `glm-kv plan` and the first page of `make book` give the same answer. The article's example
# stays a shipped profile (`--profile article`).
from .book.default_profile import BOOK_DEFAULT_PROFILE as DEFAULT_PROFILE  # noqa: E402


def _profile_from_args(args):
    from .inputs.profile import load_profile, parse_override

    overrides: dict = {}
    ignored: list[str] = []
    if args.sglang_args is not None:  # "" is refused, not taken as "no command"
        from .inputs.launch import parse_launch_command

        fields, ignored = parse_launch_command(args.sglang_args)
        if not args.profile:
            # A launch command describes a real server: every field it omits is SGLang 0.5.23's
            # default (the profile fields' defaults are SGLang's), not the article's example.
            overrides["name"] = "launch-command"
        overrides.update(fields)
    for item in args.set or []:
        key, value = parse_override(item)
        overrides[key] = value
    if args.sglang_args is not None and not args.profile:
        # SGLang's defaults, not the article's example deployment (its GPU, weights, description)
        from .inputs.profile import make_profile

        profile = make_profile(overrides)
    else:
        profile = load_profile(DEFAULT_PROFILE if args.profile is None else args.profile, overrides)
    if args.sglang_args is not None and rules_for(profile).strict_launch_flags:
        # modelling 0.5.23: every flag must be one its parser takes (else the server would not start)
        _, ignored = parse_launch_command(args.sglang_args, layout=profile.sglang_layout)
    if ignored:
        # an inert flag SGLang refuses beside this launch's other settings (startup.CONDITIONAL_REFUSALS)
        from .inputs.launch import inert_flags
        from .inputs.resolve import resolve
        from .inputs.startup import validate_inert_flags

        validate_inert_flags(profile, inert_flags(ignored), resolve)
    return profile, ignored


# One vocabulary (issue 29, book/notation.md): "binds" is only ever what limits the requests of the
# profile's context that fit at once; what set SGLang's own max_running_requests is "set by".
BINDS_WORDS = {"requested": "requests asked for", "tokens": "token slots", "mamba": "state slots"}
STATE_WORDS = {"kda_state": "KDA", "gdn_state": "Gated DeltaNet", "mamba2_state": "Mamba-2"}
CAP_WORDS = {"requested": "--max-running-requests", "auto": "SGLang's automatic value",
             "tokens": "token slots", "mamba": "state slots"}


def render_plan(plan, ignored: list[str]) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from .ledgers.derivations import binding_at_context, requests_fit

    p, tok, req, tail, cap, host = plan.profile, plan.token, plan.request, plan.tail, plan.capacity, plan.host
    t = Table(title=f"glm-kv plan: {escape(one_line(p.label))} ({escape(one_line(plan.config.name))}, "
                    f"layout {p.sglang_layout}, {plan.gpu.name}, "
                    f"tp {p.tp_size}, attn_tp {plan.parallel.attn_tp_size}, attn_dp {plan.parallel.attn_dp_size})",
              show_lines=False)
    t.add_column("ledger")
    t.add_column("quantity")
    t.add_column("per rank", justify="right")
    state = STATE_WORDS.get(req.state_kind or "", "state")
    rows = [(("layers", f"{kind} x {d['layers']}",
              f"{d['bytes_per_layer']:,} B per layer per {'state slot' if d['pool'] == 'state' else 'token'}"
              + (" (SWA pool)" if d['pool'] == 'swa' else "")))
            for kind, d in plan.layers.by_kind().items()]
    rows += [
        ("token", "kv_cache_dtype / layout", f"{tok.kv_cache_dtype} / {tok.kv_layout}"),
        ("token", "kv_cache_dim", f"{tok.kv_cache_dim}"),
        ("token", f"KV over {tok.num_full_layers} full layers", f"{tok.kv_bytes_per_token:,} B/token"),
        ("token", "indexer K", f"{tok.indexer_bytes_per_token:,} B/token"),
        ("token", "cell_size (token budget divisor)", f"{tok.cell_size_bytes:,} B/token"),
        ("token", "page_size / indexer page", f"{tok.page_size} / {tok.indexer_page_bytes:,} B"),
    ]
    if plan.hybrid:
        rows += [
            ("request", "conv / temporal state", f"{tuple(req.conv_state_shape)} bf16 / "
                                                   f"{tuple(req.temporal_state_shape)} {req.temporal_dtype}"),
            ("request", f"state slot ({req.num_linear_layers} {state} layers)", fmt_bytes(req.state_slot_bytes)),
            ("request", f"slots per request ({req.mamba_strategy})", f"{req.slots_per_request}"),
            ("request", f"{state} state per request", fmt_bytes(req.state_bytes_per_request)),
        ]
    if tail.rows:
        rows.append(("tail", f"compress tail ({tail.rows} rows x {tail.width})", fmt_bytes(tail.bytes)))
    if cap is not None:
        rows += [
            *([("capacity", f"mem_fraction_static ({plan.memory.mem_fraction_source})",
                f"{plan.memory.mem_fraction_static:.6g}")] if plan.memory else []),
            *([("capacity", f"free before weights ({plan.memory.pre_model_load_source})",
                fmt_bytes(plan.memory.pre_model_load_bytes, "GiB")),
               ("capacity", f"weights on the rank ({plan.memory.weights_source})",
                fmt_bytes(plan.memory.weights_bytes, "GiB"))]
              if plan.memory and plan.memory.weights_bytes is not None and p.available_bytes is None else []),
            ("capacity", "rest for pools", fmt_bytes(cap.available_bytes)),
            *([("capacity", "max_mamba_cache_size", f"{cap.max_mamba_cache_size:,}"),
               ("capacity", "Mamba Cache size", fmt_bytes(cap.mamba_pool_bytes))] if plan.hybrid else []),
            ("capacity", "max_total_num_tokens", f"{cap.max_total_num_tokens:,}"),
            # hybrid SWA (issue 32): the SWA pool beside the full one (swa_layer_tokens in SGLang's log)
            *([("capacity", "SWA pool tokens (swa_layer_tokens)", f"{cap.swa_max_total_num_tokens:,}")]
              if cap.swa_max_total_num_tokens is not None else []),
            ("capacity", "KV Cache size", fmt_bytes(cap.token_pool_bytes)),
            ("capacity", "max_running_requests (per worker)",
             f"{cap.max_running_requests_per_worker:,} (set by: {CAP_WORDS[cap.binding_limit]})"),
            ("capacity", f"requests of {plan.args.context_length:,} tokens that fit",
             f"{requests_fit(plan).value:,} (binds: {BINDS_WORDS[binding_at_context(plan)]})"),
        ]
    if host.retraction_backup is not None:   # a PD decode server: host_pool builds the host pools without HiCache
        rows.append(("host", "decode retraction backup", host.retraction_backup))
    rows.append(("host", "HostPoolGroup entries", ", ".join(host.entries)))
    rows.append(("host", "host KV row / token", f"{host.kv_row_bytes} B / {host.kv_bytes_per_token:,} B"))
    if host.swa_tokens is not None:   # hybrid SWA with HiCache (issue 32): the SWA host pool
        rows.append(("host", "host SWA pool", f"{host.swa_tokens:,} tokens x {host.swa_bytes_per_token:,} B"))
    if host.total_host_bytes is not None:
        rows.append(("host", "host pools total", fmt_bytes(host.total_host_bytes)))
    for r in rows:
        t.add_row(*r)
    console = Console()
    console.print(t)
    for note in plan.notes:
        console.print(escape(f"note: {one_line(note, 2000)}"))  # user text is never markup
    if ignored:
        console.print(escape("inert (proven: SGLang 0.5.23's own sizing does not move with them): "
                             + " ".join(one_line(w, 200) for w in ignored)))


def _sglang_plan(args):
    """The one SGLang resolution: the profile from --profile / --sglang-args / --set, planned. ``plan``
    and ``compare`` both call this, so compare's SGLang side is the plan ``plan`` prints."""
    from .ledgers.plan import compute_plan

    profile, ignored = _profile_from_args(args)
    return compute_plan(profile), ignored


def cmd_plan(args) -> int:
    if getattr(args, "vllm_args", None) is not None or getattr(args, "vllm_profile", None) is not None:
        from .cli_vllm import cmd_plan_vllm

        return cmd_plan_vllm(args)
    if getattr(args, "gpu", None) is not None:
        raise ProfileError("--gpu", "is for --vllm-args (vLLM has no GPU flag); an SGLang plan takes --set gpu=...")
    profile, ignored = _profile_from_args(args)
    from .inputs.hf_config import is_dsv4_model

    if is_dsv4_model(profile.model):   # issue 32: DeepSeek-V4's own pools (DSV4PoolConfigurator)
        return _dsv4_plan(profile, ignored, args.json)
    from .ledgers.plan import compute_plan

    plan = compute_plan(profile)
    if args.json:
        d = plan.to_dict()
        if ignored:
            d["ignored_flags"] = ignored   # kept for consumers of the first contract
            d["inert_flags"] = ignored     # the same list, by what it is: proven inert (flag table)
        print(json.dumps(d, indent=2, allow_nan=False))  # JSON has no Infinity/NaN
    else:
        render_plan(plan, ignored)
    return 0


# launch flags DeepSeek-V4's sizing reads (get_exec().kernel / .features, get_schedule(), get_memory() in
# DSV4PoolConfigurator and DeepSeekV4TokenToKVPool)
DSV4_SIZING_FLAGS = ("--dsv4-", "--enable-deepseek-v4-fp4-indexer", "--swa-prefix-tails",
                     "--enable-encoder-swa-bounded-replay", "--enable-decoder-swa-bounded-replay", "--enable-hisparse",
                     "--hisparse")


def _dsv4_plan(profile, ignored, as_json: bool) -> int:
    """``glm-kv plan`` for DeepSeek-V4: its JSON, or a table of its pools."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from .ledgers.dsv4_plan import dsv4_plan

    # the flag table proves flags inert on GLM-5.3-Flash; those DeepSeek-V4's own sizing reads are not inert here
    for flag in ignored:
        name = flag.split()[0]
        if name.startswith(DSV4_SIZING_FLAGS):
            raise ProfileError(name, "is read by SGLang 0.5.23's DeepSeek-V4 pool sizing (DSV4PoolConfigurator, "
                                     "DeepSeekV4TokenToKVPool) and is not modelled for DeepSeek-V4 yet")
    plan = dsv4_plan(profile)
    d = plan.to_dict()
    if ignored:
        d["inert_flags"] = ignored
    if as_json:
        print(json.dumps(d, indent=2, allow_nan=False))
        return 0
    tok, cap = d["token"], d["capacity"]
    t = Table(title=f"glm-kv plan: {plan.config.name} on {profile.label} (SGLang 0.5.23, DeepSeek-V4 pools)")
    for col in ("ledger", "quantity", "value"):
        t.add_column(col)
    rows = [("token", "page_size / kv_cache_dtype", f"{tok['page_size']} / {tok['kv_cache_dtype']}"),
            ("token", "SWA pool bytes / token (all layers)", f"{tok['swa_kv_bytes_per_token']:,}"),
            ("token", "compressed bytes / full token", f"{tok['compressed_bytes_per_full_token']:,}"),
            ("token", "SWA sizing", tok["swa_mode"]),
            ("request", "c128 compress state / request", fmt_bytes(d["request"]["c128_state_bytes_per_request"])),
            ("memory", "mem_fraction_static", f"{cap['mem_fraction_static']:.6g} ({cap['mem_fraction_static_source']})"),
            *([("memory", "weights per rank (target + draft)",
                f"{fmt_bytes(cap['weights_bytes'])} ({cap['weights_bytes_source']})")] if cap["weights_bytes"] else []),
            ("capacity", "bytes for the pools", f"{fmt_bytes(cap['available_bytes'])} ({cap['available_source']})"),
            ("capacity", "max_total_num_tokens (full)", f"{cap['max_total_num_tokens']:,}"),
            ("capacity", "SWA pool tokens", f"{cap['swa_max_total_num_tokens']:,}"),
            ("capacity", "c4 / c128 tokens", f"{cap['c4_max_total_num_tokens']:,} / {cap['c128_max_total_num_tokens']:,}"),
            ("capacity", "c4 / c128 state rows", f"{cap['c4_state_pool_size']:,} / {cap['c128_state_pool_size']:,}"),
            ("capacity", "max_running_requests (per worker)", f"{cap['max_running_requests']:,}"),
            *[("capacity", f"{k} pool", fmt_bytes(v)) for k, v in cap["pool_bytes"].items()],
            ("capacity", "pools total", fmt_bytes(cap["token_pool_bytes"]))]
    for r in rows:
        t.add_row(*r)
    console = Console()
    console.print(t)
    for note in plan.notes:
        console.print(escape(f"note: {one_line(note, 2000)}"))
    return 0


def render_advice(adv) -> None:
    from rich.console import Console
    from rich.markup import escape

    con = Console(width=None if sys.stdout.isatty() else 160)
    p, w, cap = adv.plan.profile, adv.workload, adv.plan.capacity
    out = [f"glm-kv advise: {w.concurrent_requests} requests x {w.sizing_tokens:,} tokens "
           f"(+{w.prefix_cache_tokens:,} prefix tokens per worker) on {p.label}"]
    if adv.fits:
        out.append("fits. SGLang 0.5.23 flags:")
    elif adv.flags:
        lf = adv.largest_fitting
        other = (f"{w.concurrent_requests} requests of {lf.tokens_per_request:,} tokens" if lf.tokens_per_request
                 else f"no context fits {w.concurrent_requests} requests (their state slots alone exceed the memory)")
        out.append(f"does NOT fit (binding: {lf.binding_resource}). Largest that fits: "
                   f"{lf.concurrent_requests} requests of {w.sizing_tokens:,} tokens; {other}. Flags for the first:")
    else:
        out.append(f"does NOT fit: not one request of {w.sizing_tokens:,} tokens fits "
                   f"(binding: {adv.largest_fitting.binding_resource})")
    if adv.flags:
        out.append("  " + " ".join(adv.flags))
    stateless = adv.plan.request.slots_per_request == 0   # no state layers (DeepSeek-V3.2, GLM-5.1): no slots
    if cap is not None:
        slots = "" if stateless else f"{cap.max_mamba_cache_size:,} state slots, "
        own = "profile's own flags" if stateless else "profile's own split"
        out += [f"per worker: {cap.max_total_num_tokens:,} tokens, {slots}"
                f"max_running_requests {cap.max_running_requests_per_worker:,} (set by: {CAP_WORDS[cap.binding_limit]})",
                f"requests of this size that fit at once: {adv.served_per_worker:,} per worker "
                f"({own}: {adv.served_per_worker_default:,}; at p50: {adv.served_per_worker_p50:,}); "
                f"runs out of {adv.binding_resource} first",
                f"radix cache headroom: {adv.token_headroom:,} tokens" + ("" if stateless else
                f", {adv.slot_headroom:,} state slots (reserved {adv.slots_reserved:,}, resident {adv.slots_resident:,})")]
    if adv.host is not None and adv.host.hicache_ratio is not None:
        h = adv.host
        mamba = "" if stateless else f", {h.mamba_slots:,} mamba slots"
        by = "" if stateless else f", {h.prefixes_by_mamba:,} by mamba"
        out.append(f"host tier per rank: {h.kv_tokens:,} KV tokens{mamba} "
                   f"({fmt_bytes(h.total_bytes)} of {fmt_bytes(h.budget_bytes_per_rank)}): "
                   f"{h.prefixes_by_kv:,} prefixes by KV{by}")
    out += [f"note: {n}" for n in adv.notes]
    for line in out:
        con.print(escape(line), highlight=False)


def cmd_advise(args) -> int:
    from .inputs.workload_spec import is_workload_key, load_workload, parse_workload_override
    from .ledgers.advise import advise

    workload_sets, profile_sets = {}, []
    for item in args.set or []:
        if is_workload_key(item):
            key, value = parse_workload_override(item)
            workload_sets[key] = value
        else:
            profile_sets.append(item)
    workload = load_workload(args.workload, workload_sets)
    profile, _ = _profile_from_args(argparse.Namespace(**{**vars(args), "set": profile_sets}))
    adv = advise(profile, workload)
    if args.json:
        print(json.dumps(adv.to_dict(), indent=2))
    else:
        render_advice(adv)
    return 0


def cmd_profiles(args) -> int:
    from .inputs.profile import load_profile, shipped_profiles

    for name in shipped_profiles():
        print(f"{name:24s} {load_profile(name).description}")
    return 0


def cmd_models(args) -> int:
    """Every architecture glm-kv plans (its configs and their source), and SGLang 0.5.23's hybrids it does not."""
    from .inputs.catalog import catalog

    cat = catalog()
    if args.json:
        print(json.dumps(cat, indent=2))
        return 0
    print(f"planned (SGLang {cat['sglang_version']} layout):")
    for r in cat["planned"]:
        print(f"  {r['architecture'] or '(any architecture)'}  [{', '.join(r['model_types'])}]  {r['layers']}")
        for c in r["configs"]:
            print(f"      {c['model']:34s} {', '.join(c['files'])}")
            print(f"      {'':34s} from {c['source']}")
            if c.get("sglang_refuses"):   # SGLang 0.5.23 does not start the checkpoint as shipped
                print(f"      {'':34s} SGLang refuses it as shipped: {c['sglang_refuses']}")
        if not r["configs"]:
            print("      no vendored config: a config.json of this model_type is read")
    print("not planned (SGLang serves them):")
    for r in cat["not_planned"]:
        print(f"  {r['sglang']}  [{r['model_types']}]  {r['reason']}: {r['detail']}")
    return 0


def _sizes_text(sizes: dict) -> str:
    """An allocation's sizes as words (tokens 256, mamba slots 1, ...), never a Python dict."""
    return ", ".join(f"{k.replace('_', ' ')} {v:,}" for k, v in sizes.items())


def _gib(n: int | float | None) -> str:
    """GiB (2^30) with the exact bytes beside it."""
    if n is None:
        return "-"
    return f"{n / 2**30:,.3f} GiB ({n:,} B)"


def render_measure(report) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    con = Console(width=None if sys.stdout.isatty() else 180)
    a = report.allocations[-1]
    t = Table(title=escape(f"glm-kv measure: {report.profile} (layout {report.layout}, {report.device}, "
                           f"{report.mode}; {_sizes_text(a.sizes)})"))
    for c in ("buffer", "shape", "dtype", "measured B", "ledger B", "match", "CUDA block B", "overhead B"):
        t.add_column(c, justify="right" if c.endswith("B") else "left", no_wrap=c != "match")
    for r in a.rows:
        mark = "-" if r.match is None else ("yes" if r.match else "NO")
        if r.shares_storage_with:
            mark += f" (shares storage with {r.shares_storage_with})"
        block = r.cuda_block_bytes
        t.add_row(escape(r.name), str(tuple(r.shape)), r.dtype, f"{r.measured_bytes:,}",
                  "-" if r.ledger_bytes is None else f"{r.ledger_bytes:,}", escape(mark),
                  "-" if block is None else f"{block:,}",
                  "-" if block is None else f"{block - r.measured_bytes:,}")
    con.print(t)
    s = Table(title="allocations and checks")
    for c in ("sizes", "what", "measured", "expected", "match"):
        s.add_column(c, justify="right" if c in ("measured", "expected") else "left")
    for al in report.allocations:
        where = _sizes_text(al.sizes)
        s.add_row(escape(where), "device storage", _gib(al.device_storage_bytes), "-", "-")
        if al.host_storage_bytes:
            s.add_row(escape(where), "host storage", _gib(al.host_storage_bytes), "-", "-")
        if al.cuda_overhead_bytes is not None:
            s.add_row(escape(where), escape(f"allocator overhead beside the ledger ({al.allocator})"),
                      _gib(al.cuda_overhead_bytes), "-", "-")
        s.add_row(escape(where), "every buffer == its ledger", "-", "-", "yes" if al.ok else "NO")
        for c in al.checks:
            s.add_row(escape(where), escape(c["check"]), f"{c['measured']:,}", f"{c['ledger']:,}",
                      "yes" if c["match"] else "NO")
    for c in report.linear:
        if c["group"] == "fixed":
            s.add_row("both sizes", escape(f"fixed bytes ({c['ledger_source']})"), f"{c['bytes'][0]:,}",
                      f"{c['bytes'][1]:,}", "yes" if c["match"] else "NO")
            continue
        s.add_row(escape(f"{c['unit'].replace('_', ' ')} {c['sizes'][0]} -> {c['sizes'][1]}"),
                  escape(f"{c['group']}: bytes per unit (ledger: {c['ledger_source']}); "
                         f"{c['fixed_bytes']:,} B fixed"),
                  f"{c['measured_per_unit']:,}", f"{c['ledger_per_unit']:,}", "yes" if c["match"] else "NO")
    con.print(s)
    if report.full_profile:
        f = Table(title="the full profile")
        for c in ("group", "count", "bytes", "how", "vs the plan's pool figure"):
            f.add_column(c, justify="right" if c in ("count", "bytes") else "left")
        for r in report.full_profile:
            diff = f"{r['difference']:+,} B" if "difference" in r else "-"
            f.add_row(r["group"], f"{r['count']:,}", _gib(r["bytes"]), escape(f"{r['label']}: {r['formula']}"),
                      escape(diff + (f" ({r['difference_note']})" if r.get("difference_note") else "")))
        con.print(f)
    out = []
    for r in report.not_allocated:
        out.append(f"not allocated: {r['what']}: {r['why']}")
    for r in report.not_on_host:
        out.append(f"no host copy: {r['what']}: {r['why']}")
    out.append(report.cuda)
    out.extend(report.notes)
    out.append("OK: measured == ledger for every buffer" if report.ok else "MISMATCH: see the rows marked NO")
    for line in out:
        con.print(escape(line), highlight=False)


def _check_device(device: str | None, torch) -> str | None:
    """``--device``: cpu, cuda or cuda:N (N an existing device), auto; anything else exits 2."""
    import re

    if device is None or device == "auto":
        return device
    if not re.fullmatch(r"cpu|cuda(:\d{1,3})?", device):
        raise ProfileError("--device", f"must be cpu, cuda, cuda:N or auto, got {shown(device)}")
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            raise ProfileError("--device", f"{device}: no CUDA device is available here")
        index = int(device.partition(":")[2] or 0)
        if index >= torch.cuda.device_count():
            raise ProfileError("--device", f"{device}: only {torch.cuda.device_count()} CUDA device(s) here")
    return device


def _budget_bytes(text: str) -> int:
    """``--budget-bytes``: a positive whole number of bytes (at most 1 PiB)."""
    from .tensors.budget import parse_budget_bytes

    try:
        return parse_budget_bytes(text, "--budget-bytes")
    except ProfileError as e:
        raise argparse.ArgumentTypeError(e.rule) from None


def cmd_measure(args) -> int:
    """``glm-kv measure``: 0 when every buffer matches, 1 on any mismatch, 3 when refused."""
    try:
        import torch  # noqa: F401
    except ImportError:
        print("glm-kv: error: measure needs torch (pip install 'glm-kv[tensors]')", file=sys.stderr)
        return 2
    from .ledgers.plan import compute_plan
    from .tensors.budget import AllocationRefused, default_budget_bytes
    from .tensors.measure import measure_profile

    # validate every input before anything is allocated: device, budget (option and env), profile
    device = _check_device(getattr(args, "device", None), torch)
    if getattr(args, "budget_bytes", None) is None:
        default_budget_bytes()  # GLM_KV_BUDGET_BYTES: refused here, with its name, when malformed
    profile, _ = _profile_from_args(args)
    plan = compute_plan(profile)
    try:
        report = measure_profile(plan, device=device,
                                 budget=getattr(args, "budget_bytes", None),
                                 full=True if getattr(args, "full", False) else None,
                                 host=getattr(args, "host", None))
    except AllocationRefused as e:
        print(f"glm-kv: {e}", file=sys.stderr)
        return 3
    if getattr(args, "json", False):
        print(json.dumps(report.to_dict(), indent=1))
    else:
        render_measure(report)
    return 0 if report.ok else 1


def render_verify(res, label: str | None = None) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    con = Console(width=None if sys.stdout.isatty() else 160)
    t = Table(title=escape(f"glm-kv verify: {label or res.plan.profile.label} against the boot log"))
    for c in ("line", "rank", "quantity", "predicted", "logged", "unit", "verdict"):
        t.add_column(c, justify="right" if c in ("line", "predicted", "logged") else "left")
    for r in res.rows:
        pred = "-" if r.predicted is None else (f"{r.predicted}" if r.predicted_range is None
                                                 else f"{r.predicted_range[0]} .. {r.predicted_range[1]}")
        verdict = r.note or "-" if r.ok is None else ("agrees" if r.ok else "DISAGREES")
        t.add_row(str(r.log_line), escape(r.rank), escape(r.quantity), escape(pred), escape(str(r.logged)),
                  r.unit, escape(verdict))
    con.print(t)
    for k, v in res.inputs_from_log.items():
        con.print(escape(f"input: {k} = {v}"), highlight=False)
    for n in res.notes:
        con.print(escape(f"note: {n}"), highlight=False)
    for r in res.rows:
        if r.ok is False and r.note:
            con.print(escape(f"line {r.log_line} {r.quantity}: {r.note}"), highlight=False)
    con.print("OK: every checked line agrees" if res.ok else "DISAGREES: see the rows marked DISAGREES")


def cmd_verify(args) -> int:
    """``glm-kv verify``: 0 when every checked line agrees, 1 on a disagreement, 2 on bad input,
    3 when the log states no pool ("nothing to verify": the lines looked for and those found)."""
    from .inputs.boot_log import read_boot_log
    from .ledgers.verify import NothingToVerify, verify_boot_log

    if getattr(args, "vllm_args", None) is not None or getattr(args, "vllm_profile", None) is not None:
        from .cli_vllm import cmd_verify_vllm

        if args.profile or args.sglang_args or args.set:
            raise ProfileError("--vllm-args", "a vLLM boot log is checked against a vLLM launch only: drop "
                                              "--profile / --sglang-args / --set")
        return cmd_verify_vllm(args, render_verify)
    log = read_boot_log(args.boot_log)
    profile, _ = _profile_from_args(args)
    try:
        res = verify_boot_log(profile, log)
    except NothingToVerify as e:
        if args.json:
            print(json.dumps({"ok": None, "nothing_to_verify": True, "looked_for": e.looked_for,
                              "found": e.found}, indent=1))
        print(f"glm-kv verify: {one_line(str(e), 4000)}", file=sys.stderr)
        return 3
    if args.json:
        print(json.dumps(res.to_dict(), indent=1, allow_nan=False))
    else:
        render_verify(res)
    return 0 if res.ok else 1


def cmd_book(args) -> int:
    """``glm-kv book``: every chapter per profile, or ``--refresh`` the committed notebooks."""
    from .book.runner import BookError, refresh_committed, run_book

    for prof in getattr(args, "profile", None) or []:
        _check_book_profile(prof)  # exit 2 before any progress line or staging folder
    try:
        if getattr(args, "refresh", False):
            for p in refresh_committed():
                print(f"executed {p}")
            return 0
        res = run_book(getattr(args, "profile", None), getattr(args, "out", "_build/profiles"),
                       html=not getattr(args, "no_html", False), jobs=getattr(args, "jobs", None))
    except BookError as e:
        print(f"glm-kv book: error: {e}", file=sys.stderr)
        return 1
    print(f"books: {', '.join(b.slug for b in res.books)}; index: {res.index}")
    return 0


def _check_book_profile(prof: str) -> None:
    """A profile given to ``glm-kv book`` must load and plan before anything is created (any model: another
    model than GLM-5.3-Flash gets the pages that read the same for every model, ``runner.model_book``)."""
    from .inputs.profile import load_profile
    from .ledgers.plan import compute_plan

    compute_plan(load_profile(prof))


def _jobs(text: str) -> int:
    """``--jobs``: a whole number of kernels, at least 1."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {n}")
    return n


def _positive_int(text: str) -> int:
    """``--context``: a whole number of tokens, at least 1 (at most 2**40)."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text[:40]!r}") from None
    if not 1 <= n <= 2**40:
        raise argparse.ArgumentTypeError(f"must be between 1 and 2**40, got {n}")
    return n


def _cmd_compare(args) -> int:
    from .cli_vllm import cmd_compare

    return cmd_compare(args, _sglang_plan)


class _Parser(argparse.ArgumentParser):
    """argparse with its usage errors on one escaped line (exit 2), like every other bad input."""

    def error(self, message: str):  # type: ignore[override]
        print(f"{self.prog}: error: {one_line(message, 400)}", file=sys.stderr)
        sys.exit(2)


def build_parser() -> argparse.ArgumentParser:
    ap = _Parser(prog="glm-kv", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)

    def profile_args(sp, many: bool = False):
        if many:
            sp.add_argument("--profile", action="append", help="shipped name or YAML file (repeatable)")
        else:
            sp.add_argument("--profile", help=f"shipped profile name or YAML file (default: {DEFAULT_PROFILE})")
        sp.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a profile field")
        sp.add_argument("--sglang-args", metavar="COMMAND", help="a pasted sglang.launch_server command")

    sp = sub.add_parser("plan", help="every ledger and the capacity for a profile")
    profile_args(sp)
    sp.add_argument("--json", action="store_true", help="print the plan-contract JSON")
    sp.add_argument("--vllm-args", metavar="COMMAND", help="a pasted `vllm serve ...` command: vLLM 0.33.0's plan")
    sp.add_argument("--vllm-profile", metavar="FILE", help="a YAML file: model and VllmArgs fields (gpu, tp, ...)")
    sp.add_argument("--gpu", metavar="NAME", help="the GPU for --vllm-args (vLLM has no GPU flag; default H200)")
    sp.set_defaults(func=cmd_plan)

    sp = sub.add_parser("compare", help="SGLang 0.5.23 and vLLM 0.33.0 side by side: tokens and requests that fit")
    sp.add_argument("--sglang-args", metavar="COMMAND", help="a pasted sglang.launch_server command")
    sp.add_argument("--vllm-args", metavar="COMMAND", help="a pasted `vllm serve ...` command (same model and TP)")
    sp.add_argument("--vllm-profile", metavar="FILE", help="or a YAML file: model and VllmArgs fields")
    sp.add_argument("--set", action="append", metavar="KEY=VALUE", help="override an SGLang profile field")
    sp.add_argument("--gpu", metavar="NAME", help="the GPU of both (default H200)")
    sp.add_argument("--context", type=_positive_int, metavar="N",
                    help="tokens per request (default: vLLM's max_model_len)")
    sp.add_argument("--same-kv-bytes", action="store_true",
                    help="give vLLM the SGLang plan's token + state pool bytes per rank as --kv-cache-memory-bytes "
                         "(also the default when the vLLM command gives none)")
    sp.add_argument("--json", action="store_true", help="print both engines' figures as JSON")
    sp.set_defaults(func=_cmd_compare)

    sp = sub.add_parser("advise", help="the SGLang flags that serve a workload on a profile")
    profile_args(sp)
    sp.add_argument("--workload", help="shipped workload name or YAML file (or give every field with --set; "
                                       "--set keys that name workload fields go to the workload)")
    sp.add_argument("--json", action="store_true", help="print the advice JSON (fits, flags, binding_limit, "
                                                         "plan, largest_fitting)")
    sp.set_defaults(func=cmd_advise)

    sp = sub.add_parser("profiles", help="list the shipped profiles")
    sp.set_defaults(func=cmd_profiles)

    sp = sub.add_parser("models", help="list the architectures glm-kv plans (configs, sources) and those it does not")
    sp.add_argument("--json", action="store_true", help="print {sglang_version, planned, not_planned}")
    sp.set_defaults(func=cmd_models)

    sp = sub.add_parser("measure", help="allocate SGLang-shaped tensors and compare with the ledgers")
    profile_args(sp)
    sp.add_argument("--json", action="store_true")
    sp.add_argument("--budget-bytes", type=_budget_bytes, default=None, help="allocation budget for the reduced pools")
    sp.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    sp.add_argument("--full", action="store_true", help="allocate the full profile (GPU only, when it fits)")
    sp.add_argument("--host", action="store_true", default=None,
                    help="allocate the HiCache host pools too (default: when the profile enables HiCache)")
    sp.set_defaults(func=cmd_measure)

    sp = sub.add_parser("verify", help="check a real SGLang 0.5.23 boot log against the plan, line by line")
    sp.add_argument("--boot-log", required=True, metavar="FILE", help="the server's log (stdout/stderr)")
    profile_args(sp)
    sp.add_argument("--vllm-args", metavar="COMMAND", help="the `vllm serve ...` command whose vLLM 0.33.0 boot log "
                                                           "this is (instead of an SGLang profile)")
    sp.add_argument("--vllm-profile", metavar="FILE", help="the vLLM launch as a YAML file")
    sp.add_argument("--gpu", help="the vLLM launch's GPU (H200 or B200; default H200)")
    sp.add_argument("--json", action="store_true", help="print {ok, lines, inputs_from_log}")
    sp.set_defaults(func=cmd_verify)

    sp = sub.add_parser("book", help="execute the chapters per profile and build the HTML books")
    sp.add_argument("--profile", action="append", help="profile to build (repeatable; default: all shipped)")
    sp.add_argument("--out", default="_build/profiles", help="output folder")
    sp.add_argument("--no-html", action="store_true", help="execute the notebooks only")
    sp.add_argument("--jobs", type=_jobs, default=None, metavar="N",
                    help="kernels at once, shared by every profile (default: the number of cores, os.cpu_count())")
    sp.add_argument("--refresh", action="store_true",
                    help="re-execute the committed notebooks in place for the default profile")
    sp.set_defaults(func=cmd_book)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except ProfileError as e:
        print(f"glm-kv: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        print("glm-kv: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
