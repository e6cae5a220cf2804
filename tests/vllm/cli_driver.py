"""vLLM 0.33.0's own reading of pasted ``vllm serve`` command lines (runs in ``.venv-vllm/bin/python``).

For tests/vllm/test_vllm_launch.py: the command lines go in as JSON on stdin, vLLM's answers come out as
one ``CLI-RESULT <json>`` line. Each command is read as vLLM reads it: ``FlexibleArgumentParser`` with
the ``serve`` sub-command's ``make_arg_parser`` (or ``make_arg_parser`` alone for
``python -m vllm.entrypoints.openai.api_server``), ``args.model = args.model_tag`` as ``vllm serve``'s
``cmd`` does, ``AsyncEngineArgs.from_cli_args``, then ``CacheConfig``'s own field checks for the
values glm-kv checks at that stage (cache dtype, memory utilization). The stand-in H200 platform of
oracle.py is set up first (vLLM's argument defaults ask the platform).

Input: {"commands": [str, ...], "engine_fields": [str, ...]}; output per command:
{"stage": null | "argparse" | "config" | "other", "error": str, "values": {dest: value},
"engine": {field: repr} (only for the commands listed in engine_fields)}; plus "flags" (option string
-> [dest, nargs], as data/vllm-0.33.0-flags.json stores them), "engine_args_fields" and
"kv_cache_dtypes" (config/cache.py KV_CACHE_DTYPES).
"""
from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import shlex
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

DESTS = ("model", "tensor_parallel_size", "kv_cache_memory_bytes", "kv_cache_dtype", "mamba_cache_dtype",
         "mamba_ssm_cache_dtype", "enable_prefix_caching", "block_size", "max_model_len", "max_num_seqs",
         "speculative_config", "disable_hybrid_kv_cache_manager", "num_gpu_blocks_override",
         "gpu_memory_utilization", "decode_context_parallel_size", "cp_kv_cache_interleave_size",
         "dcp_kv_cache_interleave_size")


def main() -> int:
    import oracle

    oracle._environment()
    oracle.prepare(oracle.GPUS["H200"])
    from vllm.config import CacheConfig
    from vllm.config.cache import KV_CACHE_DTYPES
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.entrypoints.common.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    def serve_parser():
        root = FlexibleArgumentParser(prog="vllm")
        sub = root.add_subparsers(dest="subparser")
        make_arg_parser(sub.add_parser("serve"))
        return root

    def api_parser():
        return make_arg_parser(FlexibleArgumentParser(prog="api_server"))

    req = json.loads(sys.stdin.read())
    want_engine = set(req.get("engine_fields", []))
    out = []
    for command in req["commands"]:
        words = shlex.split(command)
        if "serve" in words:
            argv, parser = words[words.index("serve"):], serve_parser()
        else:
            argv, parser = words[words.index("vllm.entrypoints.openai.api_server") + 1:], api_parser()
        res: dict = {"stage": None, "error": "", "values": {}}
        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err):
                ns = parser.parse_args(argv)
        except SystemExit:
            res.update(stage="argparse", error=err.getvalue().strip().splitlines()[-1:] and
                       err.getvalue().strip().splitlines()[-1])
            out.append(res)
            continue
        except Exception as e:  # noqa: BLE001 - FlexibleArgumentParser's own ValueErrors
            res.update(stage="argparse", error=f"{type(e).__name__}: {e}")
            out.append(res)
            continue
        if getattr(ns, "model_tag", None) is not None:
            ns.model = ns.model_tag
        try:
            ea = AsyncEngineArgs.from_cli_args(ns)
        except Exception as e:  # noqa: BLE001
            res.update(stage="other", error=f"{type(e).__name__}: {e}")
            out.append(res)
            continue
        res["values"] = {d: getattr(ea, d) for d in DESTS}
        if command in want_engine:
            res["engine"] = {f.name: repr(getattr(ea, f.name)) for f in dataclasses.fields(ea)}
        try:
            CacheConfig(cache_dtype=ea.kv_cache_dtype, gpu_memory_utilization=ea.gpu_memory_utilization)
        except Exception as e:  # noqa: BLE001 - pydantic's ValidationError: vLLM refuses the config
            res.update(stage="config", error=f"{type(e).__name__}: {str(e)[:300]}")
        out.append(res)
    parser = serve_parser()._subparsers._group_actions[0].choices["serve"]
    flags = {o: [a.dest, a.nargs] for o, a in sorted(parser._option_string_actions.items())}
    fields = [f.name for f in dataclasses.fields(AsyncEngineArgs)]
    print("CLI-RESULT " + json.dumps({"results": out, "flags": flags, "engine_args_fields": fields,
                                       "kv_cache_dtypes": list(KV_CACHE_DTYPES)}, default=repr),
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
