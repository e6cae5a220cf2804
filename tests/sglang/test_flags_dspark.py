"""Issue 20.2: ``--speculative-algorithm DSPARK`` with its draft, against SGLang 0.5.23 on the CPU.

DSPARK is SGLang's other "DFLASH family" algorithm (``SpeculativeAlgorithm.is_dflash_family``): the
draft checkpoint keeps its own KV pool, sized per token exactly as DFLASH's, so this file drives the
same SGLang harness as test_flags_dflash.py (``dflash_oracle``: SGLang's ``resolve_spec_aux_hidden_state_config``,
``resolve_dflash_draft_cell_size``, ``create_memory_pool_configurator(...)._cell_size``,
``_handle_max_mamba_cache``, ``config_from_budget``, its ``MHATokenToKVPool`` for the draft's device
pool). What DSPARK changes is SGLang's own too: ``_handle_dspark`` (the verify window gamma + 1, gamma 7
by default, the 48 default, its refusals), ``parse_dspark_draft_config`` (gamma from
``dspark_block_size`` or the DFLASH ``block_size``; the Markov head), the target-side markov check in
``_resolve_dflash_aux_hidden_state``, and the worker's ``resolve_runtime_config`` (mask token).

The planner flags (``--speculative-dspark-sps-table-path``, ``--speculative-dspark-confidence-sts-path``,
``--speculative-dspark-align-verify-tokens-to-graph-tier``) and ``--speculative-draft-window-size``
(SGLang: "no effect with speculative_algorithm=DSPARK") are shown to size the same pools.
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from glm_kv.errors import ProfileError
from test_flags_dflash import (DRAFT, SGLANG_ONLY, glm_kv_dflash, mismatches, nvfp4_model, sglang_dflash)

GiB = 1 << 30

# A DSpark draft for GLM-5.3-Flash in the layout SGLang reads: DFLASH's draft block (5 Qwen3-style
# layers, 8 KV heads of 128) with the Markov head DSPARK requires; gamma 7 in dflash_config, as the
# published DSpark drafts nest it.
DSPARK_CFG = {"block_size": 7, "mask_token_id": 154856, "markov_rank": 64, "markov_head_type": "gated"}


def write_dspark(tmp_path, name="dspark-draft", *, dflash_config=DSPARK_CFG, **over) -> str:
    cfg = {**DRAFT, "architectures": ["DSparkDraftModel"], **over}
    if dflash_config is None:
        cfg.pop("dflash_config", None)
    else:
        cfg["dflash_config"] = dict(dflash_config)
    d = tmp_path / name
    d.mkdir(parents=True)
    (d / "config.json").write_text(json.dumps(cfg))
    return str(d)


def profiles(tmp_path) -> list[tuple[str, dict, int, int]]:
    """(id, profile, pre-load free bytes, weights incl. draft): GPUs, TPs, every gamma source."""
    d7 = write_dspark(tmp_path)                                                    # gamma 7 in dflash_config
    d_none = write_dspark(tmp_path, "no-gamma", dflash_config={k: v for k, v in DSPARK_CFG.items()
                                                               if k != "block_size"})   # SGLang's 7
    d_pref = write_dspark(tmp_path, "prefixed", dflash_config=None, dspark_block_size=5, num_key_value_heads=2,
                          dspark_markov_rank=32, dspark_noise_token_id=154857, block_size=9)   # dspark_* wins
    d_top = write_dspark(tmp_path, "top-level", dflash_config=None, block_size=3, mask_token_id=154850,
                         dspark_config={"markov_rank": 16, "markov_head_type": "rnn", "block_size": 11})
    ds = {"speculative_algorithm": "DSPARK"}
    return [
        ("h200-tp8-gamma-from-config", {**ds, "gpu": "H200", "tp_size": 8, "speculative_draft_model_path": d7},
         140 * GiB, 40 * GiB),
        ("h200-tp1-default-gamma-mmcs", {**ds, "gpu": "H200", "tp_size": 1, "speculative_draft_model_path": d_none,
                                         "max_running_requests": 16, "max_mamba_cache_size": 60},
         140 * GiB, 75 * GiB),
        ("b200-tp4-flag-gamma-bf16", {**ds, "gpu": "B200", "tp_size": 4, "speculative_draft_model_path": d7,
                                      "speculative_dspark_block_size": 3, "kv_cache_dtype": "bfloat16",
                                      "max_running_requests": 32}, 178 * GiB, 60 * GiB),
        ("b300-tp8-prefixed-gamma-tokens", {**ds, "gpu": "B300", "tp_size": 8, "speculative_draft_model_path": d_pref,
                                            "speculative_num_draft_tokens": 6}, 265 * GiB, 30 * GiB),
        ("b200-tp8-top-level-block-fp8", {**ds, "gpu": "B200", "tp_size": 8, "speculative_draft_model_path": d_top,
                                          "max_running_requests": 64}, 178 * GiB, 35 * GiB),
        ("rtxpro6000-tp4", {**ds, "gpu": "RTX PRO 6000", "tp_size": 4, "speculative_draft_model_path": d7,
                            "max_running_requests": 8}, 94 * GiB, 50 * GiB),
        ("h200-tp8-cp8", {**ds, "gpu": "H200", "tp_size": 8, "attn_cp_size": 8, "speculative_draft_model_path": d7},
         140 * GiB, 40 * GiB),
    ]


@pytest.fixture
def cases(tmp_path):
    return profiles(tmp_path)


def by_id(cases, pid):
    return next(c for c in cases if c[0] == pid)


def test_dspark_agrees_with_sglang(sglang_ready, cases):
    bad, tokens = [], {}
    for pid, prof, pre, w in cases:
        theirs = sglang_dflash(prof, pre, w)
        assert "errors" not in theirs, (pid, theirs)
        tokens[pid] = theirs["draft_tokens"]
        bad += [f"{pid}: {m}" for m in mismatches(glm_kv_dflash(prof, pre, w), theirs)]
    assert not bad, "\n".join(bad)
    # the gamma sources did resolve differently (the profiles are not one case seven times)
    assert tokens["h200-tp8-gamma-from-config"] == 8 and tokens["b200-tp4-flag-gamma-bf16"] == 4, tokens
    assert tokens["b300-tp8-prefixed-gamma-tokens"] == 6 and tokens["b200-tp8-top-level-block-fp8"] == 4, tokens


def test_a_planted_gamma_default_is_caught(sglang_ready, cases, monkeypatch):
    """DFLASH's 16 instead of DSPARK's gamma 7: the draft tokens and the verify scratch move."""
    import glm_kv.inputs.resolve as resolve

    monkeypatch.setattr(resolve, "DSPARK_DEFAULT_GAMMA", 16)
    pid, prof, pre, w = by_id(cases, "h200-tp1-default-gamma-mmcs")
    bad = mismatches(glm_kv_dflash(prof, pre, w), sglang_dflash(prof, pre, w))
    assert any(b.startswith("draft_tokens:") for b in bad), bad
    assert any(b.startswith("spec_scratch_bytes:") for b in bad), bad


def test_a_planted_verify_window_is_caught(sglang_ready, cases, monkeypatch):
    """Gamma taken as the draft-token count (no + 1 for the anchor): the comparison names it."""
    import glm_kv.inputs.resolve as resolve

    real = resolve.dspark_draft_token_count
    monkeypatch.setattr(resolve, "dspark_draft_token_count", lambda p, d: real(p, d) - 1)
    pid, prof, pre, w = by_id(cases, "h200-tp8-gamma-from-config")
    bad = mismatches(glm_kv_dflash(prof, pre, w), sglang_dflash(prof, pre, w))
    assert any(b.startswith("draft_tokens:") for b in bad), bad


def test_a_planted_draft_tp_is_caught(sglang_ready, cases, monkeypatch):
    """DFLASH's draft TP (the full TP under CP) for DSPARK, which splits the draft's heads over attn_tp."""
    import glm_kv.inputs.resolve as resolve

    monkeypatch.setattr(resolve, "draft_attn_tp", lambda p: p.tp_size)
    pid, prof, pre, w = by_id(cases, "h200-tp8-cp8")
    bad = mismatches(glm_kv_dflash(prof, pre, w), sglang_dflash(prof, pre, w))
    assert any(b.startswith("draft_kv_bytes_per_token:") for b in bad), bad


def test_a_planted_gamma_source_is_caught(sglang_ready, cases, monkeypatch):
    """dspark_config.block_size read as gamma (SGLang reads dspark_block_size, else the DFLASH one)."""
    import glm_kv.inputs.draft as draft
    import glm_kv.inputs.resolve as resolve

    real = draft.dspark_fields

    def wrong(path):
        f = real(path)
        nested = json.loads((__import__("pathlib").Path(path) / "config.json").read_text()).get("dspark_config", {})
        return draft.DSparkFields(nested.get("block_size", f.gamma), f.markov_rank, f.markov_head_type,
                                  f.mask_token_id)

    monkeypatch.setattr(resolve, "dspark_fields", wrong)
    pid, prof, pre, w = by_id(cases, "b200-tp8-top-level-block-fp8")
    bad = mismatches(glm_kv_dflash(prof, pre, w), sglang_dflash(prof, pre, w))
    assert any(b.startswith("draft_tokens:") for b in bad), bad


# ----------------------------------------------------------------------------- flags that move no pool

RUNTIME_FLAGS = {"speculative_dspark_sps_table_path": "/nonexistent/sps.json",
                 "speculative_dspark_confidence_sts_path": "/nonexistent/sts.json",
                 "speculative_dspark_align_verify_tokens_to_graph_tier": True,
                 "speculative_draft_window_size": 4}


def test_planner_flags_and_window_size_move_no_pool(sglang_ready, cases):
    """SGLang sizes every pool the same with the DSPARK planner flags and a draft window as without;
    glm-kv takes them and gives the same plan."""
    from glm_kv.inputs.profile import make_profile
    from glm_kv.ledgers.plan import compute_plan

    for pid in ("h200-tp8-gamma-from-config", "b200-tp4-flag-gamma-bf16", "rtxpro6000-tp4"):
        _, prof, pre, w = by_id(cases, pid)
        base = sglang_dflash(prof, pre, w)
        sg = {k: v for k, v in RUNTIME_FLAGS.items() if k != "speculative_draft_window_size"}
        flagged = sglang_dflash({**prof, "speculative_draft_window_size": 4, SGLANG_ONLY: sg}, pre, w)
        assert "errors" not in flagged, (pid, flagged)
        assert flagged == base, (pid, {k: (base[k], flagged[k]) for k in base if base[k] != flagged[k]})
        ours = glm_kv_dflash({**prof, "speculative_draft_window_size": 4}, pre, w)
        assert not mismatches(ours, base), (pid, mismatches(ours, base))
    # and the same comparison does see a flag that moves the pools (gamma 3 -> 5)
    _, prof, pre, w = by_id(cases, "b200-tp4-flag-gamma-bf16")
    moved = sglang_dflash({**prof, SGLANG_ONLY: {"speculative_dspark_block_size": 5}}, pre, w)
    assert moved != sglang_dflash(prof, pre, w)
    assert compute_plan(make_profile({k: v for k, v in prof.items()} | {"weights_bytes": w})).draft_tokens == 4


# ----------------------------------------------------------------------------- refusals

def refusals(tmp_path) -> list[tuple[str, dict]]:
    d7 = write_dspark(tmp_path)
    d_none = write_dspark(tmp_path, "no-gamma", dflash_config={k: v for k, v in DSPARK_CFG.items()
                                                               if k != "block_size"})
    no_markov = write_dspark(tmp_path, "no-markov", dflash_config={"block_size": 7, "mask_token_id": 154856})
    no_head = write_dspark(tmp_path, "no-head", dflash_config={"block_size": 7, "mask_token_id": 154856,
                                                               "markov_rank": 8})
    bad_head = write_dspark(tmp_path, "bad-head", dflash_config={**DSPARK_CFG, "markov_head_type": "lstm"})
    bare_model = nvfp4_model(tmp_path)   # a local target folder without a dspark/ subfolder
    ds = {"speculative_algorithm": "DSPARK", "gpu": "H200", "tp_size": 8}
    return [
        ("tokens-vs-gamma", {**ds, "speculative_draft_model_path": d7, "speculative_num_draft_tokens": 7}),
        ("tokens-vs-flag-gamma", {**ds, "speculative_draft_model_path": d7, "speculative_dspark_block_size": 4,
                                  "speculative_num_draft_tokens": 4}),
        ("one-token-no-gamma", {**ds, "speculative_draft_model_path": d_none, "speculative_num_draft_tokens": 1}),
        ("no-draft-path", {**ds, "model": bare_model}),
        ("dp-attention-no-lm-head", {**ds, "speculative_draft_model_path": d7, "dp_size": 8,
                                     "enable_dp_attention": True}),
        ("prefill-cp-group-sharing", {**ds, "speculative_draft_model_path": d7, "attn_cp_size": 8,
                                      "enable_prefill_cp": True, "cp_strategy": "interleave"}),
        ("markov-rank-0", {**ds, "speculative_draft_model_path": no_markov}),
        ("markov-head-missing", {**ds, "speculative_draft_model_path": no_head}),
        ("markov-head-unknown", {**ds, "speculative_draft_model_path": bad_head}),
    ]


def sglang_refusal(prof: dict, pre: int, w: int) -> str | None:
    """SGLang's refusal message for a profile: its ServerArgs validators (captured by the harness) or
    the target-side draft check in ``resolve_spec_aux_hidden_state_config`` (raised through it)."""
    try:
        out = sglang_dflash(prof, pre, w)
    except ValueError as e:
        return str(e)
    return out["errors"]["message"] if "errors" in out else None


def _core(message: str) -> str:
    """SGLang's sentence without the flag dashes, for a containment check."""
    return message.split(" Error:")[0].replace("--", "").strip().lower()


def test_sglang_refusals_are_refused_the_same_way(sglang_ready, tmp_path):
    from glm_kv.inputs.profile import make_profile
    from glm_kv.ledgers.plan import compute_plan

    for pid, prof in refusals(tmp_path):
        said = sglang_refusal(prof, 140 * GiB, 40 * GiB)
        assert said is not None, pid
        with pytest.raises(ProfileError) as e:
            compute_plan(make_profile({**prof, "pre_model_load_bytes": 140 * GiB, "weights_bytes": 40 * GiB}))
        head = _core(said).split(";")[0][:60]
        assert head in e.value.rule.replace("--", "").lower(), (pid, said, e.value.rule)


def test_mask_token_refusals_are_sglangs(sglang_ready, tmp_path):
    """The worker's ``resolve_runtime_config`` (run at start-up, after the pools): no mask token, or
    one outside the target's vocabulary, is refused; glm-kv refuses the same drafts in the same words."""
    from sglang.srt.speculative.dspark_components.dspark_config import resolve_runtime_config

    from glm_kv.inputs.model import load_model
    from glm_kv.inputs.profile import make_profile
    from glm_kv.ledgers.plan import compute_plan

    vocab = load_model("glm-5.3-flash").vocab_size
    cases = [("no-mask", {k: v for k, v in DSPARK_CFG.items() if k != "mask_token_id"}),
             ("mask-outside-vocab", {**DSPARK_CFG, "mask_token_id": vocab}),
             ("mask-last-row", {**DSPARK_CFG, "mask_token_id": vocab - 1})]
    for name, dcfg in cases:
        path = write_dspark(tmp_path, name, dflash_config=dcfg)
        cfg = json.loads((tmp_path / name / "config.json").read_text())
        try:
            resolve_runtime_config(draft_hf_config=cfg, speculative_num_draft_tokens=8, target_vocab_size=vocab)
            said = None
        except ValueError as e:
            said = str(e)
        prof = {"speculative_algorithm": "DSPARK", "speculative_draft_model_path": path, "weights_bytes": 40 * GiB}
        if said is None:
            assert name == "mask-last-row"
            compute_plan(make_profile(prof))
            continue
        with pytest.raises(ProfileError) as e:
            compute_plan(make_profile(prof))
        assert said in e.value.rule, (name, said, e.value.rule)


def test_draft_in_the_target_folder_is_found_as_sglang_finds_it(sglang_ready, tmp_path, monkeypatch):
    """No --speculative-draft-model-path: SGLang takes <model-path>/dspark/ when it holds a config.json;
    glm-kv reads the same folder and both size the same pools. (SGLang is handed the test's model
    folder as --model-path instead of the harness's shared temporary one.)"""
    import oracle

    model = nvfp4_model(tmp_path)
    write_dspark(tmp_path / "glm-5.3-flash-nvfp4", "dspark")

    def model_dir(config):
        clean = {k: v for k, v in config.items() if not k.startswith("_")}
        (tmp_path / "glm-5.3-flash-nvfp4" / "config.json").write_text(json.dumps(clean))
        return model

    monkeypatch.setattr(oracle, "model_dir", model_dir)
    prof = {"speculative_algorithm": "DSPARK", "gpu": "B200", "tp_size": 4, "model": model,
            "max_running_requests": 16}
    theirs = sglang_dflash(prof, 178 * GiB, 30 * GiB)
    assert "errors" not in theirs, theirs
    ours = glm_kv_dflash(prof, 178 * GiB, 30 * GiB)
    assert not mismatches(ours, theirs), mismatches(ours, theirs)
    assert ours["draft_kv_bytes_per_token"] > 0


def test_bundled_draft_keys_are_refused_by_name(tmp_path):
    """A target config with dspark_* keys (a bundled draft head): SGLang loads the draft from the target
    checkpoint itself; glm-kv does not read those layers and says so, naming the flag."""
    from glm_kv.inputs.profile import make_profile
    from glm_kv.ledgers.plan import compute_plan

    model = nvfp4_model(tmp_path)
    cfg = json.loads((tmp_path / "glm-5.3-flash-nvfp4" / "config.json").read_text())
    (tmp_path / "glm-5.3-flash-nvfp4" / "config.json").write_text(json.dumps({**cfg, "dspark_block_size": 7}))
    with pytest.raises(ProfileError) as e:
        compute_plan(make_profile({"speculative_algorithm": "DSPARK", "model": model, "weights_bytes": 40 * GiB}))
    assert e.value.field == "speculative_draft_model_path" and "not modelled" in e.value.rule


# ----------------------------------------------------------------------------- a launch command

def test_a_dspark_launch_command_plans(tmp_path):
    """The command as a user pastes it: the planner flags are listed as inert, the plan comes with the
    draft's weights source; a mismatched draft-token count exits 2 with SGLang's words."""
    from glm_kv.inputs.launch import parse_launch_command

    d7 = write_dspark(tmp_path)
    cmd = (f"python -m sglang.launch_server --model-path zai-org/GLM-5.3-Flash --tp-size 8 "
           f"--speculative-algorithm DSPARK --speculative-draft-model-path {d7} "
           f"--speculative-dspark-sps-table-path /x/sps.json --speculative-dspark-confidence-sts-path /x/sts.json "
           f"--speculative-dspark-align-verify-tokens-to-graph-tier --speculative-dspark-block-size 7")
    fields, inert = parse_launch_command(cmd, layout="0.5.23")
    assert fields["speculative_algorithm"] == "DSPARK" and fields["speculative_dspark_block_size"] == 7
    assert sorted(i.split()[0] for i in inert) == sorted(["--speculative-dspark-sps-table-path",
                                                          "--speculative-dspark-confidence-sts-path",
                                                          "--speculative-dspark-align-verify-tokens-to-graph-tier"])
    run = [sys.executable, "-m", "glm_kv.cli", "plan", "--sglang-args", cmd, "--set", "gpu=H200"]
    with subprocess.Popen(run, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    bad = cmd + " --speculative-num-draft-tokens 7"
    with subprocess.Popen([*run[:5], bad, *run[6:]], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True) as proc:
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 2, (out, err)
    assert "DSpark speculative_num_draft_tokens must equal gamma + 1 (= 8 for gamma=7)" in err, err
    assert "Traceback" not in err
