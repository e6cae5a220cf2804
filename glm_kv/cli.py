"""``glm-kv``: plan, measure and book from the command line.

The top of the layering: all argument parsing and terminal rendering live here; the layers below
return typed objects. Bad input prints one line naming the field and the rule on stderr and
exits 2, never a traceback.
"""
from __future__ import annotations

import argparse
import json
import sys

from .errors import ProfileError
from .units import fmt_bytes


def _profile_from_args(args):
    from .inputs.launch import parse_launch_command
    from .inputs.profile import load_profile, parse_override

    overrides: dict = {}
    ignored: list[str] = []
    if args.sglang_args:
        fields, ignored = parse_launch_command(args.sglang_args)
        if not args.profile:
            # A launch command describes a real server: start from what SGLang 0.5.23 does.
            overrides.update({"name": "launch-command", "sglang_layout": "0.5.23",
                              "max_running_requests": None, "kv_cache_dtype": "auto",
                              "context_length": None,
                              "dsa_prefill_backend": None, "dsa_decode_backend": None})
        overrides.update(fields)
    for item in args.set or []:
        key, value = parse_override(item)
        overrides[key] = value
    return load_profile(args.profile, overrides), ignored


def render_plan(plan, ignored: list[str]) -> None:
    from rich.console import Console
    from rich.table import Table

    p, tok, req, tail, cap, host = plan.profile, plan.token, plan.request, plan.tail, plan.capacity, plan.host
    t = Table(title=f"glm-kv plan: {p.label} (layout {p.sglang_layout}, {plan.gpu.name}, "
                    f"tp {p.tp_size}, attn_tp {plan.parallel.attn_tp_size}, attn_dp {plan.parallel.attn_dp_size})",
              show_lines=False)
    t.add_column("ledger")
    t.add_column("quantity")
    t.add_column("per rank", justify="right")
    rows = [
        ("token", "kv_cache_dtype / layout", f"{tok.kv_cache_dtype} / {tok.kv_layout}"),
        ("token", "kv_cache_dim", f"{tok.kv_cache_dim}"),
        ("token", f"KV over {tok.num_full_layers} full layers", f"{tok.kv_bytes_per_token:,} B/token"),
        ("token", "indexer K", f"{tok.indexer_bytes_per_token:,} B/token"),
        ("token", "cell_size (token budget divisor)", f"{tok.cell_size_bytes:,} B/token"),
        ("token", "page_size / indexer page", f"{tok.page_size} / {tok.indexer_page_bytes:,} B"),
        ("request", "conv / temporal state", f"{tuple(req.conv_state_shape)} bf16 / "
                                               f"{tuple(req.temporal_state_shape)} {req.temporal_dtype}"),
        ("request", f"state slot ({req.num_linear_layers} KDA layers)", fmt_bytes(req.state_slot_bytes)),
        ("request", f"slots per request ({req.mamba_strategy})", f"{req.slots_per_request}"),
        ("request", "KDA state per request", fmt_bytes(req.state_bytes_per_request)),
        ("tail", f"compress tail ({tail.rows} rows x {tail.width})", fmt_bytes(tail.bytes)),
    ]
    if cap is not None:
        rows += [
            ("capacity", "rest for pools", fmt_bytes(cap.available_bytes)),
            ("capacity", "max_mamba_cache_size", f"{cap.max_mamba_cache_size:,}"),
            ("capacity", "Mamba Cache size", fmt_bytes(cap.mamba_pool_bytes)),
            ("capacity", "max_total_num_tokens", f"{cap.max_total_num_tokens:,}"),
            ("capacity", "KV Cache size", fmt_bytes(cap.token_pool_bytes)),
            ("capacity", "max_running_requests (per worker)",
             f"{cap.max_running_requests_per_worker:,} (binds: {cap.binding_limit})"),
        ]
    rows.append(("host", "HostPoolGroup entries", ", ".join(host.entries)))
    rows.append(("host", "host KV row / token", f"{host.kv_row_bytes} B / {host.kv_bytes_per_token:,} B"))
    if host.total_host_bytes is not None:
        rows.append(("host", "host pools total", fmt_bytes(host.total_host_bytes)))
    for r in rows:
        t.add_row(*r)
    console = Console()
    console.print(t)
    for note in plan.notes:
        console.print(f"note: {note}")
    if ignored:
        console.print("ignored (no effect on memory): " + " ".join(ignored))


def cmd_plan(args) -> int:
    from .ledgers.plan import compute_plan

    profile, ignored = _profile_from_args(args)
    plan = compute_plan(profile)
    if args.json:
        d = plan.to_dict()
        if ignored:
            d["ignored_flags"] = ignored
        print(json.dumps(d, indent=2))
    else:
        render_plan(plan, ignored)
    return 0


def cmd_profiles(args) -> int:
    from .inputs.profile import load_profile, shipped_profiles

    for name in shipped_profiles():
        print(f"{name:24s} {load_profile(name).description}")
    return 0


def render_measure(report) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    con = Console(width=None if sys.stdout.isatty() else 160)
    a = report.allocations[-1]
    t = Table(title=escape(f"glm-kv measure: {report.profile} (layout {report.layout}, {report.device}, "
                           f"{report.mode}; {a.sizes})"))
    for c in ("buffer", "shape", "dtype", "measured B", "ledger B", "match"):
        t.add_column(c, justify="right" if c.endswith("B") else "left", no_wrap=c != "match")
    for r in a.rows:
        mark = "-" if r.match is None else ("yes" if r.match else "NO")
        if r.shares_storage_with:
            mark += f" (shares storage with {r.shares_storage_with})"
        t.add_row(escape(r.name), str(tuple(r.shape)), r.dtype, f"{r.measured_bytes:,}",
                  "-" if r.ledger_bytes is None else f"{r.ledger_bytes:,}", escape(mark))
    con.print(t)
    out = []
    for al in report.allocations:
        out.append(f"at {al.sizes}: device storage {al.device_storage_bytes:,} B, host storage "
                   f"{al.host_storage_bytes:,} B, every buffer {'matches' if al.ok else 'does NOT match'}")
        for c in al.checks:
            out.append(f"  {c['check']}: measured {c['measured']:,} vs {c['ledger']:,} -> "
                       f"{'yes' if c['match'] else 'NO'}")
    for c in report.linear:
        if c["group"] == "fixed":
            out.append(f"fixed: {c['bytes'][0]:,} B at both sizes ({c['ledger_source']}) -> "
                       f"{'yes' if c['match'] else 'NO'}")
            continue
        out.append(f"linear ({c['group']}): {c['bytes'][0]:,} -> {c['bytes'][1]:,} B at {c['unit']} "
                   f"{c['sizes'][0]} -> {c['sizes'][1]}: {c['measured_per_unit']:,} B per unit "
                   f"(ledger {c['ledger_per_unit']:,} = {c['ledger_source']}) + {c['fixed_bytes']:,} fixed "
                   f"-> {'yes' if c['match'] else 'NO'}")
    for r in report.full_profile:
        extra = ""
        if "difference" in r:
            extra = f"; differs from the plan's pool figure by {r['difference']:,} B"
        out.append(f"full profile ({r['group']}), {r['label']}: {r['formula']} = "
                   f"{r['bytes']:,} B; count from {r['count_source']}{extra}")
    for r in report.not_allocated:
        out.append(f"not allocated: {r['what']}: {r['why']}")
    for r in report.not_on_host:
        out.append(f"no host copy: {r['what']}: {r['why']}")
    out.append(report.cuda)
    out.extend(report.notes)
    out.append("OK: measured == ledger for every buffer" if report.ok else "MISMATCH: see the rows marked NO")
    for line in out:
        con.print(escape(line), highlight=False)


def cmd_measure(args) -> int:
    """``glm-kv measure``: 0 when every buffer matches, 1 on any mismatch, 3 when refused."""
    try:
        import torch  # noqa: F401
    except ImportError:
        print("glm-kv: error: measure needs torch (pip install 'glm-kv[tensors]')", file=sys.stderr)
        return 2
    from .ledgers.plan import compute_plan
    from .tensors.budget import AllocationRefused
    from .tensors.measure import measure_profile

    profile, _ = _profile_from_args(args)
    plan = compute_plan(profile)
    device = getattr(args, "device", None)
    if device and device.startswith("cuda") and not torch.cuda.is_available():
        print("glm-kv: error: --device cuda: no CUDA device is available here", file=sys.stderr)
        return 2
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


def cmd_book(args) -> int:
    """``glm-kv book``: every chapter per profile, or ``--refresh`` the committed notebooks."""
    from .book.runner import BookError, refresh_committed, run_book

    try:
        if getattr(args, "refresh", False):
            for p in refresh_committed():
                print(f"executed {p}")
            return 0
        res = run_book(getattr(args, "profile", None), getattr(args, "out", "_build/profiles"),
                       html=not getattr(args, "no_html", False))
    except BookError as e:
        print(f"glm-kv book: error: {e}", file=sys.stderr)
        return 1
    print(f"books: {', '.join(b.slug for b in res.books)}; index: {res.index}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="glm-kv", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)

    def profile_args(sp, many: bool = False):
        if many:
            sp.add_argument("--profile", action="append", help="shipped name or YAML file (repeatable)")
        else:
            sp.add_argument("--profile", help="shipped profile name or YAML file (default: article)")
        sp.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a profile field")
        sp.add_argument("--sglang-args", metavar="COMMAND", help="a pasted sglang.launch_server command")

    sp = sub.add_parser("plan", help="every ledger and the capacity for a profile")
    profile_args(sp)
    sp.add_argument("--json", action="store_true", help="print the plan-contract JSON")
    sp.set_defaults(func=cmd_plan)

    sp = sub.add_parser("profiles", help="list the shipped profiles")
    sp.set_defaults(func=cmd_profiles)

    sp = sub.add_parser("measure", help="allocate SGLang-shaped tensors and compare with the ledgers")
    profile_args(sp)
    sp.add_argument("--json", action="store_true")
    sp.add_argument("--budget-bytes", type=int, default=None, help="allocation budget for the reduced pools")
    sp.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    sp.add_argument("--full", action="store_true", help="allocate the full profile (GPU only, when it fits)")
    sp.add_argument("--host", action="store_true", default=None,
                    help="allocate the HiCache host pools too (default: when the profile enables HiCache)")
    sp.set_defaults(func=cmd_measure)

    sp = sub.add_parser("book", help="execute the chapters per profile and build the HTML books")
    sp.add_argument("--profile", action="append", help="profile to build (repeatable; default: all shipped)")
    sp.add_argument("--out", default="_build/profiles", help="output folder")
    sp.add_argument("--no-html", action="store_true", help="execute the notebooks only")
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


if __name__ == "__main__":
    sys.exit(main())
