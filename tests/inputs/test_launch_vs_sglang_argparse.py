"""Launch commands: glm-kv's reader refuses exactly what SGLang 0.5.23's own argparse refuses.

Generated commands (valid flags and values, argparse abbreviations, switches given values,
unknown, ambiguous, renamed, single-dash and en-dash flags, stray words, missing values, bad
integers and choices) are parsed twice: by ``parse_launch_command(..., layout="0.5.23")`` here and
by the wheel's parser (``ServerArgs.add_cli_args`` on a fresh ``ArgumentParser``) in
``.venv-sglang``. Accept/refuse must agree on every command. glm-kv is deliberately stricter in
one place SGLang's argparse is not (non-finite floats) and the generator leaves that out.

Runs only where ``.venv-sglang`` exists and ``GLM_KV_SGLANG=1`` (like tests/sglang); seeded from
``GLM_KV_SEED``.
"""
from __future__ import annotations

import json
import os
import random
import subprocess
from pathlib import Path

import pytest

from glm_kv.errors import ProfileError
from glm_kv.inputs.launch import NotModelled, parse_launch_command
from tests.pytest_glm_kv import run_seed

ROOT = Path(__file__).resolve().parents[2]
SGLANG_PY = ROOT / ".venv-sglang" / "bin" / "python"
SEED = run_seed()
PREFIX = "python -m sglang.launch_server --model-path zai-org/GLM-5.3-Flash"

pytestmark = pytest.mark.skipif(os.environ.get("GLM_KV_SGLANG") != "1" or not SGLANG_PY.exists(),
                                reason="needs GLM_KV_SGLANG=1 and .venv-sglang (SGLang 0.5.23's own parser)")

SGLANG_SIDE = r"""
import argparse, json, sys
from sglang.srt.server_args import ServerArgs

class Refused(Exception):
    pass

class P(argparse.ArgumentParser):
    def error(self, message):
        raise Refused(message)

out = []
for argv in json.load(sys.stdin):
    p = P(prog="sglang")
    ServerArgs.add_cli_args(p)
    try:
        p.parse_args(argv)
        out.append(None)
    except (Refused, SystemExit) as e:
        out.append(str(e) or "exit")
print(json.dumps(out))
"""

GOOD = ["--tp-size 8", "--tp 4", "--dp 2", "--dp-size=2", "--enable-dp-attention", "--attn-cp-size 2",
        "--kv-cache-dtype fp8_e4m3", "--kv-cache-dtype bf16", "--dsa-prefill-backend flashmla_kv",
        "--dsa-decode-backend trtllm", "--linear-attn-backend triton", "--mamba-radix-cache-strategy no_buffer",
        "--max-running-requests 64", "--max-total-tokens 1M", "--context-length 128Ki", "--page-size 64",
        "--mem-fraction-static 0.8", "--mem-frac 0.8", "--chunked-prefill-size -1", "--cuda-graph-max-bs-decode 64",
        "--moe-a2a-backend deepep", "--max-prefill-tokens 16k", "--disaggregation-mode decode",
        "--enable-prefill-cp", "--cp-strategy interleave", "--language-only", "--hicache-ratio 2",
        "--enable-hierarchical-cache", "--hicache-mem-layout page_first", "--host 0.0.0.0", "--port 30000",
        "--trust-remote-code", "--tool-call-parser glm47", "--speculative-algorithm EAGLE", "--tp-size=-1",
        "--cuda-graph-bs-decode 1 2 4 8", "--cuda-graph-backend-decode breakable",
        "--cuda-graph-backend-prefill disabled", "--cuda-graph-max-bs-prefill 512"]
BAD = ["--enable-dp-attention=false", "--disable-radix-cache=1", "-tp 8", "\u2013tp 8", "\u2014tp-size 8",
       "--mamba-scheduler-strategy auto", "--cuda-graph-max-bs 8", "--nsa-prefill-backend fa3", "--tp-size 8.0",
       "--tp-size x", "--tp-size", "--context-length 1.5Ki", "--kv-cache-dtype fp8", "--dsa-decode-backend bogus",
       "--linear-attn-backend bogus", "--moe-a2a-backend bogus", "--disaggregation-mode both",
       "--cp-strategy ring", "stray", "--d 2", "--cuda-graph 1", "--zzz-unknown 1", "--max-total-tokens 1.5Mi",
       "--hicache-io-backend nvme", "-- --tp-size 8", "--mem-fraction-static", "--max-running-requests 1e3",
       "--cuda-graph-backend-decode bogus", "--cuda-graph-backend-prefill tc_piecewise", "--cuda-graph-bs-decode x",
       "--cuda-graph-bs-decode"]


def _commands(rng: random.Random, n: int) -> list[str]:
    cmds = []
    for _ in range(n):
        parts = rng.sample(GOOD, rng.randint(0, 5))
        if rng.random() < 0.6:
            parts.insert(rng.randrange(len(parts) + 1), rng.choice(BAD))
        cmds.append(" ".join([PREFIX, *parts]))
    return cmds


def test_accepts_and_refuses_what_sglang_0523_argparse_does():
    cmds = _commands(random.Random(SEED), 300)
    argvs = [c.split()[3:] for c in cmds]   # after 'python -m sglang.launch_server'
    run = subprocess.run([str(SGLANG_PY), "-c", SGLANG_SIDE], input=json.dumps(argvs), capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    theirs = json.loads(run.stdout.strip().splitlines()[-1])
    disagreements = []
    for cmd, their in zip(cmds, theirs):
        try:
            parse_launch_command(cmd, layout="0.5.23")
            ours = None
        except NotModelled:    # SGLang's parser takes it; glm-kv refuses it only as not modelled
            ours = None
        except ProfileError as e:
            ours = str(e)
        if (ours is None) != (their is None):
            disagreements.append(f"{cmd[len(PREFIX):]!r}: glm-kv {ours or 'accepts'} / SGLang {their or 'accepts'}")
    assert sum(t is not None for t in theirs) > 50 and sum(t is None for t in theirs) > 50
    assert not disagreements, "\n".join(disagreements[:20])
