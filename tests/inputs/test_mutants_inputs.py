"""Tests added to kill mutants of ``glm_kv/inputs`` that survived the fast suite (`make mutants`,
benchmarks/mutants.md).

Expected values come from outside glm_kv: the data files glm-kv ships (read here with ``json``,
not through the code under test), SGLang 0.5.23's source (cited per test), or a hand derivation
in the test's docstring.
"""
from __future__ import annotations

import collections
import json
from pathlib import Path

import pytest

from glm_kv import ProfileError

DATA = Path(__file__).resolve().parents[2] / "glm_kv" / "inputs" / "data"
MiB = 2**20


# --- inputs.draft: the DFLASH draft's config.json ---------------------------------------------

# A DFLASH draft in the shape of z-lab's Qwen3-8B drafts (config.json of a LlamaForCausalLM-style
# draft with a ``dflash_config``): 5 layers, 32 query heads, 8 KV heads of 128, hidden 4096.
DRAFT = {"architectures": ["DFlashDraftModel"], "num_hidden_layers": 5, "num_attention_heads": 32,
         "num_key_value_heads": 8, "head_dim": 128, "hidden_size": 4096, "intermediate_size": 12288,
         "vocab_size": 151936, "torch_dtype": "bfloat16", "dflash_config": {"block_size": 16}}


def _draft(tmp_path, cfg):
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    from glm_kv.inputs.draft import load_draft

    return load_draft(str(tmp_path))


def test_draft_config_read_as_sglang_reads_it(tmp_path):
    """Every field as written (``parse_dflash_draft_config``: layers, heads, KV heads, head dims,
    block_size from ``dflash_config``); ``torch_dtype`` bfloat16 -> 2 bytes."""
    d = _draft(tmp_path, DRAFT)
    assert (d.path, d.architectures, d.num_layers, d.num_attention_heads, d.num_kv_heads) == (
        str(tmp_path), ("DFlashDraftModel",), 5, 32, 8)
    assert (d.head_dim, d.v_head_dim, d.hidden_size, d.intermediate_size, d.vocab_size) == (
        128, 128, 4096, 12288, 151936)
    assert (d.dtype_bytes, d.block_size) == (2, 16)


def test_draft_config_defaults(tmp_path):
    """Missing optional fields take HF's defaults: KV heads = query heads, head_dim = hidden /
    heads (4096 / 32 = 128), v_head_dim = head_dim, no vocab / MLP size -> 0, no architectures -> (),
    no dtype -> bfloat16 (2 B), a top-level block_size when there is no ``dflash_config``;
    float32 -> 4 B, an unknown dtype -> 2 B."""
    cfg = {k: v for k, v in DRAFT.items() if k in ("num_hidden_layers", "num_attention_heads", "hidden_size")}
    d = _draft(tmp_path, {**cfg, "head_dim": 96})
    assert (d.head_dim, d.v_head_dim) == (96, 96)
    d = _draft(tmp_path, {**cfg, "block_size": 8})
    assert (d.num_kv_heads, d.head_dim, d.v_head_dim, d.intermediate_size, d.vocab_size) == (32, 128, 128, 0, 0)
    assert (d.architectures, d.dtype_bytes, d.block_size) == ((), 2, 8)
    assert _draft(tmp_path, cfg).block_size is None
    assert _draft(tmp_path, {**cfg, "torch_dtype": "float32"}).dtype_bytes == 4
    assert _draft(tmp_path, {**cfg, "torch_dtype": "int4"}).dtype_bytes == 2
    assert _draft(tmp_path, {**cfg, "v_head_dim": 64}).v_head_dim == 64
    assert _draft(tmp_path, {**cfg, "vocab_size": 1000}).vocab_size == 1000


@pytest.mark.parametrize("key,value,shown", [
    ("num_attention_heads", None, "None"), ("num_hidden_layers", 0, "0"), ("hidden_size", True, "True"),
    ("num_key_value_heads", 0, "0"), ("head_dim", "128", "'128'"), ("vocab_size", -1, "-1"),
])
def test_draft_bad_integer_refused_by_name(tmp_path, key, value, shown):
    """A required field missing, or any field not an integer >= 1, is refused naming
    speculative_draft_model_path, the key and the value."""
    cfg = dict(DRAFT)
    if value is None:
        del cfg[key]
    else:
        cfg[key] = value
    with pytest.raises(ProfileError) as e:
        _draft(tmp_path, cfg)
    assert e.value.field == "speculative_draft_model_path"
    assert e.value.rule == f"{tmp_path}/config.json: {key} must be an integer >= 1, got {shown}", e.value.rule


def test_draft_kv_bytes_and_weights_by_hand(tmp_path):
    """``dflash_draft_cell_size_per_token`` = KV heads per rank x (head_dim + v_head_dim) x layers
    x item bytes. By hand: TP 1: 8 x (128 + 64) x 5 x 2 = 15,360 B; TP 8: 1 x 192 x 5 x 2 = 1,920;
    TP 16: max(1, 8 // 16) = 1 head -> 1,920. Weights estimate per rank: attention 4096 x 128 x
    (32 x 2 + 8 x 2) = 41,943,040, MLP 3 x 4096 x 12288 = 150,994,944; (sum) x 5 layers x 2 B / TP:
    1,929,379,840 at TP 1, 241,172,480 at TP 8."""
    from glm_kv.inputs.draft import draft_kv_bytes_per_token, estimate_draft_weights

    d = _draft(tmp_path, {**DRAFT, "v_head_dim": 64})
    assert [draft_kv_bytes_per_token(d, tp, 2) for tp in (1, 8, 16)] == [15_360, 1_920, 1_920]
    assert draft_kv_bytes_per_token(d, 1, 1) == 7_680
    d = _draft(tmp_path, DRAFT)
    assert [estimate_draft_weights(d, tp) for tp in (1, 8)] == [1_929_379_840, 241_172_480]


# --- inputs.launch: the flag table the book prints --------------------------------------------

def test_flag_table_rows_follow_the_data_file():
    """One row per ServerArgs field of data/sglang-0.5.23-flag-table.json, counts per status
    equal to the file's (counted here with collections.Counter); detail: ``moves`` (modelled),
    "proven inert with ARGV on PROFILES" (inert), SGLang's own reason or the row's ``why``."""
    from glm_kv.inputs.launch import REFUSED_BY_SGLANG, flag_table_rows

    raw = json.loads((DATA / "sglang-0.5.23-flag-table.json").read_text())["rows"]
    counts, rows = flag_table_rows()
    assert counts == dict(collections.Counter(r["status"] for r in raw))
    assert len(rows) == len(raw)
    for r, row in zip(raw, rows):
        assert set(row) == {"field", "flags", "status", "detail"}
        assert (row["field"], row["flags"], row["status"]) == (r["field"], ", ".join(r["flags"]), r["status"])
        if r["status"] == "modelled":
            assert row["detail"] == r["moves"]
        elif r["status"] == "inert":
            assert row["detail"] == (f"proven inert with {' '.join(r['proof']['argv'])} on "
                                     f"{', '.join(r['proof']['profiles'])}")
        else:
            assert row["detail"] == REFUSED_BY_SGLANG.get(r["field"], r.get("why", ""))
    assert {"modelled", "inert", "refused", "no-flag"} <= set(counts)


# --- inputs.gpus: the GPU table -----------------------------------------------------------------

def test_gpu_table_loads_the_data_file():
    """``_load`` reads data/gpus.json (nvidia-smi totals, each with its source): the H200's
    143,771 MiB at SM 90; GB200's datasheet figure is marked nominal, GB10 integrated."""
    from glm_kv.inputs.gpus import Gpu, _load

    raw = json.loads((DATA / "gpus.json").read_text())["gpus"]
    table = _load()
    assert list(table) == list(raw)
    assert table["H200"] == Gpu("H200", 90, 143_771 * MiB, raw["H200"]["source"], False, False)
    assert table["GB200"].nominal and not table["H200"].nominal
    assert table["GB10"].integrated and not table["GB200"].integrated


# --- inputs.resolve: DFLASH refusals in SGLang's words -------------------------------------------

def test_dflash_without_draft_refused_in_sglang_words():
    """SGLang 0.5.23 arg_groups/speculative_hook.py (``_handle_dflash``) raises "DFLASH speculative
    decoding requires setting --speculative-draft-model-path." ; glm-kv names the field and quotes it."""
    from glm_kv import load_profile
    from glm_kv.inputs.resolve import validate_dflash

    p = load_profile("article", {"speculative_algorithm": "DFLASH", "speculative_draft_model_path": None,
                                 "enable_dp_attention": False, "dp_size": 1})
    with pytest.raises(ProfileError) as e:
        validate_dflash(p)
    assert e.value.field == "speculative_draft_model_path"
    assert e.value.rule.startswith("DFLASH speculative decoding requires setting --speculative-draft-model-path")


# --- inputs.model / inputs.boot_log: every refusal names its field and says why -----------------

def _shipped_config():
    return json.loads((DATA / "glm-5.3-flash.json").read_text())


def _refusal(cfg):
    from glm_kv.inputs.model import model_from_dict

    with pytest.raises(ProfileError) as e:
        model_from_dict(cfg, "x", "test")
    return e.value.field, e.value.rule


def test_layer_split_refusals_name_linear_attn_config():
    """The shipped config's KDA list minus its last layer leaves that layer in neither list: refused
    naming linear_attn_config, "full + KDA layers must cover 0..n-1 exactly once"; a layer_types
    list that disagrees with the two lists is refused under the same field."""
    cfg = _shipped_config()
    text = cfg.get("text_config", cfg)
    lac = text["linear_attn_config"]
    n = text["num_hidden_layers"]
    lac["kda_layers"] = sorted(lac["kda_layers"])[:-1]
    text.pop("layer_types", None)
    field, rule = _refusal(cfg)
    assert field.endswith(".linear_attn_config") and rule == f"full + KDA layers must cover 0..{n - 1} exactly once"
    cfg = _shipped_config()
    text = cfg.get("text_config", cfg)
    full = sorted(text["linear_attn_config"]["full_attn_layers"])
    text["layer_types"] = ["full_attention" if i in full[1:] or i == full[0] + 1 else "linear_attention"
                           for i in range(text["num_hidden_layers"])]
    field, rule = _refusal(cfg)
    assert field.endswith(".linear_attn_config") and rule == "full_attn_layers / kda_layers disagree with layer_types"


def test_vision_config_must_be_an_object():
    cfg = _shipped_config()
    cfg["vision_config"] = 5
    field, rule = _refusal(cfg)
    assert field == "model.vision_config" and rule.startswith("must be a JSON object, got ")


def test_empty_boot_log_refused_by_name(tmp_path):
    from glm_kv.inputs.boot_log import read_boot_log

    log = tmp_path / "boot.log"
    log.write_text("  \n\n")
    with pytest.raises(ProfileError) as e:
        read_boot_log(str(log))
    assert (e.value.field, e.value.rule) == ("--boot-log", f"{str(log)!r} is empty")


def test_unmodelled_quantization_named_by_what_the_config_says():
    """A quantization_config with no quant_method names its quant_algo ('w4a16' here, a
    compressed-tensors style scheme glm-kv does not model), not a made-up 'none'; with no
    quantization_config at all the shipped FP8 checkpoint is assumed."""
    from glm_kv.inputs.weights import quantization_of

    with pytest.raises(ProfileError) as e:
        quantization_of({"quantization_config": {"quant_algo": "W4A16"}})
    assert e.value.field == "model" and e.value.rule.startswith("quantization_config 'w4a16' is not modelled")
    assert quantization_of({}) == "fp8"
    assert quantization_of({"quantization_config": {"quant_method": "fp8"}}) == "fp8"


def test_float_field_upper_bound_enforced():
    """``hicache_ratio`` is a float in (0, 1000] (profile.py's field table; SGLang 0.5.23 gives it
    no bound, glm-kv caps it so host sizes stay finite): 1000 is accepted, 1000.5 refused by name."""
    from glm_kv import load_profile

    assert load_profile("article", {"hicache_ratio": 1000}).hicache_ratio == 1000
    with pytest.raises(ProfileError) as e:
        load_profile("article", {"hicache_ratio": 1000.5})
    assert e.value.field == "hicache_ratio" and "less than or equal to 1000" in e.value.rule


# --- inputs.profile: the strict YAML reader ---------------------------------------------------

@pytest.mark.parametrize("value", ["0x40", "1_000", "0o17"])
def test_explicit_int_tag_refusal_quotes_the_value(value):
    """YAML 1.1 reads ``0x40``, ``1_000`` and ``0o17`` as integers (PyYAML's SafeLoader does); the
    profile reader takes YAML 1.2 core decimal integers only. Written plainly these are strings,
    but an explicit ``!!int`` tag sends them to the integer constructor, which must refuse them
    quoting the text, in one line that names the field (exit 2 through the CLI)."""
    from glm_kv.inputs.profile import load_yaml_text

    with pytest.raises(ProfileError) as e:
        load_yaml_text(f"max_running_requests: !!int {value}\n", "the profile")
    assert e.value.field == "profile"
    assert e.value.rule == f"the profile is not valid YAML at line 1 (not a decimal integer: {value!r})"


def test_recursion_while_reading_is_refused_by_name(monkeypatch):
    """Where libyaml is missing PyYAML composes in pure Python, one Python frame per nesting level,
    so ``[[[[...]]]]`` a few thousand levels deep raises RecursionError before any depth check
    (libyaml stops it itself at 1,000 levels with "exceeded maximum nesting depth"). Run that
    composer here on such a document: the reader must answer with one line naming the field."""
    import yaml

    from glm_kv.inputs import profile

    deep = "[" * 20000 + "]" * 20000
    monkeypatch.setattr(profile.StrictLoader, "get_single_node",
                        lambda self: yaml.compose(deep, Loader=yaml.SafeLoader))
    with pytest.raises(ProfileError) as e:
        profile.load_yaml_text(deep, "the profile", field="profile")
    assert (e.value.field, e.value.rule) == ("profile", "the profile is nested too deeply")


# --- inputs.launch: SGLang's human_readable_int --------------------------------------------

@pytest.mark.parametrize("raw,expected", [
    # the docstring's examples of SGLang 0.5.23's srt/utils/common.py human_readable_int
    ("1k", 1000), ("1M", 1000000), ("25.6k", 25600), ("1Ki", 1024), ("1Mi", 1048576),
    ("3G", 3 * 10**9), ("2T", 2 * 10**12), ("2Gi", 2 * 2**30), ("1Ti", 2**40), (" 8 ", 8),
])
def test_human_readable_int_as_sglang_reads_it(raw, expected):
    from glm_kv.inputs.launch import human_readable_int

    assert human_readable_int("--max-total-tokens", raw) == expected


def test_human_readable_int_refuses_decimals_with_iec_and_overlong_text():
    """SGLang refuses ``1.5Gi`` (decimals with an IEC suffix). glm-kv also refuses any value over
    40 characters, suffixed or not, before converting it (issue 19: every input is answered
    quickly, a huge number is refused by name): ``0...012k`` of 40 characters is 12,000, the same
    with one more leading zero (41) is refused naming the flag."""
    from glm_kv.inputs.launch import human_readable_int

    with pytest.raises(ProfileError) as e:
        human_readable_int("--max-total-tokens", "1.5Gi")
    assert e.value.field == "--max-total-tokens" and "decimals are not allowed" in e.value.rule
    assert human_readable_int("--max-total-tokens", "0" * 37 + "12k") == 12000
    with pytest.raises(ProfileError) as e:
        human_readable_int("--max-total-tokens", "0" * 38 + "12k")
    assert e.value.field == "--max-total-tokens" and e.value.rule.startswith("expects an integer")


# --- inputs.draft / inputs.resolve: DSPARK ------------------------------------------------------

def _dspark(tmp_path, cfg):
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    from glm_kv.inputs.draft import dspark_fields

    return dspark_fields(str(tmp_path))


def test_dspark_fields_read_as_sglang_reads_them(tmp_path):
    """SGLang 0.5.23 ``parse_dspark_draft_config`` (speculative/dspark_components/dspark_config.py:
    214-320): gamma is the top-level ``dspark_block_size``, else the DFLASH ``block_size``;
    ``dspark_markov_rank`` / ``dspark_markov_head_type`` / ``dspark_noise_token_id`` win over
    ``dspark_config``'s ``markov_rank`` / ``markov_head_type`` / ``mask_token_id``; the rank
    defaults to 0 and the head type is lower-cased ("vanilla", "gated", "rnn")."""
    d = _dspark(tmp_path, {**DRAFT, "dspark_block_size": 5, "dspark_markov_rank": 2,
                           "dspark_markov_head_type": "Gated", "dspark_noise_token_id": 7})
    assert (d.gamma, d.markov_rank, d.markov_head_type, d.mask_token_id) == (5, 2, "gated", 7)
    d = _dspark(tmp_path, DRAFT)   # dflash_config.block_size 16, nothing DSpark-specific
    assert (d.gamma, d.markov_rank, d.markov_head_type, d.mask_token_id) == (16, 0, None, None)
    d = _dspark(tmp_path, {**DRAFT, "dspark_config": {"markov_rank": 1, "markov_head_type": "RNN",
                                                      "mask_token_id": 3}})
    assert (d.gamma, d.markov_rank, d.markov_head_type, d.mask_token_id) == (16, 1, "rnn", 3)


@pytest.mark.parametrize("extra,rule", [
    ({"dspark_markov_rank": -1}, "DSpark markov_rank must be an integer >= 0, got -1"),
    ({"dspark_noise_token_id": -2}, "DSpark mask_token_id must be an integer >= 0, got -2"),
    ({"dspark_block_size": 0}, "DSpark block_size must be an integer >= 1, got 0"),
])
def test_dspark_bad_values_refused_by_name(tmp_path, extra, rule):
    """SGLang refuses a negative markov_rank ("DSpark markov_rank must be >= 0") and mask token id
    ("DSpark mask_token_id must be non-negative"); glm-kv names the draft's config.json and the
    key, under speculative_draft_model_path."""
    with pytest.raises(ProfileError) as e:
        _dspark(tmp_path, {**DRAFT, **extra})
    assert (e.value.field, e.value.rule) == ("speculative_draft_model_path", f"{tmp_path}/config.json: {rule}")


def test_dflash_block_size_refused_by_name(tmp_path):
    """A DFLASH ``block_size`` that is not an integer >= 1 (SGLang's ``parse_dflash_draft_config``
    needs a positive block) is refused naming the file and the value."""
    with pytest.raises(ProfileError) as e:
        _draft(tmp_path, {**DRAFT, "dflash_config": {"block_size": 0}})
    assert (e.value.field, e.value.rule) == (
        "speculative_draft_model_path", f"{tmp_path}/config.json: DFLASH block_size must be an integer >= 1, got 0")


@pytest.mark.parametrize("block,tokens,expected", [
    (1, None, 2),       # gamma 1: the smallest verify window SGLang accepts (>= 2)
    (None, None, 8),    # "DSpark gamma is not set; defaulting to 7": 7 + 1
    (3, 4, 4),          # given and equal to gamma + 1
    (None, 5, 5),       # no gamma anywhere: the given count
])
def test_dspark_verify_window(block, tokens, expected):
    """SGLang 0.5.23 ``_handle_dspark`` (arg_groups/speculative_hook.py:800-850): the verify
    window is gamma + 1, and it must be >= 2."""
    from types import SimpleNamespace

    from glm_kv.inputs.resolve import dspark_draft_token_count

    p = SimpleNamespace(speculative_dspark_block_size=block, speculative_num_draft_tokens=tokens)
    assert dspark_draft_token_count(p, None) == expected


@pytest.mark.parametrize("block,tokens,words", [
    (None, 1, "must be >= 2 (= gamma + 1), got 1"),
    (3, 5, "must equal gamma + 1 (= 4 for gamma=3), but got speculative_num_draft_tokens=5"),
])
def test_dspark_verify_window_refusals(block, tokens, words):
    from types import SimpleNamespace

    from glm_kv.inputs.resolve import dspark_draft_token_count

    p = SimpleNamespace(speculative_dspark_block_size=block, speculative_num_draft_tokens=tokens)
    with pytest.raises(ProfileError) as e:
        dspark_draft_token_count(p, None)
    assert e.value.field == "speculative_num_draft_tokens" and words in e.value.rule



# --- inputs.resolve: the DFLASH verify window from the draft's config.json ------------------------

@pytest.mark.parametrize("dflash_config,flags,expected", [
    ({"block_size": 5}, {}, 5),                                    # the draft config's block_size
    ({"block_size": 5}, {"speculative_dflash_block_size": 8}, 8),  # the flag wins
    (None, {}, 16),                                                # neither: 16
])
def test_dflash_draft_tokens_from_the_draft_config(tmp_path, dflash_config, flags, expected):
    """SGLang 0.5.23 arg_groups/speculative_hook.py:367-424 (``_handle_dflash``): a set
    --speculative-dflash-block-size becomes ``speculative_num_draft_tokens``; when that is still
    None it is ``parse_dflash_draft_config(draft_hf_config=...).resolve_block_size(default=None)``
    read from the draft's config.json (speculative/dflash_utils.py:553-554, 608-615: ``dflash_config.block_size``,
    else a top-level one), and only when that gives None, 16. A draft whose
    ``dflash_config.block_size`` is 5 (the DFlash2 drafter of sglang #36889) verifies 5 tokens."""
    from glm_kv.inputs.profile import make_profile
    from glm_kv.inputs.resolve import resolve

    cfg = {k: v for k, v in DRAFT.items() if k != "dflash_config"}
    if dflash_config is not None:
        cfg["dflash_config"] = dflash_config
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    p = make_profile({"speculative_algorithm": "DFLASH", "gpu": "H200", "tp_size": 8,
                      "weights_bytes": 40 * 2**30, "speculative_draft_model_path": str(tmp_path), **flags})
    assert resolve(p).draft_tokens == expected


# --- inputs.profile: an empty YAML profile --------------------------------------------------------

@pytest.mark.parametrize("text", ["", "# no fields yet\n", "---\n", "{}\n"])
def test_empty_yaml_profile_is_refused_naming_the_file(tmp_path, text):
    """A YAML stream with no document, an empty one or an empty mapping (YAML 1.2 chapter 9;
    PyYAML's ``safe_load("")`` is None) holds no field: a wrong path or an unsaved editor, not a
    request for SGLang's defaults (issue 29, item 10). Refused naming the file; exit 2 on the CLI."""
    from glm_kv import load_profile
    from glm_kv.cli import main

    path = tmp_path / "empty.yaml"
    path.write_text(text)
    with pytest.raises(ProfileError) as e:
        load_profile(str(path))
    assert e.value.field == "profile" and "empty.yaml" in e.value.rule and "is empty" in e.value.rule
    assert main(["plan", "--profile", str(path)]) == 2


# -- survivors of the sample over the functions changed on 2026-12-01 (benchmarks/mutants.md) ----------

def test_node_cap_is_inclusive():
    """PROFILE_MAX_NODES (4,096) values are read; one more is refused. ``x: [1, ...]`` composes a
    mapping, its key, a sequence and k scalars: k + 3 nodes."""
    from glm_kv.errors import ProfileError as _PE
    from glm_kv.inputs.profile import PROFILE_MAX_NODES, load_yaml_text

    at = "x: [" + ", ".join(["1"] * (PROFILE_MAX_NODES - 3)) + "]"
    assert len(load_yaml_text(at, "t")["x"]) == PROFILE_MAX_NODES - 3
    with pytest.raises(_PE, match=f"holds more than {PROFILE_MAX_NODES:,} values"):
        load_yaml_text("x: [" + ", ".join(["1"] * (PROFILE_MAX_NODES - 2)) + "]", "t")


def test_workload_file_messages_name_the_file_and_the_field(tmp_path, monkeypatch):
    """A workload file's refusals name the field ``workload`` and the file (the user's words; a short
    relative path, which ``shown`` prints whole)."""
    from glm_kv.errors import ProfileError as _PE
    from glm_kv.inputs.profile import PROFILE_MAX_BYTES
    from glm_kv.inputs.workload_spec import load_workload

    monkeypatch.chdir(tmp_path)
    Path("dup.yaml").write_text("concurrent_requests: 4\nconcurrent_requests: 5\n")
    with pytest.raises(_PE) as e:
        load_workload("dup.yaml")
    assert e.value.field == "workload" and e.value.rule.startswith("'dup.yaml': ") and "given twice" in e.value.rule
    seq = tmp_path / "seq.yaml"
    seq.write_text("- 1\n- 2\n")
    with pytest.raises(_PE) as e:
        load_workload(str(seq))
    assert e.value.field == "workload" and e.value.rule.endswith("must be a YAML mapping of field: value")
    big = tmp_path / "big.yaml"
    big.write_text("#" * (PROFILE_MAX_BYTES + 1))
    with pytest.raises(_PE) as e:
        load_workload(str(big))
    assert e.value.field == "workload" and "(a YAML workload file is at most" in e.value.rule
