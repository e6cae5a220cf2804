"""Workloads for `glm-kv advise`: YAML and --set, strictly validated, one line naming the field."""
import pytest

from glm_kv.cli import main
from glm_kv.errors import ProfileError
from glm_kv.inputs.workload_spec import (TokenPercentiles, is_workload_key, load_workload, make_workload,
                                         shipped_workloads)

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
