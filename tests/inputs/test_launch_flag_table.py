"""Every flag of SGLang 0.5.23 is modelled, proven inert, or refused by name (issue 20); no SGLang needed.

The table itself is generated from the wheel and its inert rows proven in tests/sglang/test_flags_table.py;
here every row is driven through ``parse_launch_command`` and the CLI the way a pasted command is.
"""
from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from glm_kv.cli import main
from glm_kv.errors import ProfileError
from glm_kv.inputs.launch import CHECKED, DERIVED, FLAGS, RUNTIME_ONLY, MODELLED, REFUSED_BY_SGLANG, NotModelled, flag_table, parse_launch_command, \
    sglang_0523_flags

LAUNCH = "python -m sglang.launch_server --model-path zai-org/GLM-5.3-Flash"
ROWS = json.loads((Path(__file__).resolve().parents[2] / "glm_kv" / "inputs" / "data"
                   / "sglang-0.5.23-flag-table.json").read_text())["rows"]


def _fragment(flag: str) -> str:
    nargs = sglang_0523_flags()[flag]
    return flag if nargs == 0 else f"{flag} 1"


def test_table_matches_the_parser_flag_list():
    """The flag table and the argparse flag list come from the same wheel: the same options."""
    in_rows = {f for r in ROWS for f in r["flags"]}
    assert in_rows == set(sglang_0523_flags()) - {"--config", "--help"}


def test_no_row_is_left_unclassified():
    assert {r["status"] for r in ROWS} == {"modelled", "inert", "refused", "no-flag"}
    assert {r["field"] for r in ROWS if r["status"] == "modelled"} == set(MODELLED)
    for r in ROWS:
        assert r["status"] != "refused" or r.get("why"), r
        assert r["status"] != "inert" or r["proof"]["argv"][0] in r["flags"], r


@pytest.mark.parametrize("row", [r for r in ROWS if r["status"] == "refused"], ids=lambda r: r["field"])
def test_refused_flag_is_named_and_not_modelled(row):
    flag = row["flags"][0]
    with pytest.raises(NotModelled) as e:
        parse_launch_command(f"{LAUNCH} {_fragment(flag)}", layout="0.5.23")
    assert e.value.field == flag or (len(flag) > 60 and e.value.field.startswith(flag[:40]))
    # the table's reason, as SGLang decided it: its own refusal, the pool its sizing moves, or the CPU reason
    assert e.value.rule == row["why"][:len(e.value.rule)] or "cannot start" in e.value.rule, e.value.rule
    assert "not modelled by glm-kv" not in e.value.rule and "SGLang 0.5.23" in e.value.rule, e.value.rule


@pytest.mark.parametrize("row", [r for r in ROWS if r["status"] == "inert"], ids=lambda r: r["field"])
def test_inert_flag_is_accepted_and_listed(row):
    argv = row["proof"]["argv"]
    fields, inert = parse_launch_command(" ".join([LAUNCH, shlex.join(argv)]), layout="0.5.23")   # a JSON value stays one
    # a companion the proof carries (``--enable-priority-scheduling`` beside ``--retraction-policy priority``)
    # is read as the modelled switch it is (it resolves a decode server's retraction backup)
    companions = {FLAGS[w][0]: True for w in argv[1:] if w in FLAGS and FLAGS[w][1] == "flag"}
    listed = [w for w in argv if not (w in FLAGS and FLAGS[w][1] == "flag")]
    assert [w for i in inert for w in shlex.split(i)] == listed and inert[0].startswith(argv[0])
    assert fields == {"model": "glm-5.3-flash", "weights_estimate": True, **companions}


def test_the_word_ignored_needs_proof(monkeypatch):
    """Planted error: a flag the table does not prove inert must not come back as accepted."""
    row = next(r for r in ROWS if r["field"] == "cpu_offload_gb")
    assert row["status"] == "refused"
    with pytest.raises(NotModelled):
        parse_launch_command(f"{LAUNCH} --cpu-offload-gb 10", layout="0.5.23")
    patched = {f: dict(r, status="inert") if r["field"] == "cpu_offload_gb" else r for f, r in flag_table().items()}
    monkeypatch.setattr("glm_kv.inputs.launch.flag_table", lambda: patched)
    _, inert = parse_launch_command(f"{LAUNCH} --cpu-offload-gb 10", layout="0.5.23")
    assert inert == ["--cpu-offload-gb 10"]   # what the test above would catch


@pytest.mark.parametrize("cmd,flag,words", [
    ("--enable-unified-memory", "--enable-unified-memory", ("cannot start", "qk_rope_head_dim")),
    # DFLASH is modelled now: a Hub id with no local config.json is refused naming the draft path
    ("--speculative-algorithm DFLASH --speculative-draft-model-path z-lab/x", "speculative_draft_model_path",
     ("'z-lab/x'", "no readable config.json")),
    # DSPARK is modelled now: with no draft folder (and no <model>/dspark/), SGLang's own refusal
    ("--speculative-algorithm DSPARK", "speculative_draft_model_path",
     ("DSpark dense speculative decoding requires setting --speculative-draft-model-path",)),
    # modelled now (the replay ring, tests/sglang/test_flags_replayssm_graph.py); the decode ring SGLang refuses
    ("--enable-linear-replayssm", "--enable-linear-replayssm", ("cannot start", "no_buffer only supports page_size=1")),
    ("--dcp-size 2", "--dcp-size", ("cannot start", "index_kpool=4")),
    # inert only beside its companion (arg_groups/validation_hook.py; a fresh-clone sample, seed 21810787)
    ("--retraction-policy priority", "--retraction-policy", ("requires --enable-priority-scheduling",)),
    ("--retraction-policy=priority --enable-metrics", "--retraction-policy", ("requires --enable-priority-scheduling",)),
    ("--export-metrics-to-file", "--export-metrics-to-file", ("--export-metrics-to-file-dir is required",)),
    ("--kv-canary-sweep-interval 5", "--kv-canary-sweep-interval", ("requires --kv-canary in {log, raise}",)),
    ("--kv-canary-sweep-interval 5 --kv-canary none", "--kv-canary-sweep-interval", ("requires --kv-canary",)),
    # inert flags SGLang refuses beside other settings (startup.CONDITIONAL_REFUSALS; tests/sglang/test_flags_conditional.py)
    ("--enable-watermark --disaggregation-mode prefill", "--enable-watermark", ("not supported with PD",)),
    ("--enable-tp-lm-head-all-to-all", "--enable-tp-lm-head-all-to-all", ("requires attention DP",)),
    ("--enable-lmcache --enable-hierarchical-cache", "--enable-lmcache", ("mutually exclusive",)),
    ("--weight-cache-mode daemon --speculative-algorithm EAGLE", "--weight-cache-mode", ("speculative decoding",)),
    ("--mamba-track-interval 259", "--mamba-track-interval", ("multiple of the page size",)),
    ("--hicache-host-memory-mode buffer_only --enable-hicache", "--hicache-host-memory-mode",
     ("requires a storage backend",)),
    ("--hicache-host-memory-mode buffer_only --enable-hicache --disaggregation-mode decode "
     "--disaggregation-decode-enable-radix-cache --hicache-storage-backend file", "--hicache-host-memory-mode", ("not supported on decode instances",)),
    ("--disaggregation-mode decode --disaggregation-decode-enable-radix-cache --disaggregation-transfer-backend fake",
     "--disaggregation-transfer-backend", ("incompatible with --disaggregation-transfer-backend fake",)),
])
def test_public_commands_refused_by_name(capsys, cmd, flag, words):
    rc = main(["plan", "--sglang-args", f"{LAUNCH} --tp-size 2 {cmd}"])
    out, err = capsys.readouterr()
    assert rc == 2 and out == "" and err.count("\n") == 1 and flag in err and "ignored" not in err
    for w in words:
        assert w in err, err


def test_unknown_flag_exits_2_naming_it(capsys):
    rc = main(["plan", "--sglang-args", f"{LAUNCH} --zzz-not-a-flag 1"])
    assert rc == 2 and "--zzz-not-a-flag" in capsys.readouterr().err


def test_modelled_flags_are_read():
    read = (*FLAGS, *CHECKED, *RUNTIME_ONLY, *DERIVED)
    for field in MODELLED:
        assert field == "model_path" or any(r["field"] == field and any(f in read for f in r["flags"])
                                            for r in ROWS), field
    assert set(REFUSED_BY_SGLANG) <= {r["field"] for r in ROWS if r["status"] == "refused"}


def test_syntax_errors_come_before_not_modelled():
    with pytest.raises(ProfileError) as e:
        parse_launch_command(f"{LAUNCH} --cpu-offload-gb 10 --tp-size x", layout="0.5.23")
    assert not isinstance(e.value, NotModelled) and e.value.field == "--tp-size"


@pytest.mark.parametrize("flags", ["--attention-backend fa3", "--disable-custom-all-reduce",
                                   "--attention-backend fa3 --disable-custom-all-reduce --tokenizer-mode slow"])
def test_pasted_commands_with_inert_flags_give_a_plan(capsys, flags):
    """Issue 30: flags SGLang's own sizing proves inert (the flag table) no longer stop the plan."""
    rc = main(["plan", "--sglang-args", f"{LAUNCH} --tp-size 8 {flags}", "--json"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    plan = json.loads(out)
    assert plan["inert_flags"] == [" ".join(w) for w in _pairs(flags.split())]
    assert plan["memory"]["mem_fraction_static"] > 0


def _pairs(words):
    out = []
    for w in words:
        if w.startswith("--"):
            out.append([w])
        else:
            out[-1].append(w)
    return out


def test_plain_cuda_graph_max_bs_is_refused_in_sglangs_words(capsys):
    """0.5.23 has --cuda-graph-max-bs-decode and -prefill: argparse refuses the plain prefix as ambiguous
    (tests/sglang/test_flags_table.py checks these are the parser's own words); the message says so and
    names the flag 0.5.23 calls it."""
    rc = main(["plan", "--sglang-args", f"{LAUNCH} --tp-size 8 --cuda-graph-max-bs 64"])
    out, err = capsys.readouterr()
    assert rc == 2 and out == "" and err.count("\n") == 1
    assert ("ambiguous option: --cuda-graph-max-bs could match --cuda-graph-max-bs-decode, "
            "--cuda-graph-max-bs-prefill") in err
    assert "0.5.23 calls it --cuda-graph-max-bs-decode" in err and "not modelled" not in err
    rc = main(["plan", "--sglang-args", f"{LAUNCH} --tp-size 8 --cuda-graph-max-bs-decode 64", "--json"])
    out, err = capsys.readouterr()
    assert rc == 0, err


def test_flag_table_summary_explains_every_refusal(tmp_path):
    """The book's flags page counts (issue 30): every field counted once, every refusal with its reason; a
    planted refused row without a reason is counted as unexplained."""
    import json

    from glm_kv.inputs.launch import flag_table_summary

    s = flag_table_summary()
    assert s["modelled"] + s["inert"] + s["refused"] + s["no-flag"] == s["fields"]
    assert s["refused_unexplained"] == 0 and s["refused_by_sglang"] > 0, s
    assert {"nnodes", "disaggregation_decode_extra_slots"} <= {
        r["field"] for r in json.loads((Path(__file__).resolve().parents[2] / "glm_kv/inputs/data/"
                                        "sglang-0.5.23-flag-table.json").read_text())["rows"]
        if r["status"] == "modelled"}
    table = json.loads((Path(__file__).resolve().parents[2] / "glm_kv/inputs/data/sglang-0.5.23-flag-table.json")
                       .read_text())
    table["rows"].append({"field": "planted", "namespace": "", "flags": ["--planted"], "status": "refused",
                          "why": "not modelled"})
    (tmp_path / "t.json").write_text(json.dumps(table))
    assert flag_table_summary(tmp_path / "t.json")["refused_unexplained"] == 1


def test_an_inert_value_with_spaces_stays_one_value(capsys):
    """Issue 30: the inert flags are listed shell-quoted, so a JSON value with spaces reads back whole
    (``inert_flags`` used to split it on spaces: '{"publisher":' and '"zmq", ...}' as two values)."""
    from glm_kv.inputs.launch import inert_flags

    config = '{"publisher": "zmq", "endpoint": "tcp://*:5557", "topic": "kv events"}'
    command = f"{LAUNCH} --tp-size 8 --kv-events-config '{config}' --tokenizer-mode slow"
    _, inert = parse_launch_command(command, layout="0.5.23")
    assert inert_flags(inert) == {"--kv-events-config": [config], "--tokenizer-mode": ["slow"]}
    assert main(["plan", "--sglang-args", command, "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)["inert_flags"]
    assert [shlex.split(i) for i in listed] == [["--kv-events-config", config], ["--tokenizer-mode", "slow"]]
