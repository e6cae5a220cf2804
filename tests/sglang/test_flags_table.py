"""The 0.5.23 flag table is complete and its SGLang-decided rows hold through SGLang (issues 20, 30).

* completeness: one row per field of the installed wheel's ``ServerArgs``, with the wheel's own long
  options, in the wheel's order; every modelled row is a flag ``glm_kv.inputs.launch`` reads.
* proof, sampled (seed GLM_KV_SEED, printed in the header): ``INERT_SAMPLE`` inert rows are re-run
  through SGLang's own sizing (``flag_table.prove``, oracle_memory.sglang_memory on every proof profile
  the row names) and must move nothing; ``REFUSED_SAMPLE`` rows refused in SGLang's words must still be
  refused by SGLang with the message the table quotes; so the committed table cannot go stale silently.
* planted errors: flags that do move the pools, marked inert, fail that same proof.
"""
from __future__ import annotations

import json
import random
import shlex

import pytest

try:  # outside the SGLang venv this module must still import (conftest skips every test here)
    import flag_table as ft
    TABLE = json.loads(ft.TABLE.read_text())
except ImportError:
    ft, TABLE = None, {"rows": []}

INERT = [r for r in TABLE["rows"] if r["status"] == "inert"]
REFUSED_BY_SGLANG_ROWS = [r for r in TABLE["rows"] if r.get("sglang_refuses") and "proof" in r]
INERT_SAMPLE, REFUSED_SAMPLE = 8, 3


def _seed() -> int:
    from tests.pytest_glm_kv import run_seed

    return run_seed()


@pytest.fixture(scope="module")
def base(sglang_ready):
    b = ft.baselines()
    assert all("errors" not in v for v in b.values()), b
    return b


def test_table_covers_every_serverargs_field(sglang_ready):
    p = ft.parser()
    by_dest = ft.options_by_dest(p)
    wheel = [(name, ns, sorted({o for a in by_dest.get(name, []) for o in a.option_strings if o.startswith("--")}))
             for name, ns, _ in ft.fields()]
    ours = [(r["field"], r["namespace"], r["flags"]) for r in TABLE["rows"]]
    assert ours == wheel
    assert len(ours) >= 500
    assert {r["status"] for r in TABLE["rows"]} <= {"modelled", "inert", "refused", "no-flag"}


def test_every_option_of_the_parser_is_in_a_row(sglang_ready):
    """Every long option of the 0.5.23 launch parser (but --help / --config) belongs to a row."""
    p = ft.parser()
    options = {o for a in p._actions for o in a.option_strings if o.startswith("--")} - {"--help", "--config"}
    in_rows = {f for r in TABLE["rows"] for f in r["flags"]}
    assert options - in_rows == set()


def test_no_bare_not_modelled_refusal():
    """Every refusal says SGLang's reason, the pool SGLang's sizing moves, or why it cannot run on a CPU."""
    for r in TABLE["rows"]:
        if r["status"] == "refused":
            assert r["why"] != "not modelled by glm-kv", r
            assert ("SGLang 0.5.23" in r["why"]), r
            assert r.get("sglang_refuses") or r.get("cpu") or r.get("moves"), r


def test_modelled_rows_are_the_launch_readers_flags(sglang_ready):
    from glm_kv.inputs.launch import CHECKED, DERIVED, FLAGS, MODELLED, REFUSED_BY_SGLANG, RUNTIME_ONLY

    modelled = {r["field"] for r in TABLE["rows"] if r["status"] == "modelled"}
    assert modelled == set(MODELLED)
    for r in TABLE["rows"]:
        if r["status"] == "modelled" and r["field"] != "model_path":
            assert any(f in FLAGS or f in CHECKED or f in RUNTIME_ONLY or f in DERIVED for f in r["flags"]), r
        if r["field"] in REFUSED_BY_SGLANG:   # refused in SGLang's words, in the table as on the command line
            assert r["status"] == "refused" and r["why"] == REFUSED_BY_SGLANG[r["field"]], r


def _argv_kwargs(field: str, argv: list[str]) -> dict:
    """The ServerArgs kwargs SGLang's parser reads off ``argv``: the field, and any companion the argv
    carries (``--retraction-policy priority`` is proven with ``--enable-priority-scheduling``)."""
    ns = ft.parser().parse_args(["--model-path", "unused", *ft._substitute(argv)])
    default = ft.parser().parse_args(["--model-path", "unused"])
    out = {k: v for k, v in vars(ns).items() if k != "model_path" and v != getattr(default, k, None)}
    out[field] = getattr(ns, field)
    return out


def _kwargs(row: dict) -> dict:
    return _argv_kwargs(row["field"], row["proof"]["argv"])


def test_sampled_inert_rows_move_no_pool_byte(base):
    """INERT_SAMPLE inert rows drawn with the run's seed, re-proven through SGLang's sizing."""
    rows = random.Random(_seed()).sample(INERT, min(INERT_SAMPLE, len(INERT)))
    assert rows
    for row in rows:
        r = ft.prove(row["field"], _kwargs(row), base)
        assert "moves" not in r, f"seed {_seed()}: {row['field']} {row['proof']['argv']}: {r}"
        assert set(r["inert_on"]) == set(row["proof"]["profiles"]), f"seed {_seed()}: {row['field']}: {r}"


def test_sampled_sglang_refusals_are_sglangs(base):
    """REFUSED_SAMPLE rows refused in SGLang's words: SGLang still refuses them, with the quoted message.

    A refusal may hold on some proof profiles only (``--qsa-indexer-dtype``: only where HiCache builds its
    host pools); glm-kv then refuses the flag on every launch, conservatively, and the row's reason quotes
    the message of a profile SGLang refuses it on. Nowhere may SGLang's sizing move a pool with it."""
    rows = random.Random(_seed() + 1).sample(REFUSED_BY_SGLANG_ROWS, min(REFUSED_SAMPLE, len(REFUSED_BY_SGLANG_ROWS)))
    for row in rows:
        r = ft.prove(row["field"], _kwargs(row), base)
        assert r["refused_on"] and "moves" not in r, f"seed {_seed()}: {row['field']}: SGLang accepts it: {r}"
        quoted = [" ".join(e["message"].split())[:200] for e in r["refused_on"].values()]
        assert any(q in row["why"] for q in quoted), (row["why"], r["refused_on"])


# Planted errors: flags that move SGLang's pools, as if someone marked them inert.
MOVERS = [("mem_fraction_static", ["--mem-fraction-static", "0.7"]),
          ("max_total_tokens", ["--max-total-tokens", "100000"]),
          ("cuda_graph_max_bs_decode", ["--cuda-graph-max-bs-decode", "600"]),
          ("mamba_full_memory_ratio", ["--mamba-full-memory-ratio", "0.5"]),
          ("max_mamba_cache_size", ["--max-mamba-cache-size", "40"]),
          ("hicache_ratio", ["--hicache-ratio", "3.0"])]   # moves only the HiCache profile's host pools


@pytest.mark.parametrize("field,argv", MOVERS, ids=[m[0] for m in MOVERS])
def test_a_flag_that_moves_the_pools_fails_the_proof(base, field, argv):
    ns = ft.parser().parse_args(["--model-path", "unused", *argv])
    why = ft.prove_inert(field, {field: getattr(ns, field)}, base)
    assert why is not None and "moves the pools" in why, why


@pytest.mark.parametrize("flag,words", [
    ("--cuda-graph-max-bs", "64"),   # a prefix of -decode and -prefill: argparse's ambiguity refusal
    ("--zzz-not-a-flag", ""),        # no such option: argparse's unrecognized-arguments refusal
])
def test_launch_parser_refusals_quote_sglangs_parser(sglang_ready, capsys, flag, words):
    """glm-kv's refusal quotes what SGLang 0.5.23's own launch parser (server_args.prepare_server_args's
    ArgumentParser) prints when it refuses the flag."""
    import argparse

    from sglang.srt.server_args import ServerArgs

    from glm_kv.errors import ProfileError
    from glm_kv.inputs.launch import parse_launch_command

    p = argparse.ArgumentParser(prog="sglang serve")
    ServerArgs.add_cli_args(p)
    with pytest.raises(SystemExit):
        p.parse_args(["--model-path", "m", flag, *words.split()])
    said = capsys.readouterr().err.strip().splitlines()[-1].split("error: ", 1)[1]
    with pytest.raises(ProfileError) as e:
        parse_launch_command(f"python -m sglang.launch_server --model-path m {flag} {words}", layout="0.5.23")
    assert f'"{said}"' in e.value.rule, (said, e.value.rule)


@pytest.mark.parametrize("argv", [["--attention-backend", "fa3"], ["--disable-custom-all-reduce"],
                                  ["--attention-backend", "flashinfer"]], ids=lambda a: " ".join(a))
def test_issue_30_commands_are_inert_through_sglang(base, argv):
    """The pasted flags of issue 30 that glm-kv now plans through: SGLang's own sizing moves nothing with
    them, at the very value the user gave (not only the table's sample value)."""
    ns = ft.parser().parse_args(["--model-path", "unused", *argv])
    dest = next(a.dest for a in ft.parser()._actions if argv[0] in a.option_strings)
    assert ft.prove_inert(dest, {dest: getattr(ns, dest)}, base) is None
    row = next(r for r in TABLE["rows"] if r["field"] == dest)
    assert row["status"] == "inert", row


# (field, its flag alone, the companion SGLang asks for): launch.NEEDS_COMPANION, each row's proof
COMPANIONS = [("retraction_policy", ["--retraction-policy", "priority"], ["--enable-priority-scheduling"]),
              ("export_metrics_to_file", ["--export-metrics-to-file"], ["--export-metrics-to-file-dir", "@MODEL@"]),
              ("kv_canary_sweep_interval", ["--kv-canary-sweep-interval", "3"], ["--kv-canary", "log"]),
              # issue 30: check_load_publish_args; its port checks: test_flags_load_publish.py
              ("load_publish_endpoint", ["--load-publish-endpoint", "auto"],
               ["--kv-events-config", '{"publisher": "zmq", "endpoint": "tcp://*:5557"}'])]


@pytest.mark.parametrize("companion", [False, True])
@pytest.mark.parametrize("field, alone, needed", COMPANIONS, ids=[c[0] for c in COMPANIONS])
def test_flags_inert_beside_their_companion(base, field, alone, needed, companion):
    """A flag SGLang refuses alone (check_server_args) on every proof profile and sizes every pool the same
    with beside its companion: glm-kv refuses it alone in SGLang's words and plans it with the companion
    (found by fresh-clone runs' samples, seeds 21810787 and 202, where glm-kv planned it alone)."""
    from glm_kv.errors import ProfileError
    from glm_kv.inputs.launch import NEEDS_COMPANION, parse_launch_command

    argv = alone + (needed if companion else [])
    r = ft.prove(field, _argv_kwargs(field, argv), base)
    assert "moves" not in r, r
    cmd = f"python -m sglang.launch_server --model-path zai-org/GLM-5.3-Flash --tp 8 {shlex.join(argv)}"
    row = next(x for x in TABLE["rows"] if x["field"] == field)
    assert alone[0] in NEEDS_COMPANION and row["status"] == "inert" and row["proof"]["argv"] == alone + needed, row
    if companion:
        assert set(r["inert_on"]) == {pid for pid, *_ in ft.PROOF_PROFILES} and not r["refused_on"], r
        fields, inert = parse_launch_command(cmd, layout="0.5.23")
        # a companion glm-kv models (--enable-priority-scheduling: a decode server's retraction backup) is a field
        from glm_kv.inputs.launch import FLAGS

        assert [w for i in inert for w in shlex.split(i)] == [w for w in argv if FLAGS.get(w, ("", ""))[1] != "flag"], inert
    else:
        assert not r["inert_on"] and r["refused_on"], r
        with pytest.raises(ProfileError) as e:
            parse_launch_command(cmd, layout="0.5.23")
        for err in r["refused_on"].values():
            assert " ".join(err["message"].split()) in str(e.value), (err, str(e.value))
