"""glm-kv's reading of a pasted ``vllm serve`` command (glm_kv/inputs/vllm_launch.py) against vLLM 0.33.0's
own parser (cli_driver.py, in .venv-vllm: FlexibleArgumentParser + make_arg_parser, AsyncEngineArgs.from_cli_args,
CacheConfig's checks), on this run's random command lines (GLM_KV_SEED) and pasted ones.

For every command: where vLLM's parser refuses, glm-kv refuses at the same stage (``VllmRefuses``,
"argparse" or "config"); where vLLM takes it, glm-kv either reads the same values for every modelled
field (model, TP, the memory, dtypes, switches, lengths, the speculative JSON) or says it does not model
it (``VllmNotModelled``), never that vLLM refuses it. The inert flags are proven inert: not EngineArgs
fields, and EngineArgs.from_cli_args the same with and without each. The flag file glm-kv ships is
checked against the installed parser's, key for key."""
from __future__ import annotations

import json
import random
import shlex
import subprocess

import pytest

from glm_kv.inputs.vllm_launch import (INERT, MODELLED, READ_ONLY, VLLM_CACHE_DTYPES, VllmNotModelled, VllmRefuses,
                                       parse_vllm_command, vllm_flags)
from tests.pytest_glm_kv import run_seed
from tests.vllm.conftest import HERE, ROOT, VENV_PYTHON, oracle_env

RANDOM_COMMANDS = 160
MODELS = ("zai-org/GLM-5.3-Flash", "glm-5.3-flash", "moonshotai/Kimi-K3", "Qwen/Qwen3.5-35B-A3B", "deepseek-v3.2",
          "/models/GLM-5.3-Flash/")

# flag spellings -> value forms (good and bad) the random commands draw from
VALUED = {
    ("-tp", "--tensor-parallel-size", "--tensor_parallel_size", "--tensor-parallel", "-t"):
        ("1", "2", "8", "+4", "08", "1_6", "2.0", "x", "-1"),
    ("--kv-cache-memory-bytes", "--kv_cache_memory_bytes", "--kv-cache-mem"):
        ("60G", "60g", "64424509440", "1.5g", "4.35k", "1.5G", "30Gi", "1e9", "None", "8T", "0.7t", "12M", "12m"),
    ("--max-model-len", "--max_model_len", "--max-model"):
        ("32k", "32K", "1M", "1m", "4.35k", "0.5m", "0.5M", "auto", "AUTO", "-1", "131072", "12x", "262144", " 64k"),
    ("--kv-cache-dtype",): ("auto", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2", "float16", "fp9", "FP8"),
    ("--mamba-cache-dtype", "--mamba-ssm-cache-dtype", "--mamba_ssm_cache_dtype"):
        ("auto", "bfloat16", "float16", "float32", "fp8", "Float32"),
    ("--block-size",): ("16", "64", "128", "1x", "0"),
    ("--max-num-seqs",): ("256", "1024", "abc", "8"),
    ("--num-gpu-blocks-override",): ("1000", "None", "x", "512"),
    ("--speculative-config", "-sc"): ('{"num_speculative_tokens": 3}', '{"method": "mtp", "num_speculative_tokens": 1}',
                                      "notjson", "None", '{"method": "mtp"}'),
    ("--gpu-memory-utilization",): ("0.9", "0.95", "1.5", "x", "1"),
    ("-dcp", "--decode-context-parallel-size", "--decode_context_parallel_size", "--decode-context"):
        ("1", "2", "8", "0", "x", "2.0"),
    ("--cp-kv-cache-interleave-size", "--dcp-kv-cache-interleave-size", "--dcp_kv_cache_interleave_size"):
        ("1", "16", "64", "None", "0"),
    ("--host",): ("0.0.0.0", "localhost"),
    ("--port",): ("8001", "x", "9000"),
    ("--api-key",): ("k1", "k1 k2"),
    ("--uvicorn-log-level",): ("info", "debug"),
    ("--dtype",): ("bfloat16", "auto"),
    ("--served-model-name",): ("glm",),
    ("-pp", "--frobnicate", "--max"): ("2",),
}
SWITCHES = ("--enable-prefix-caching", "--no-enable-prefix-caching", "--disable-prefix-caching", "--enable-prefix",
            "--enable_prefix_caching", "--disable-hybrid-kv-cache-manager", "--enable-hybrid-kv-cache-manager",
            "--no-disable-hybrid-kv-cache-manager", "--enable-prefix-caching=true", "--enforce-eager",
            "--disable-fastapi-docs", "--disable-uvicorn-access-log", "--enable-log-outputs", "--trust-remote-code")

DEFAULTS = "vllm serve zai-org/GLM-5.3-Flash"
PASTED = [
    DEFAULTS,
    "vllm serve zai-org/GLM-5.3-Flash -tp 8 --kv-cache-memory-bytes 60G --max-model-len 128k",
    "vllm serve zai-org/GLM-5.3-Flash --tensor-parallel-size 8 --kv-cache-memory-bytes=64424509440 "
    "--no-enable-prefix-caching --host 0.0.0.0 --port 8000",
    "vllm serve -tp 8 zai-org/GLM-5.3-Flash --kv-cache-memory-bytes 60G",
    "vllm serve --model zai-org/GLM-5.3-Flash -tp 8 --kv-cache-memory-bytes 60G",
    "python -m vllm.entrypoints.openai.api_server --model Qwen/Qwen3.5-35B-A3B -tp 2 --kv_cache_dtype fp8 "
    "--kv-cache-memory-bytes 30G",
    "vllm serve zai-org/GLM-5.3-Flash -tp 8 --speculative-config '{\"method\": \"mtp\", \"num_speculative_tokens\": 3}'",
    "vllm serve zai-org/GLM-5.3-Flash --model zai-org/GLM-5.3-Flash",
    "vllm serve zai-org/GLM-5.3-Flash extra-word",
    "vllm serve zai-org/GLM-5.3-Flash --max-model-len 1.5K",
    "vllm serve zai-org/GLM-5.3-Flash --kv-cache-memory-bytes",
    "vllm serve zai-org/GLM-5.3-Flash --mamba-ssm-cache-dtype fp8",
    "vllm serve zai-org/GLM-5.3-Flash --max-model-len=-1",
    "vllm serve deepseek-ai/DeepSeek-V3.2 -tp 8 -dcp 8 --kv-cache-dtype fp8 --kv-cache-memory-bytes 60G",
    "vllm serve Qwen/Qwen3.5-35B-A3B -tp 8 --decode-context-parallel-size=2 --cp-kv-cache-interleave-size 16",
]


def random_command(rng: random.Random) -> str:
    words = ["vllm", "serve"]
    model = rng.choice(MODELS)
    form = rng.random()
    api = form < 0.15
    if api:
        words = ["python", "-m", "vllm.entrypoints.openai.api_server", "--model", model]
    elif form < 0.3:
        words += ["--model", model]
    flags: list[list[str]] = []
    for _ in range(rng.randint(0, 6)):
        if rng.random() < 0.3:
            flags.append([rng.choice(SWITCHES)])
            continue
        names, values = rng.choice(list(VALUED.items()))
        name, value = rng.choice(names), rng.choice(values)
        if rng.random() < 0.25 and name.startswith("--") and " " not in value:
            flags.append([f"{name}={value}"])
        else:
            flags.append([name, *value.split(" ")] if name == "--api-key" else [name, value])
    if not api and form >= 0.3:
        flags.insert(rng.randint(0, len(flags)) if rng.random() < 0.2 else 0, [model])
    return shlex.join(words + [w for f in flags for w in f])


def commands() -> list[str]:
    rng = random.Random(f"{run_seed()}-vllm-cli")
    return PASTED + [random_command(rng) for _ in range(RANDOM_COMMANDS)]


def inert_pairs() -> list[tuple[str, str]]:
    base = "vllm serve zai-org/GLM-5.3-Flash -tp 8 --kv-cache-memory-bytes 60G"
    extra = {"host": "--host 0.0.0.0", "port": "--port 8001", "uvicorn_log_level": "--uvicorn-log-level debug",
             "disable_uvicorn_access_log": "--disable-uvicorn-access-log", "api_key": "--api-key k1 k2",
             "disable_fastapi_docs": "--disable-fastapi-docs", "enable_log_outputs": "--enable-log-outputs"}
    assert set(extra) == set(INERT), "every inert flag needs its proof here"
    return [(base, f"{base} {extra[d]}") for d in INERT]


@pytest.fixture(scope="module")
def vllm_reads():
    """One driver run for the module: every command, the inert pairs' EngineArgs, the parser's flags."""
    cmds = commands()
    pairs = inert_pairs()
    both = [c for p in pairs for c in p]
    req = {"commands": cmds + both, "engine_fields": both}
    proc = subprocess.run(["nice", "-n", "10", str(VENV_PYTHON), str(HERE / "cli_driver.py")], input=json.dumps(req),
                          capture_output=True, text=True, cwd=ROOT, env=oracle_env(), timeout=600)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("CLI-RESULT ")]
    assert proc.returncode == 0 and len(lines) == 1, proc.stderr[-4000:]
    out = json.loads(lines[0][len("CLI-RESULT "):])
    out["by_command"] = dict(zip(cmds + both, out["results"]))
    out["commands"], out["pairs"] = cmds, pairs
    return out


def test_the_flag_file_is_vllms(vllm_reads):
    theirs = {k: tuple(v) for k, v in vllm_reads["flags"].items()}
    assert vllm_flags() == theirs
    assert tuple(vllm_reads["kv_cache_dtypes"]) == VLLM_CACHE_DTYPES


def _ours(command: str):
    try:
        return "ok", parse_vllm_command(command)
    except VllmRefuses as e:
        return e.stage, e
    except VllmNotModelled as e:
        return "not_modelled", e


def test_glm_kv_reads_commands_as_vllm_does(vllm_reads):
    defaults = vllm_reads["by_command"][DEFAULTS]["values"]   # vLLM's own defaults, for the flags not given
    problems, compared = [], 0
    for cmd in vllm_reads["commands"]:
        theirs = vllm_reads["by_command"][cmd]
        kind, ours = _ours(cmd)
        if theirs["stage"] is not None:       # vLLM refuses: glm-kv must refuse it at the same stage
            if kind != theirs["stage"]:
                problems.append(f"{cmd!r}: vLLM refuses at {theirs['stage']} ({theirs['error'][:160]}); glm-kv: "
                                f"{kind} {ours if kind != 'ok' else ours.engine_args}")
            continue
        if kind == "not_modelled":
            continue
        if kind != "ok":
            problems.append(f"{cmd!r}: vLLM takes it; glm-kv says vLLM refuses it ({kind}: {ours})")
            continue
        compared += 1
        mine = {"model": ours.model, **ours.engine_args}
        for dest in ("model", *MODELLED, *READ_ONLY):
            want = theirs["values"][dest]
            got = mine.get(dest, defaults[dest])
            if got != want or type(got) is not type(want):
                problems.append(f"{cmd!r}: {dest}: glm-kv {got!r}, vLLM {want!r}")
    assert not problems, f"{len(problems)} disagreement(s):\n" + "\n".join(problems[:30])
    # not vacuous: a good share of the commands is read and compared field for field
    assert compared >= len(vllm_reads["commands"]) // 5, compared


def test_inert_flags_leave_engine_args_unchanged(vllm_reads):
    fields = set(vllm_reads["engine_args_fields"])
    for dest in INERT:
        assert dest not in fields, f"{dest} is an EngineArgs field: not inert by this proof"
    for base, with_flag in vllm_reads["pairs"]:
        a, b = vllm_reads["by_command"][base], vllm_reads["by_command"][with_flag]
        assert a["stage"] is None and b["stage"] is None, (a, b)
        assert a["engine"] == b["engine"], with_flag
        assert _ours(with_flag)[0] == "ok", with_flag
