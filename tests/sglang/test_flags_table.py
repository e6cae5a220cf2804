"""The 0.5.23 flag table is complete and its *inert* rows are proven by SGLang's own sizing (issue 20).

* completeness: one row per field of the installed wheel's ``ServerArgs``, with the wheel's own long
  options, in the wheel's order; every modelled row is a flag ``glm_kv.inputs.launch`` reads.
* proof: for every inert row, ``flag_table.prove_inert`` runs SGLang's resolution + fraction + rest +
  ``config_from_budget`` + ``resolve_max_num_reqs`` on the CPU (oracle_memory.sglang_memory) for each
  proof profile with and without the row's ``proof.argv``; nothing may move.
* planted errors: flags that do move the pools, marked inert, fail that same proof.
"""
from __future__ import annotations

import json

import pytest

try:  # outside the SGLang venv this module must still import (conftest skips every test here)
    import flag_table as ft
    TABLE = json.loads(ft.TABLE.read_text())
except ImportError:
    ft, TABLE = None, {"rows": []}

INERT = [r for r in TABLE["rows"] if r["status"] == "inert"]


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


def test_modelled_rows_are_the_launch_readers_flags(sglang_ready):
    from glm_kv.inputs.launch import CHECKED, DERIVED, FLAGS, MODELLED, REFUSED_BY_SGLANG, RUNTIME_ONLY

    modelled = {r["field"] for r in TABLE["rows"] if r["status"] == "modelled"}
    assert modelled == set(MODELLED)
    for r in TABLE["rows"]:
        if r["status"] == "modelled" and r["field"] != "model_path":
            # read into a profile field (FLAGS), checked for its value only (CHECKED: nothing moves) or
            # read after the pools are sized (RUNTIME_ONLY: test_flags_dspark.py sizes the same pools) or
            # folded into other fields (DERIVED: the CUDA-graph bs list and JSON, test_flags_graph.py)
            assert any(f in FLAGS or f in CHECKED or f in RUNTIME_ONLY or f in DERIVED for f in r["flags"]), r
        if r["field"] in REFUSED_BY_SGLANG:   # refused in SGLang's words, in the table as on the command line
            assert r["status"] == "refused" and r["why"] == REFUSED_BY_SGLANG[r["field"]], r


@pytest.mark.parametrize("row", INERT, ids=[r["field"] for r in INERT])
def test_inert_row_moves_no_pool_byte(base, row):
    p = ft.parser()
    ns = p.parse_args(["--model-path", "unused", *row["proof"]["argv"]])
    why = ft.prove_inert(row["field"], {row["field"]: getattr(ns, row["field"])}, base)
    assert why is None, f"{row['field']} {row['proof']['argv']}: {why}"


# Planted errors: flags that move SGLang's pools, as if someone marked them inert.
MOVERS = [("mem_fraction_static", ["--mem-fraction-static", "0.7"]),
          ("max_total_tokens", ["--max-total-tokens", "100000"]),
          ("cuda_graph_max_bs_decode", ["--cuda-graph-max-bs-decode", "600"]),
          ("mamba_full_memory_ratio", ["--mamba-full-memory-ratio", "0.5"]),
          ("max_mamba_cache_size", ["--max-mamba-cache-size", "40"])]


@pytest.mark.parametrize("field,argv", MOVERS, ids=[m[0] for m in MOVERS])
def test_a_flag_that_moves_the_pools_fails_the_proof(base, field, argv):
    ns = ft.parser().parse_args(["--model-path", "unused", *argv])
    why = ft.prove_inert(field, {field: getattr(ns, field)}, base)
    assert why is not None and "moves the pools" in why, why
