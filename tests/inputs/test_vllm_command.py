"""glm-kv's reader of a pasted `vllm serve` command (glm_kv/inputs/vllm_launch.py), without vLLM: the
rules of vLLM 0.33.0's parser it copies (the suffixes, the switches, abbreviations, the model's place)
and the refusals. tests/vllm/test_vllm_launch.py checks the same reader against vLLM's own parser."""
from __future__ import annotations

import pytest

from glm_kv.inputs.vllm_launch import (VllmNotModelled, VllmRefuses, human_readable_int, parse_vllm_command,
                                       vllm_flags)

GLM = "vllm serve zai-org/GLM-5.3-Flash"


@pytest.mark.parametrize("raw,value", [
    ("32k", 32_000), ("32K", 32_768), ("1m", 1_000_000), ("1M", 1_048_576), ("60G", 60 * 2**30),
    ("60g", 60 * 10**9), ("1.5g", 1_500_000_000), ("0.5m", 500_000), ("4.35k", int(float("4.35") * 1000)),
    ("8T", 8 * 2**40), (" 131072", 131072), ("+8", 8), ("8_000", 8000),
])
def test_human_readable_int_is_vllms(raw, value):
    assert human_readable_int("--max-model-len", raw) == value


@pytest.mark.parametrize("raw", ["1.5K", "30Gi", "1e9", "12x", "2.0"])
def test_human_readable_int_refusals(raw):
    with pytest.raises(VllmRefuses) as e:
        human_readable_int("--kv-cache-memory-bytes", raw)
    assert e.value.stage == "argparse" and e.value.field == "--kv-cache-memory-bytes"


@pytest.mark.parametrize("command,engine", [
    (f"{GLM} -tp 8 --kv-cache-memory-bytes 60G --max-model-len 128k",
     {"tensor_parallel_size": 8, "kv_cache_memory_bytes": 60 * 2**30, "max_model_len": 128_000}),
    (f"{GLM} --tensor_parallel_size=4 --max-model 1K", {"tensor_parallel_size": 4, "max_model_len": 1024}),
    (f"{GLM} --enable-prefix-caching --no-enable-prefix-caching", {"enable_prefix_caching": False}),
    (f"{GLM} --disable-prefix-caching", {"enable_prefix_caching": False}),
    (f"{GLM} --enable-prefix", {"enable_prefix_caching": True}),
    (f"{GLM} --disable-hybrid-kv-cache-manager", {"disable_hybrid_kv_cache_manager": True}),
    (f"{GLM} --enable-hybrid-kv-cache-manager", {"disable_hybrid_kv_cache_manager": False}),
    (f"{GLM} --no-disable-hybrid-kv-cache-manager", {"disable_hybrid_kv_cache_manager": False}),
    (f"{GLM} -tp 2 -tp 8", {"tensor_parallel_size": 8}),
    (f"{GLM} --kv-cache-dtype fp8 --mamba-ssm-cache-dtype bfloat16 --block-size 64 --max-num-seqs 32 "
     f"--num-gpu-blocks-override None", {"kv_cache_dtype": "fp8", "mamba_ssm_cache_dtype": "bfloat16",
                                         "block_size": 64, "max_num_seqs": 32, "num_gpu_blocks_override": None}),
    (f"{GLM} -sc '{{\"method\": \"mtp\", \"num_speculative_tokens\": 3}}'",
     {"speculative_config": {"method": "mtp", "num_speculative_tokens": 3}}),
    (f"{GLM} -tp 8 -dcp 4", {"tensor_parallel_size": 8, "decode_context_parallel_size": 4}),
    (f"{GLM} --decode-context-parallel-size=2 --cp-kv-cache-interleave-size 16 --dcp_kv_cache_interleave_size 8",
     {"decode_context_parallel_size": 2, "cp_kv_cache_interleave_size": 16, "dcp_kv_cache_interleave_size": 8}),
])
def test_values_as_vllm_reads_them(command, engine):
    launch = parse_vllm_command(command)
    assert launch.model == "zai-org/GLM-5.3-Flash"
    assert launch.engine_args == engine


@pytest.mark.parametrize("command", [
    "vllm serve -tp 8 zai-org/GLM-5.3-Flash", "vllm serve --model zai-org/GLM-5.3-Flash",
    "vllm serve --model=zai-org/GLM-5.3-Flash", "python -m vllm.entrypoints.openai.api_server --model zai-org/GLM-5.3-Flash",
    "VLLM_LOGGING_LEVEL=INFO /opt/venv/bin/vllm serve \\\n  zai-org/GLM-5.3-Flash --port 8000 --host 0.0.0.0",
])
def test_where_the_model_stands(command):
    assert parse_vllm_command(command).model == "zai-org/GLM-5.3-Flash"


@pytest.mark.parametrize("command,field", [
    (f"{GLM} --frobnicate 3", "--frobnicate"),                       # vLLM has no such flag
    (f"{GLM} --max 3", "--max"),                                     # ambiguous prefix
    (f"{GLM} --enable-prefix-caching=true", "--enable-prefix-caching"),
    (f"{GLM} --mamba-cache-dtype fp8", "--mamba-cache-dtype"),       # argparse choices
    (f"{GLM} -tp", "-tp"), (f"{GLM} -tp x", "-tp"), (f"{GLM} -dcp 2.0", "-dcp"),
    (f"{GLM} extra-word", "'extra-word'"),
    (f"{GLM} --model zai-org/GLM-5.3-Flash", "--model"),
    (f"{GLM} --speculative-config notjson", "--speculative-config"),
    (f"{GLM} --help", "--help"),
    ("vllm serve --served-model-name glm zai-org/GLM-5.3-Flash", "--served-model-name"),
])
def test_what_vllms_parser_refuses(command, field):
    with pytest.raises(VllmRefuses) as e:
        parse_vllm_command(command)
    assert e.value.field == field and e.value.stage == "argparse"


@pytest.mark.parametrize("command,field", [
    (f"{GLM} --kv-cache-dtype fp9", "--kv-cache-dtype"), (f"{GLM} --gpu-memory-utilization 1.5", "--gpu-memory-utilization"),
])
def test_what_vllms_config_refuses(command, field):
    with pytest.raises(VllmRefuses) as e:
        parse_vllm_command(command)
    assert e.value.field == field and e.value.stage == "config"


@pytest.mark.parametrize("command,field", [
    (f"{GLM} --enforce-eager", "--enforce-eager"), (f"{GLM} --dtype bfloat16", "--dtype"),
    (f"{GLM} -pp 2", "-pp"), (f"{GLM} --kv-cache-dtype fp8_e5m2", "--kv-cache-dtype"),
    (f"{GLM} --max-model-len auto", "--max-model-len"), (f"{GLM} --speculative-config.num_speculative_tokens 3",
                                                         "--speculative-config.num_speculative_tokens"),
    (f"{GLM} -O3", "-O3"), ("vllm serve --port 8000", "--vllm-args"),
    (f"{GLM} -dcp 0", "--decode-context-parallel-size"), (f"{GLM} -pcp 2", "-pcp"),
])
def test_what_glm_kv_does_not_model(command, field):
    with pytest.raises(VllmNotModelled) as e:
        parse_vllm_command(command)
    assert e.value.field == field


def test_not_modelled_waits_for_vllms_own_refusals():
    # vLLM's parser refuses the bad value whatever else the command holds: that refusal comes first
    with pytest.raises(VllmRefuses):
        parse_vllm_command(f"{GLM} --enforce-eager --kv-cache-dtype fp9")


def test_vllm_args_need_the_kv_memory():
    launch = parse_vllm_command(f"{GLM} -tp 8 --gpu-memory-utilization 0.9")
    with pytest.raises(VllmNotModelled) as e:
        launch.vllm_fields()
    assert e.value.field == "--kv-cache-memory-bytes" and "memory profile" in e.value.rule
    assert launch.vllm_fields(2**30) == {"tp": 8, "kv_cache_memory_bytes": 2**30}


def test_vllm_args_fields():
    launch = parse_vllm_command(f"{GLM} -tp 4 --kv-cache-memory-bytes 30G --max-model-len 64k --no-enable-prefix-caching "
                                f"--speculative-config '{{\"method\": \"mtp\", \"num_speculative_tokens\": 2}}'")
    assert launch.vllm_fields(1) == dict(tp=4, kv_cache_memory_bytes=30 * 2**30, max_model_len=64_000,
                                         enable_prefix_caching=False, num_speculative_tokens=2)
    with pytest.raises(VllmNotModelled):   # no count: vLLM takes the drafter's own
        parse_vllm_command(f"{GLM} --speculative-config '{{\"method\": \"mtp\"}}' --kv-cache-memory-bytes 1G"
                           ).vllm_fields()


def test_dcp_reaches_the_vllm_args():
    launch = parse_vllm_command(f"{GLM} -tp 8 -dcp 8 --kv-cache-memory-bytes 60G --cp-kv-cache-interleave-size 1")
    assert launch.vllm_fields() == dict(tp=8, kv_cache_memory_bytes=60 * 2**30, decode_context_parallel_size=8,
                                        cp_kv_cache_interleave_size=1)


def test_the_flag_file_holds_the_modelled_flags():
    flags = vllm_flags()
    assert flags["-tp"] == ("tensor_parallel_size", None)
    assert flags["--no-enable-prefix-caching"] == ("enable_prefix_caching", 0)
    assert len(flags) > 400


def test_single_dash_prefix_is_argparses():
    assert parse_vllm_command(f"{GLM} -t 4").engine_args == {"tensor_parallel_size": 4}
    with pytest.raises(VllmNotModelled):     # -n with an attached value: argparse's form, not read here
        parse_vllm_command(f"{GLM} -n5")
