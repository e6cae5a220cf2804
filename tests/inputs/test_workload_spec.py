"""Workloads for `glm-kv advise`: YAML and --set, strictly validated, one line naming the field."""
import time

import pytest

from glm_kv.cli import main
from glm_kv.errors import ProfileError
from glm_kv.inputs.workload_spec import (TokenPercentiles, is_workload_key, load_workload, make_workload,
                                         parse_workload_override, shipped_workloads)

OK = {"concurrent_requests": 64, "tokens_per_request": 131072}


def test_shipped_workloads_load_and_describe_themselves():
    names = shipped_workloads()
    assert {"chat", "long-context", "agent-hicache", "batch-1m"} <= set(names)
    for name in names:
        w = load_workload(name)
        assert w.name == name and w.description
        assert w.sizing_tokens >= w.typical_tokens >= 1


def test_number_and_percentiles():
    w = make_workload(OK)
    assert (w.sizing_tokens, w.typical_tokens, w.prefix_cache_tokens, w.host_memory_bytes) == (131072, 131072, 0, None)
    w = make_workload({**OK, "tokens_per_request": {"p50": 4096, "p99": 32768}, "prefix_cache_tokens": 10})
    assert isinstance(w.tokens_per_request, TokenPercentiles)
    assert (w.sizing_tokens, w.typical_tokens) == (32768, 4096)


def test_yaml_file_and_set_overrides(tmp_path):
    f = tmp_path / "mine.yaml"
    f.write_text("concurrent_requests: 8\ntokens_per_request: {p50: 1000, p99: 9000}\n")
    w = load_workload(str(f), {"tokens_per_request.p99": 20000, "prefix_cache_tokens": 5})
    assert (w.name, w.concurrent_requests, w.sizing_tokens, w.typical_tokens, w.prefix_cache_tokens) == \
        ("mine", 8, 20000, 1000, 5)
    # no file at all: every field from --set
    assert load_workload(None, OK).concurrent_requests == 64


@pytest.mark.parametrize("data, field, words", [
    ({}, "concurrent_requests", "required"),
    ({"concurrent_requests": 4}, "tokens_per_request", "required"),
    ({**OK, "concurrent_requests": 0}, "concurrent_requests", "greater than or equal to 1"),
    ({**OK, "concurrent_requests": True}, "concurrent_requests", "integer"),
    ({**OK, "concurrent_requests": 2.5}, "concurrent_requests", "integer"),
    ({**OK, "tokens_per_request": "lots"}, "tokens_per_request", "{p50: .., p99: ..}"),
    ({**OK, "tokens_per_request": True}, "tokens_per_request", "{p50: .., p99: ..}"),
    ({**OK, "tokens_per_request": -3}, "tokens_per_request", "greater than or equal to 1"),
    ({**OK, "tokens_per_request": {"p50": 5}}, "tokens_per_request.p99", "required"),
    ({**OK, "tokens_per_request": {"p50": 50, "p99": 5}}, "tokens_per_request.p99", "at least p50"),
    ({**OK, "tokens_per_request": {"p50": 5, "p99": 50, "p90": 9}}, "tokens_per_request.p90", "unknown field"),
    ({**OK, "prefix_cache_tokens": -1}, "prefix_cache_tokens", "greater than or equal to 0"),
    ({**OK, "host_memory_bytes": 0}, "host_memory_bytes", "greater than or equal to 1"),
    ({**OK, "requests_per_rank": 3}, "requests_per_rank", "unknown field"),
])
def test_bad_input_names_the_field(data, field, words):
    with pytest.raises(ProfileError) as e:
        make_workload(data)
    assert e.value.field == field and words in e.value.rule
    assert "\n" not in str(e.value)


def test_bad_files(tmp_path):
    with pytest.raises(ProfileError, match="^workload: 'nope' is neither"):
        load_workload("nope")
    bad = tmp_path / "bad.yaml"
    bad.write_text("concurrent_requests: [1\n")
    with pytest.raises(ProfileError, match="not valid YAML"):
        load_workload(str(bad))
    bad.write_text("- 1\n- 2\n")
    with pytest.raises(ProfileError, match="must be a YAML mapping"):
        load_workload(str(bad))


def test_set_keys_split_between_workload_and_profile():
    assert is_workload_key("concurrent_requests=3") and is_workload_key("tokens_per_request.p50=9")
    assert is_workload_key("host_memory_bytes=1000")
    assert not is_workload_key("tp_size=8") and not is_workload_key("name=x")


@pytest.mark.parametrize("argv, field", [
    (["--workload", "chat", "--set", "concurrent_requests=-1"], "concurrent_requests"),
    (["--workload", "chat", "--set", "tokens_per_request.p99=10"], "tokens_per_request.p99"),
    (["--set", "concurrent_requests=4"], "tokens_per_request"),
    (["--workload", "nope"], "workload"),
])
def test_cli_bad_workload_exits_2_with_one_line(argv, field, capsys):
    assert main(["advise", "--profile", "worked-example-0.5.23", *argv]) == 2
    cap = capsys.readouterr()
    assert cap.out == ""
    lines = cap.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"glm-kv: error: {field}:")


# --- the profile's guarded YAML reading, for workload files and --set values -----------------------
BASE = "concurrent_requests: 4\ntokens_per_request: 100\n"


def _bomb(levels: int, width: int, key: str = "") -> str:
    """The billion laughs: width**levels leaves from a few lines (the last level under ``key``)."""
    lines = ['a0: &a0 "lol"'] + [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]"
                                 for i in range(1, levels + 1)]
    if key:
        lines[-1] = lines[-1].replace(f"a{levels}:", f"{key}:", 1)
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("text, field, words", [
    (_bomb(8, 10) + BASE, "workload", "aliases"),                       # 10^8 leaves
    (_bomb(8, 10, "description") + "concurrent_requests: 4\ntokens_per_request: 100\n", "workload", "aliases"),
    (_bomb(20, 3, "tokens_per_request") + "concurrent_requests: 4\n", "workload", "aliases"),
    ("concurrent_requests: &n 4\ntokens_per_request: *n\n", "workload", "aliases"),
    ("concurrent_requests: &n 4\ntokens_per_request: 100\n", "workload", "anchors"),
    ("tokens_per_request: &t {p50: 1, p99: 2}\nconcurrent_requests: 4\n", "workload", "anchors"),
    ("concurrent_requests: 4\nconcurrent_requests: 5\ntokens_per_request: 100\n", "workload", "given twice"),
    ("a: " + "[" * 50 + "]" * 50 + "\n" + BASE, "workload", "nested"),
    ("description: 2024-01-01\n" + BASE, "description", 'quote it (description: "2024-01-01")'),
    ("description: 2024-01-01 10:20:30\n" + BASE, "description", "YAML reads this as a date"),
    ("description: 42\n" + BASE, "description", 'quote it (description: "42")'),
    ("description: 1.5\n" + BASE, "description", "YAML reads this as a number"),
    ("description: true\n" + BASE, "description", "YAML reads this as true/false"),
    ("name: 2024-01-01\n" + BASE, "name", "quote it ("),
    ('description: "a\\x1b[31mb"\n' + BASE, "description", "no control characters"),
    ('description: "line\\nbreak"\n' + BASE, "description", "no control characters"),
    ('name: "a\\u202eb"\n' + BASE, "name", "no control characters"),
    ("concurrent_requests: " + "9" * 50 + "\ntokens_per_request: 100\n", "concurrent_requests", "out of range"),
    ("concurrent_requests: 4\ntokens_per_request: {p50: 1, p99: " + "9" * 30 + "}\n", "tokens_per_request.p99",
     "out of range"),
])
def test_hostile_workload_yaml_is_refused_in_time(tmp_path, text, field, words):
    f = tmp_path / "w.yaml"
    f.write_text(text)
    cpu = time.thread_time()
    with pytest.raises(ProfileError) as e:
        load_workload(str(f))
    assert time.thread_time() - cpu < 1.0
    assert e.value.field == field and words in e.value.rule, str(e.value)
    assert "\n" not in str(e.value) and "\x1b" not in str(e.value)


def test_workload_yaml_reads_yaml_12_and_quoted_text(tmp_path):
    f = tmp_path / "w.yaml"
    # YAML 1.2 core schema: 010 is ten (YAML 1.1 read it as octal 8); quoted, a date is text
    f.write_text('description: "2024-01-01"\nname: "42"\nconcurrent_requests: 010\ntokens_per_request: 100\n')
    w = load_workload(str(f))
    assert (w.description, w.name, w.concurrent_requests) == ("2024-01-01", "42", 10)


@pytest.mark.parametrize("item, field, words", [
    ("concurrent_requests=&a 4", "concurrent_requests", "anchors"),
    ("tokens_per_request=[&a [1, 1, 1, 1], *a, *a]", "tokens_per_request", "aliases"),
    ("tokens_per_request=" + "[&a [" + ", ".join(["9"] * 9) + "], " + ", ".join(["*a"] * 9) + "]", "tokens_per_request",
     "aliases"),
    ("concurrent_requests=[1", "concurrent_requests", "not valid YAML"),
    ("concurrent_requests=" + "1" * 5000, "concurrent_requests", "at most 4096"),
])
def test_set_values_go_through_the_guarded_loader(item, field, words):
    with pytest.raises(ProfileError) as e:
        parse_workload_override(item)
    assert e.value.field == field and words in e.value.rule, str(e.value)


def test_set_values_type_as_yaml_12():
    assert parse_workload_override("concurrent_requests=010") == ("concurrent_requests", 10)
    assert parse_workload_override("tokens_per_request={p50: 1, p99: 2}") == ("tokens_per_request", {"p50": 1, "p99": 2})
    assert parse_workload_override("prefix_cache_tokens=") == ("prefix_cache_tokens", None)
    with pytest.raises(ProfileError, match="^concurrent_requests: integer out of range"):
        load_workload(None, dict([parse_workload_override("concurrent_requests=" + "9" * 45),
                                  ("tokens_per_request", 100)]))
