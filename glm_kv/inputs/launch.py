"""Read a pasted ``python -m sglang.launch_server ...`` command into profile fields.

Parsed the way SGLang's own argparse parser would take it, so a command SGLang refuses is
refused here too, with the flag named: a switch given a value (``--enable-dp-attention=false``),
a single-dash or en-dash flag (``-tp 8``, ``–tp 8``), a stray word, a flag 0.5.23 does not have
(``--mamba-scheduler-strategy``, plain ``--cuda-graph-max-bs``), a value of the wrong type or
outside SGLang's choices. With ``layout="0.5.23"`` every flag is checked against the 0.5.23
parser's full list (``data/sglang-0.5.23-flags.json``), including argparse's unique-prefix
abbreviations (``--tp`` is ``--tp-size``).

Every flag SGLang takes is then looked up in the flag table (``data/sglang-0.5.23-flag-table.json``,
generated from the wheel's ``ServerArgs`` by tests/sglang/flag_table.py): *modelled* flags become
profile fields, *inert* ones (SGLang's own sizing proven unchanged by tests/sglang/test_flags_table.py)
are returned as such, and every other one is refused by name as not modelled (``NotModelled``,
exit 2): a planner that silently drops a flag gives a wrong number with a straight face.
"""
from __future__ import annotations

import json
import math
import re
import shlex
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional

from ..errors import ProfileError, shown
from .retraction import RETRACTION_BACKUP_CHOICES
from .swa import refuse_swa_flags
from .profile import (CP_STRATEGY_CHOICES, CUDA_GRAPH_BACKEND_CHOICES, DISAGGREGATION_MODE_CHOICES, DSA_DECODE_CHOICES, DSA_PREFILL_CHOICES,
                      HICACHE_HOST_MEMORY_MODE_CHOICES, HICACHE_STORAGE_BACKEND_CHOICES, LINEAR_ATTN_BACKEND_CHOICES,
                      MAMBA_STRATEGY_CHOICES, MOE_A2A_BACKEND_CHOICES)

COMMAND_MAX_CHARS = 100_000

# flag -> (profile field, kind). kind: "int", "hint" (SGLang's human_readable_int), "float", "str",
# "flag" (store_true).
FLAGS: dict[str, tuple[str, str]] = {
    "--tp": ("tp_size", "int"), "--tp-size": ("tp_size", "int"),
    "--tensor-parallel-size": ("tp_size", "int"),
    "--dp": ("dp_size", "int"), "--dp-size": ("dp_size", "int"),
    "--data-parallel-size": ("dp_size", "int"),
    "--enable-dp-attention": ("enable_dp_attention", "flag"),
    "--attn-cp-size": ("attn_cp_size", "int"),
    "--kv-cache-dtype": ("kv_cache_dtype", "str"),
    "--dsa-prefill-backend": ("dsa_prefill_backend", "str"),
    "--dsa-decode-backend": ("dsa_decode_backend", "str"),
    "--nsa-prefill-backend": ("dsa_prefill_backend", "str"),
    "--nsa-decode-backend": ("dsa_decode_backend", "str"),
    "--mamba-ssm-dtype": ("mamba_ssm_dtype", "str"),
    "--linear-attn-backend": ("linear_attn_backend", "str"),
    "--mamba-radix-cache-strategy": ("mamba_scheduler_strategy", "str"),
    "--mamba-scheduler-strategy": ("mamba_scheduler_strategy", "str"),
    "--disable-overlap-schedule": ("disable_overlap_schedule", "flag"),
    "--disable-radix-cache": ("disable_radix_cache", "flag"),
    "--max-running-requests": ("max_running_requests", "int"),
    "--max-total-tokens": ("max_total_tokens", "hint"),
    "--max-mamba-cache-size": ("max_mamba_cache_size", "int"),
    "--mamba-full-memory-ratio": ("mamba_full_memory_ratio", "float"),
    "--context-length": ("context_length", "hint"),
    "--page-size": ("page_size", "int"),
    "--speculative-algorithm": ("speculative_algorithm", "str"),
    "--speculative-num-draft-tokens": ("speculative_num_draft_tokens", "int"),
    "--speculative-num-steps": ("speculative_num_steps", "int"),
    "--speculative-eagle-topk": ("speculative_eagle_topk", "int"),
    "--speculative-draft-model-path": ("speculative_draft_model_path", "str"),
    "--speculative-draft-model": ("speculative_draft_model_path", "str"),
    "--speculative-dflash-block-size": ("speculative_dflash_block_size", "int"),
    "--speculative-draft-window-size": ("speculative_draft_window_size", "int"),
    "--speculative-dspark-block-size": ("speculative_dspark_block_size", "int"),
    "--mem-fraction-static": ("mem_fraction_static", "float"),
    "--language-model-only": ("language_model_only", "flag"),
    "--language-only": ("language_only", "flag"),
    "--chunked-prefill-size": ("chunked_prefill_size", "int"),
    "--cuda-graph-max-bs-decode": ("cuda_graph_max_bs_decode", "int"),
    "--disable-cuda-graph": ("disable_cuda_graph", "flag"),
    "--disable-decode-cuda-graph": ("disable_decode_cuda_graph", "flag"),
    "--disable-prefill-cuda-graph": ("disable_prefill_cuda_graph", "flag"),
    "--enable-two-batch-overlap": ("enable_two_batch_overlap", "flag"),
    "--cuda-graph-backend-decode": ("cuda_graph_backend_decode", "str"),
    "--cuda-graph-backend-prefill": ("cuda_graph_backend_prefill", "str"),
    "--enable-linear-replayssm-spec": ("enable_linear_replayssm_spec", "flag"),
    "--linear-replayssm-cache-len": ("linear_replayssm_cache_len", "int"),
    "--moe-a2a-backend": ("moe_a2a_backend", "str"),
    "--max-prefill-tokens": ("max_prefill_tokens", "hint"),
    "--disaggregation-mode": ("disaggregation_mode", "str"),
    "--enable-prefill-cp": ("enable_prefill_cp", "flag"),
    "--cp-strategy": ("cp_strategy", "str"),
    "--enable-hierarchical-cache": ("enable_hierarchical_cache", "flag"),
    "--enable-hicache": ("enable_hierarchical_cache", "flag"),   # 0.5.23's short spelling of the same flag
    "--hicache-ratio": ("hicache_ratio", "float"),
    "--hicache-size": ("hicache_size", "int"),
    "--hicache-mem-layout": ("hicache_mem_layout", "str"),
    "--hicache-io-backend": ("hicache_io_backend", "str"),
    "--hicache-host-memory-mode": ("hicache_host_memory_mode", "str"),
    "--hicache-storage-backend": ("hicache_storage_backend", "str"),
    "--hicache-host-memory-fraction": ("hicache_host_memory_fraction", "float"),
    "--nnodes": ("nnodes", "int"),
    "--disaggregation-decode-extra-slots": ("disaggregation_decode_extra_slots", "int"),
    "--disaggregation-decode-enable-radix-cache": ("disaggregation_decode_enable_radix_cache", "flag"),
    "--enable-hisparse": ("enable_hisparse", "flag"),
    "--hisparse-config": ("hisparse_config", "str"),
    "--hierarchical-sparse-attention-extra-config": ("hisparse_config", "str"),
    "--swa-full-tokens-ratio": ("swa_full_tokens_ratio", "float"),         # issue 32: hybrid SWA (gpt-oss)
    "--disable-hybrid-swa-memory": ("disable_hybrid_swa_memory", "flag"),
    # a decode server's retraction backup and what resolves it (issue 30 / 32 follow-up, inputs/retraction.py)
    "--disaggregation-decode-retraction-backup": ("disaggregation_decode_retraction_backup", "str"),
    "--disaggregation-decode-host-receive-threshold": ("disaggregation_decode_host_receive_threshold", "float"),
    "--enable-priority-scheduling": ("enable_priority_scheduling", "flag"),
    "--disable-priority-preemption": ("disable_priority_preemption", "flag"),
}
# ServerArgs field -> what it moves in glm-kv (the flag table's "modelled" rows; issue 20).
MODELLED: dict[str, str] = {
    "model_path": "model: the config every ledger reads (and the weights estimate)",
    "tp_size": "parallel: attn_tp / linear-attention TP (KDA slot split), weights per rank, default fraction",
    "dp_size": "parallel: attn_dp (requests per worker), with DP attention",
    "attn_dp_size": ("parallel: attn_dp, as --dp-size N --enable-dp-attention (0.5.23's spelling of it: "
                     "_handle_deprecated_dp_attention); with --dp-size > 1 refused as SGLang refuses it"),
    "enable_dp_attention": "parallel: attn_dp = dp_size, attn_tp = tp / dp",
    "attn_cp_size": "parallel: attn_tp = tp / attn_dp / attn_cp; default fraction (prefill graph off)",
    "kv_cache_dtype": "token: kv_cache_dim and row dtype (cell_size)",
    "dsa_prefill_backend": "token: fp8 row 512 vs 528 (calculate_mla_kv_cache_dim)",
    "dsa_decode_backend": "token: fp8 row 512 vs 528 (calculate_mla_kv_cache_dim)",
    "mamba_ssm_dtype": "request: temporal state dtype (state slot bytes)",
    "linear_attn_backend": "request: slots per request (non-triton backends)",
    "mamba_radix_cache_strategy": "request: slots per request (extra_buffer / lazy / no_buffer)",
    "disable_overlap_schedule": "request: slots per request; default fraction",
    "disable_radix_cache": "request: one slot per request; host: HiCache refused",
    "max_running_requests": "capacity: request cap, compress tail rows, req_to_token rows, default fraction",
    "max_total_tokens": "capacity: token pool cap",
    "max_mamba_cache_size": "capacity: mamba pool slots (global, divided by attn_dp)",
    "mamba_full_memory_ratio": "capacity: mamba / token split of the rest",
    "context_length": "capacity: automatic max_running_requests; req_to_token row length",
    "page_size": "token: page rounding (0.5.23 forces 256 for this model)",
    "speculative_algorithm": "token: draft layer in cell_size; request: verify scratch; memory: draft weights",
    "speculative_num_draft_tokens": "request: verify scratch; tail width; default fraction (decode)",
    "speculative_num_steps": "request: draft token count as SGLang resolves it",
    "speculative_eagle_topk": "request: draft token count as SGLang resolves it",
    "speculative_draft_model_path": ("DFLASH/DSPARK: the draft's config.json (layers, KV heads, head dims, "
                                     "block_size; DSPARK: gamma, Markov head, mask token): draft KV bytes per token "
                                     "in cell_size (its own device pool), draft weights; DSPARK without it: the "
                                     "target folder's dspark/ subfolder, as SGLang looks"),
    "speculative_dspark_block_size": ("DSPARK: gamma; speculative_num_draft_tokens = gamma + 1 (verify scratch, "
                                      "tail width); a different --speculative-num-draft-tokens is refused as "
                                      "SGLang refuses it"),
    "speculative_dspark_sps_table_path": ("nothing in the pools: the DSPARK ragged-verify planner's cost table, "
                                          "read after the pools are sized (dspark_planner.build_sps_cost_table); "
                                          "tests/sglang/test_flags_dspark.py sizes the pools with and without it"),
    "speculative_dspark_confidence_sts_path": ("nothing in the pools: the DSPARK planner's temperature "
                                               "calibration (dspark_planner), read after the pools are sized; "
                                               "tests/sglang/test_flags_dspark.py sizes the pools with and without "
                                               "it"),
    "speculative_dspark_align_verify_tokens_to_graph_tier": (
        "nothing in the pools: the DSPARK planner rounds per-request verify lengths at run time "
        "(dspark_planner); tests/sglang/test_flags_dspark.py sizes the pools with and without it"),
    "speculative_dflash_block_size": "DFLASH: speculative_num_draft_tokens (verify scratch, tail width); "
                                     "must match --speculative-num-draft-tokens",
    "speculative_draft_window_size": "DSPARK: no effect (SGLang says so; test_flags_dspark.py: same pools); "
                                     "DFLASH: validated as SGLang does (>= block_size), then refused by name: "
                                     "the draft worker's own req->token table (dflash_worker_v2 alloc_memory_pool, "
                                     "allocated after the pools) is not counted",
    "mem_fraction_static": "memory: the rest for the pools",
    "language_model_only": "memory: refused for this architecture, as SGLang refuses it",
    "language_only": "memory: no VLM factor in the default fraction",
    "chunked_prefill_size": "memory: default fraction (activation reservation)",
    "cuda_graph_max_bs_decode": "memory: default fraction (decode graph reservation)",
    "disable_cuda_graph": "memory: default fraction (no decode max_bs x 2, no MLA prefill graph 1.5 GiB, "
                          "no DeepEP a2a buffers)",
    "disable_decode_cuda_graph": "memory: default fraction (no decode max_bs x 2, no DeepEP a2a buffers; "
                                 "the DP-attention padding stays)",
    "disable_prefill_cuda_graph": "memory: default fraction (no MLA prefill graph 1.5 GiB)",
    "enable_two_batch_overlap": ("memory: default fraction (the breakable prefill graph off before the fraction, "
                                 "as cuda_graph_hook.disable_breakable_cudagraph_if_incompatible rules: no MLA "
                                 "prefill graph 1.5 GiB, no DeepEP prefill delta; an explicit prefill backend "
                                 "keeps it); SGLang's refusals (no a2a backend without DP attention, megamoe, "
                                 "deepep_v2, DSA index-topk sharing) in its words"),
    "cuda_graph_backend_decode": ("memory: default fraction (disabled: as --disable-decode-cuda-graph; full / "
                                  "breakable: the decode graph on, winning over the disable switches)"),
    "cuda_graph_backend_prefill": ("memory: default fraction (disabled: no MLA prefill graph 1.5 GiB; full / "
                                   "breakable: the graph's 1.5 GiB stays reserved even where SGLang's "
                                   "auto-disable cascade would drop it, as an explicit backend locks it; "
                                   "full: no DeepEP prefill delta)"),
    "cuda_graph_config": ("memory: default fraction, through what it sets (decode backend / max_bs / bs, prefill "
                          "backend; JSON wins over the per-phase flags); its other prefill keys size graphs "
                          "captured after the pools (tests/sglang/test_flags_graph.py: the same pools)"),
    "cuda_graph_bs_decode": ("memory: default fraction (the decode graph max_bs is max(list), winning over "
                             "--cuda-graph-max-bs-decode and the max_running_requests clamp)"),
    "enable_linear_replayssm_spec": "request/capacity: a replay ring per KDA state slot "
                                    "(replayssm_ring_bytes_per_req) joins every slot of the mamba budget and "
                                    "replaces the speculative verify scratch (_handle_max_mamba_cache)",
    "linear_replayssm_cache_len": "request: the replay ring's length L (ring bytes per slot; power of two, "
                                  ">= 2 x draft tokens, as MambaPool refuses otherwise)",
    "dcp_size": "parallel: 1 only (the default, no effect); > 1 refused as SGLang 0.5.23 refuses it for "
                "this model (DSA with index_kpool=4)",
    "mamba_max_states_per_path": "nothing in the pools (a radix-tree eviction cap at run time, proven by "
                                 "tests/sglang/test_flags_refusals.py); its value validated as SGLang does",
    "moe_a2a_backend": "memory: default fraction (DeepEP buffers, prefill graph)",
    "max_prefill_tokens": "memory: default fraction (activation reservation without chunking)",
    "disaggregation_mode": ("memory: default fraction; host: HiCache refused on decode without the decode radix "
                            "cache; a decode server's retraction backup (host.retraction_backup), whose host_pool "
                            "builds host pools without HiCache"),
    "enable_prefill_cp": "memory: default fraction",
    "cp_strategy": "parallel: context-parallel split (validated as SGLang does)",
    "enable_hierarchical_cache": ("host: HiCache host pools (KV, indexer, mamba; DFLASH's draft sidecar; with ReplaySSM "
                                  "the ring and verify conv windows in the size split); SGLang's host-memory check"),
    "hicache_ratio": "host: host pool size relative to the device pools",
    "hicache_size": "host: host pool size in GB, split over the pools",
    "hicache_mem_layout": "host: pool layout (mamba host pool needs page_first*)",
    "hicache_io_backend": "host: layout/backend validation",
    "hicache_host_memory_mode": ("host: buffer_only defaults the ratio to 1.2, not 2.0 (handle_hicache_ratio_default), "
                                 "and needs a storage backend; refused on a decode server"),
    "hicache_storage_backend": ("host: no pool moves with it; --hicache-host-memory-mode buffer_only needs one "
                                "(validate_hicache_host_memory_mode)"),
    "hicache_host_memory_fraction": ("host: the share of the host's RAM after the 10 GiB reserve that HiCache's "
                                     "auto-size gives the machine's ranks (hicache_auto_size)"),
    "nnodes": ("host: SGLang's ranks per host, tp x pp // nnodes (pool_host/base.py ranks_per_host), which "
               "split the host RAM of HiCache's auto-size and host-memory check; tp x pp must be a multiple "
               "of it (check_server_args)"),
    "disaggregation_decode_extra_slots": (
        "tail/request: on a decode server the pre-allocated request rows of req_to_token and the compress tail "
        "(DecodeReqToTokenPool); no pool elsewhere (tests/sglang/test_decode_extra_slots.py)"),
    "disaggregation_decode_enable_radix_cache": (
        "request/host: a decode server keeps the radix cache (its mamba strategy and state slots as a co-located "
        "server's; HiCache allowed there), winning over --disable-radix-cache; inert off a decode server "
        "(tests/sglang/test_startup_refusals.py DECODE_RADIX)"),
    "enable_hisparse": ("token/capacity on DSA models (DeepSeek-V3.2, GLM-5.1; inputs/hisparse.py): the indexer on "
                        "every full layer and the MTP draft's rows x host_to_device_ratio in cell_size (index_buf_size "
                        "= tokens x ratio), the DSA backends' HiSparse defaults, capacity.hisparse_logical_tokens; "
                        "GLM-5.3-Flash refused as SGLang 0.5.23 fails it (DSA + KDA: \"'HybridLinearKVPool' object has "
                        "no attribute 'register_mapping'\", mem_cache/allocator/hisparse.py, after its validators and "
                        "sizing pass); SGLang's validator refusals (radix cache on, topk > 1, dtypes / backends off its "
                        "list, non-DSA models) in its words (tests/sglang/test_flags_hisparse.py)"),
    "disaggregation_ib_device": (
        "nothing in the pools (the flag table's proof: inert on every profile SGLang starts it on); where SGLang "
        "checks it at start-up (Mooncake transfer on a prefill / decode server, validate_ib_devices) the checks "
        "that hold on any machine are SGLang's refusals in its words and the rest (the devices in "
        "/sys/class/infiniband of the machine it starts on) a plan note: glm-kv plans for that machine "
        "(inputs/ib_devices.py, tests/sglang/test_flags_ib_device.py)"),
    "hisparse_config": ("token: with --enable-hisparse, its host_to_device_ratio (default 2) and SGLang's checks of "
                        "the JSON (_parse_sparse_config); never read without it"),
    "swa_full_tokens_ratio": (
        "token/capacity: a hybrid sliding-window model's SWA pool tokens per full-pool token "
        "(HybridSWAPoolConfigurator's cell and pool split); no pool elsewhere (tests/sglang/test_models_contract.py)"),
    "disable_hybrid_swa_memory": (
        "token/capacity: a hybrid sliding-window model without its SWA pool, every layer in the full pool "
        "(ModelConfig.is_hybrid_swa); no pool elsewhere (tests/sglang/test_models_contract.py)"),
    "disaggregation_decode_retraction_backup": (
        "host: on a PD decode server, host_pool builds HiCache's host pools without --enable-hierarchical-cache "
        "(ratio 0.2, at least one longest request; or --hicache-ratio / --hicache-size); unset, SGLang resolves it "
        "against the pools (host.retraction_backup); host_pool refused in SGLang's words off a decode server, with "
        "priority preemption, on a Mamba model or an MLA pool (tests/sglang/test_decode_retraction_backup.py)"),
    "disaggregation_decode_host_receive_threshold": (
        "host: below 1 a decode server's retraction backup resolves to host_pool, its host pools' floor fits two "
        "longest requests and their layout is layer_first; refused outside [0, 1], with HiSparse, with cpu_tensor "
        "and off a decode server, in SGLang's words"),
    "enable_priority_scheduling": ("host: with priority preemption a decode server's retraction backup resolves "
                                   "to cpu_tensor (no host pools); explicit host_pool refused beside it"),
    "disable_priority_preemption": "host: priority scheduling without preemption keeps host-pool retraction",
}
# SGLang 0.5.23's argparse choices for the flags above that have them (the wheel's server_args).
CHOICES: dict[str, tuple[str, ...]] = {
    "kv_cache_dtype": ("auto", "fp8_e5m2", "fp8_e4m3", "mxfp8", "bf16", "bfloat16", "nvfp4", "fp4_mx_block16"),
    "dsa_prefill_backend": DSA_PREFILL_CHOICES, "dsa_decode_backend": DSA_DECODE_CHOICES,
    "mamba_ssm_dtype": ("float32", "bfloat16", "float16"),
    "linear_attn_backend": LINEAR_ATTN_BACKEND_CHOICES,
    "mamba_scheduler_strategy": MAMBA_STRATEGY_CHOICES,
    "moe_a2a_backend": MOE_A2A_BACKEND_CHOICES,
    "disaggregation_mode": DISAGGREGATION_MODE_CHOICES,
    "cp_strategy": CP_STRATEGY_CHOICES,
    "cuda_graph_backend_decode": CUDA_GRAPH_BACKEND_CHOICES, "cuda_graph_backend_prefill": CUDA_GRAPH_BACKEND_CHOICES,
    "hicache_mem_layout": ("layer_first", "page_first", "page_first_direct", "page_first_kv_split", "page_head"),
    "hicache_io_backend": ("direct", "kernel", "kernel_ascend"),
    "hicache_host_memory_mode": HICACHE_HOST_MEMORY_MODE_CHOICES,
    "hicache_storage_backend": HICACHE_STORAGE_BACKEND_CHOICES,
    "disaggregation_decode_retraction_backup": RETRACTION_BACKUP_CHOICES,
}
# What 0.5.23 calls a flag the article's SGLang (or a habit) spells differently.
RENAMED_IN_0523 = {
    "--mamba-scheduler-strategy": "--mamba-radix-cache-strategy",
    "--nsa-prefill-backend": "--dsa-prefill-backend",
    "--nsa-decode-backend": "--dsa-decode-backend",
    "--cuda-graph-max-bs": "--cuda-graph-max-bs-decode",
}
ENV_VARS = {
    "SGLANG_MAMBA_SSM_DTYPE": ("mamba_ssm_dtype", "str"),
    "SGLANG_OPT_MAMBA_SKIP_DECODE_LOCK": ("mamba_skip_decode_lock", "bool"),
    "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN": ("allow_overwrite_longer_context_len", "bool"),
}
ENTRY_POINTS = ("sglang.launch_server", "sglang serve", "sglang.launch_server.py")
_DASHES = "\u2010\u2011\u2012\u2013\u2014\u2015\u2212\ufe58\ufe63\uff0d"   # hyphens, en/em dash, minus
_NEGATIVE_NUMBER = re.compile(r"-\d+\Z|-\d*\.\d+\Z")


class NotModelled(ProfileError):
    """A flag SGLang 0.5.23 takes whose effect on memory glm-kv does not compute (exit 2, named)."""


# SGLang 0.5.23's own words for the refusals below (its validators, quoted; tests/sglang/
# test_flags_refusals.py drives the validators on several profiles and checks each quote is the
# message SGLang raises).
SGLANG_SAYS: dict[str, str] = {
    # arg_groups/kv_cache_hook.py handle_page_major_kv_layout (--enable-unified-memory implies the layout)
    "page_major_backends": ("--enable-page-major-kv-layout: the resolved attention backends ['dsa'] are not in "
                            "the allowed set ['cutedsl_mla', 'fa3', 'flashinfer', 'flashmla', 'triton', "
                            "'trtllm_mla'] for this configuration. Pass a compatible --attention-backend."),
    "page_major_alone": ("--enable-page-major-kv-layout without --enable-unified-memory is temporarily "
                         "unsupported: the strided MHA K/V views were removed and the static-pool page-major "
                         "layout awaits its per-layer-view reimplementation. Run with --enable-unified-memory, "
                         "or drop --enable-page-major-kv-layout."),
    # arg_groups/attention_hook.py (the ReplaySSM decode ring) and mamba_hook.py (no_buffer)
    "replayssm_extra_buffer": ("--enable-linear-replayssm requires --mamba-radix-cache-strategy no_buffer (the "
                               "default); the extra_buffer ping-pong donation path is not yet supported (follow-up)."),
    "no_buffer_page": "no_buffer only supports page_size=1.",
    # arg_groups/model_overrides/deepseek_v2.py, arg_groups/parallel_hook.py
    "dcp_kpool": ("--dcp-size > 1 is not supported for DSA with index_kpool=4: a pooled index key spans positions "
                  "owned by different DCP ranks."),
    "dcp_min": "Decode context parallel size (--dcp-size / --decode-context-parallel-size) must be >= 1",
    # arg_groups/mamba_hook.py handle_mamba_backend
    "states_per_path": "--mamba-max-states-per-path must be -1 (unlimited) or a positive integer",
}

# Flags SGLang 0.5.23 takes but cannot start this model with: refused with SGLang's own reason.
REFUSED_BY_SGLANG: dict[str, str] = {
    "enable_unified_memory": (
        "SGLang 0.5.23 cannot start GLM-5.3-Flash with it: it implies --enable-page-major-kv-layout, and "
        f"SGLang says \"{SGLANG_SAYS['page_major_backends']}\" (arg_groups/kv_cache_hook.py; 'dsa' is the only "
        "attention backend this model has); past that the unified pool asserts qk_rope_head_dim > 0 "
        "(mem_cache/unified_memory_pool.py), which is 0 for this model"),
    "enable_page_major_kv_layout": (
        f"SGLang 0.5.23 cannot start GLM-5.3-Flash with it: \"{SGLANG_SAYS['page_major_alone']}\" and, with "
        f"--enable-unified-memory, \"{SGLANG_SAYS['page_major_backends']}\" (arg_groups/kv_cache_hook.py)"),
    "enable_linear_replayssm": (
        f"SGLang 0.5.23 cannot start GLM-5.3-Flash with it: \"{SGLANG_SAYS['replayssm_extra_buffer']}\" "
        f"(arg_groups/attention_hook.py), and with --mamba-radix-cache-strategy no_buffer \""
        f"{SGLANG_SAYS['no_buffer_page']}\" (arg_groups/mamba_hook.py; this model runs with 256-token pages)"),
}


# --cuda-graph-config (model_executor/cuda_graph_config.py parse_cuda_graph_config_arg): the keys SGLang takes
CUDA_GRAPH_CONFIG_KEYS = {"decode": ("backend", "max_bs", "bs"),
                          "prefill": ("backend", "max_bs", "bs", "max_context_size", "full_prefill_max_req",
                                      "full_prefill_prefix_chunk_tokens", "max_seq_len")}


def _graph_batch_sizes(flag: str, where: str, value: Any) -> int:
    """The largest of a decode batch-size list (what handle_gpu_memory_settings keeps as max_bs)."""
    if (not isinstance(value, list) or not value
            or any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in value)):
        raise ProfileError(flag, f"{where} must be a non-empty list of positive integers, got {shown(value)}")
    return max(value)


def cuda_graph_config_fields(flag: str, raw: str) -> dict[str, Any]:
    """``--cuda-graph-config`` JSON as SGLang's parser validates it, folded into the fields it moves.

    Returns the decode backend / max_bs / bs-max and the prefill backend it sets ("decode_bs_max"
    for a decode ``bs`` list); the other prefill keys size graphs captured after the pools
    (tests/sglang/test_flags_graph.py: the same pools) and are taken as they are.
    """
    try:
        parsed = json.loads(raw)
    except ValueError as e:
        raise ProfileError(flag, f"must be JSON (SGLang refuses it: {shown(str(e), 80)})") from None
    if not isinstance(parsed, dict):
        raise ProfileError(flag, f"must be a JSON object, got {type(parsed).__name__}")
    out: dict[str, Any] = {}
    for phase, settings in parsed.items():
        if phase not in CUDA_GRAPH_CONFIG_KEYS:
            raise ProfileError(flag, f"unknown phase {shown(phase)}, expected one of ('decode', 'prefill')")
        if not isinstance(settings, dict):
            raise ProfileError(flag, f"['{phase}'] must be a JSON object, got {type(settings).__name__}")
        for key, value in settings.items():
            if key not in CUDA_GRAPH_CONFIG_KEYS[phase]:
                raise ProfileError(flag, f"['{phase}']: unknown key {shown(key)}, expected one of "
                                         f"{CUDA_GRAPH_CONFIG_KEYS[phase]}")
            if key == "backend":
                if value not in CUDA_GRAPH_BACKEND_CHOICES:
                    raise ProfileError(flag, f"['{phase}'].backend must be one of {CUDA_GRAPH_BACKEND_CHOICES}, "
                                             f"got {shown(value)}")
                out[f"cuda_graph_backend_{phase}"] = value
            elif phase == "decode" and key == "bs":
                out["decode_bs_max"] = _graph_batch_sizes(flag, "['decode'].bs", value)
            elif phase == "decode" and key == "max_bs":
                if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                    raise ProfileError(flag, f"['decode'].max_bs must be a positive integer, got {shown(value)}")
                out["cuda_graph_max_bs_decode"] = value
    return out


def _check_dcp_size(flag: str, value: int) -> None:
    """--dcp-size: 1 is the default (nothing moves); SGLang 0.5.23 refuses every other value for this model."""
    if value < 1:
        raise ProfileError(flag, f"SGLang 0.5.23 refuses it: \"{SGLANG_SAYS['dcp_min']}, but got dcp_size={value}.\"")
    if value > 1:
        raise NotModelled(flag, f"SGLang 0.5.23 cannot start GLM-5.3-Flash with it: \"{SGLANG_SAYS['dcp_kpool']}\" "
                                f"(arg_groups/model_overrides/deepseek_v2.py)")


def _check_states_per_path(flag: str, value: int) -> None:
    """--mamba-max-states-per-path: a run-time eviction cap (no pool byte); SGLang's value rule."""
    if value == 0 or value < -1:
        raise ProfileError(flag, f"SGLang 0.5.23 refuses it: \"{SGLANG_SAYS['states_per_path']}, got {value}.\"")


# Flags glm-kv reads for their value only: no profile field (nothing in the pools moves at the values
# SGLang starts this model with); a value SGLang refuses is refused the same way.
CHECKED: dict[str, tuple[str, Any]] = {
    "--dcp-size": ("dcp_size", _check_dcp_size),
    "--decode-context-parallel-size": ("dcp_size", _check_dcp_size),
    "--mamba-max-states-per-path": ("mamba_max_states_per_path", _check_states_per_path),
}
# Flags read into other fields than their own (the CUDA-graph list and JSON: what they move in the fraction)
DERIVED = ("--cuda-graph-bs-decode", "--cuda-graph-config", "--attn-dp-size", "--attention-data-parallel-size",
           "--disaggregation-ib-device")
# 0.5.23's spelling of attention DP (arg_groups/parallel_hook.py _handle_deprecated_dp_attention turns
# ``--dp-size N --enable-dp-attention`` into ``attn_dp_size = N, dp_size = 1``): read as that pair.
ATTN_DP_FLAGS = ("--attn-dp-size", "--attention-data-parallel-size")
# Flags SGLang 0.5.23 reads only after the pools are sized (DSPARK's run-time planner): taken, no field,
# listed with the inert flags (tests/sglang/test_flags_dspark.py: SGLang sizes the same pools without them).
RUNTIME_ONLY = ("--speculative-dspark-sps-table-path", "--speculative-dspark-confidence-sts-path",
                "--speculative-dspark-align-verify-tokens-to-graph-tier")


# Values SGLang 0.5.23 serves that glm-kv does not model yet (refused as not modelled, not as invalid).
VALUES_NOT_MODELLED: dict[str, tuple[str, ...]] = {
    # arg_groups/fields/spec.py: "Builtins: EAGLE, EAGLE3, NEXTN, STANDALONE, NGRAM, DFLASH, DSPARK, UNO"
    "speculative_algorithm": ("EAGLE3", "STANDALONE", "NGRAM", "UNO"),
}


@lru_cache(maxsize=1)
def flag_table() -> dict[str, dict]:
    """Long option -> its row of the 0.5.23 flag table (field, status, what it moves or why refused)."""
    path = Path(__file__).resolve().parent / "data" / "sglang-0.5.23-flag-table.json"
    rows = json.loads(path.read_text())["rows"]
    return {flag: row for row in rows for flag in row["flags"]}


def flag_table_rows() -> tuple[dict[str, int], list[dict]]:
    """(rows per status, one row per ServerArgs field of SGLang 0.5.23) for the book's reference page.

    Each row: ``field``, ``flags`` (its long options), ``status`` (modelled / inert / refused /
    no-flag) and ``detail``: what it moves (modelled), the flag value its proof ran with (inert),
    or why glm-kv refuses it (refused, with SGLang's own reason where SGLang refuses it too).
    """
    path = Path(__file__).resolve().parent / "data" / "sglang-0.5.23-flag-table.json"
    rows = []
    counts: dict[str, int] = {}
    for r in json.loads(path.read_text())["rows"]:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
        if r["status"] == "modelled":
            detail = r["moves"]
        elif r["status"] == "inert":
            detail = "proven inert with " + " ".join(r["proof"]["argv"]) + " on " + ", ".join(r["proof"]["profiles"])
        else:
            detail = REFUSED_BY_SGLANG.get(r["field"], r.get("why", ""))
        rows.append({"field": r["field"], "flags": ", ".join(r["flags"]), "status": r["status"], "detail": detail})
    return counts, rows


def _first(given: dict[str, tuple[str, list[str]]], flag: str) -> str | None:
    return (given[flag][1] or [""])[0] if flag in given else None


def _int_or_zero(text: str | None) -> int:
    try:
        return int(text or 0)
    except ValueError:
        return 0


# Flags the table proves inert only beside a companion, because SGLang 0.5.23's check_server_args
# (arg_groups/validation_hook.py) refuses them alone: flag -> (when it needs the companion, whether the
# companion is there, SGLang's message). Each row's proof carries the companion (tests/sglang/test_flags_table.py
# proves both sides); found by the fresh-clone runs' flag-table samples (seeds 21810787, 202).
NEEDS_COMPANION: dict[str, tuple[Any, Any, str]] = {
    "--retraction-policy": (lambda g: _first(g, "--retraction-policy") == "priority",
                            lambda g: "--enable-priority-scheduling" in g,
                            "--retraction-policy priority requires --enable-priority-scheduling"),
    "--export-metrics-to-file": (lambda g: True, lambda g: "--export-metrics-to-file-dir" in g,
                                 "--export-metrics-to-file-dir is required when --export-metrics-to-file is enabled"),
    "--kv-canary-sweep-interval": (lambda g: _int_or_zero(_first(g, "--kv-canary-sweep-interval")) > 0,
                                   lambda g: _first(g, "--kv-canary") not in (None, "none"),
                                   "--kv-canary-sweep-interval requires --kv-canary in {log, raise}"),
    # issue 30: check_load_publish_args; its other checks of the pair (the publisher, the port range) are
    # inputs/load_publish.py's
    "--load-publish-endpoint": (lambda g: (_first(g, "--load-publish-endpoint") or "").strip().lower() not in ("", "off"),
                                lambda g: bool(_first(g, "--kv-events-config")),
                                "--load-publish-endpoint requires --kv-events-config: routers discover the load range "
                                "through /server_info's kv_events block, absent without a publisher."),
}


# Flags the table proves inert that SGLang 0.5.23 refuses beside --enable-hisparse (issue 30): flag -> (when,
# SGLang's message, its file). The proof ran without HiSparse; with it the launch does not start.
REFUSED_WITH_HISPARSE: dict[str, tuple[Any, str, str]] = {
    "--enable-mixed-chunk": (lambda g: True, "--enable-hisparse does not support --enable-mixed-chunk yet.",
                             "arg_groups/hisparse_hook.py"),
    "--speculative-adaptive": (lambda g: (_first(g, "--speculative-algorithm") or "NONE").upper() != "NONE",
                               "HiSparse speculative decoding uses statically sized swap state; "
                               "--speculative-adaptive is not supported.", "arg_groups/hisparse_hook.py"),
}


def _refuse_inert_combinations(given: dict[str, tuple[str, list[str]]]) -> None:
    """SGLang's refusals of a flag the table proves inert, where the refusal hangs on another flag: the
    inert proof runs the flag with its companion, so the command must carry it too (NEEDS_COMPANION); and
    the inert flags SGLang refuses beside --enable-hisparse (REFUSED_WITH_HISPARSE)."""
    for canonical, (needs, has, says) in NEEDS_COMPANION.items():
        if canonical in given and needs(given) and not has(given):
            raise ProfileError(given[canonical][0], f"SGLang 0.5.23 refuses it: \"{says}\" "
                                                    "(arg_groups/validation_hook.py check_server_args)")
    if "--enable-hisparse" in given:
        for canonical, (when, says, where) in REFUSED_WITH_HISPARSE.items():
            if canonical in given and when(given):
                raise ProfileError(given[canonical][0], f"SGLang 0.5.23 refuses it with --enable-hisparse: "
                                                        f"\"{says}\" ({where})")


def flag_table_summary(path: Path | None = None) -> dict[str, int]:
    """How the flag table decides SGLang 0.5.23's ``ServerArgs`` fields (the book's flags page): rows per
    status, and the refused rows by reason: SGLang refuses the flag for this model (``sglang_refuses``), its
    sizing cannot run for it on a CPU (``cpu``), or it moves a pool glm-kv does not compute (``moves``)."""
    path = path or Path(__file__).resolve().parent / "data" / "sglang-0.5.23-flag-table.json"
    rows = json.loads(path.read_text())["rows"]
    out = {"fields": len(rows)}
    for status in ("modelled", "inert", "refused", "no-flag"):
        out[status] = sum(1 for r in rows if r["status"] == status)
    refused = [r for r in rows if r["status"] == "refused"]
    out["refused_by_sglang"] = sum(1 for r in refused if r.get("sglang_refuses") or r["field"] in REFUSED_BY_SGLANG)
    out["refused_cpu"] = sum(1 for r in refused if r.get("cpu") and not r.get("sglang_refuses"))
    out["refused_not_computed"] = sum(1 for r in refused if r.get("moves"))
    out["refused_unexplained"] = out["refused"] - out["refused_by_sglang"] - out["refused_cpu"] - out["refused_not_computed"]
    return out


def refuse_unmodelled(flag: str, canonical: str) -> None:
    """Raise ``NotModelled`` unless the flag table proves ``canonical`` inert (or glm-kv models it).

    A refused row carries its reason as SGLang decided it (tests/sglang/flag_table.py): SGLang's own
    refusal in its words, the pool SGLang's sizing moves with it that glm-kv does not compute, or why
    SGLang's sizing cannot be run for it on a CPU; the message is that reason, never a bare "not modelled".
    """
    row = flag_table().get(canonical)
    if row is None or row["status"] == "inert":
        return
    field = row["field"]
    if field in REFUSED_BY_SGLANG:
        raise NotModelled(flag, REFUSED_BY_SGLANG[field])
    why = row.get("why") or "SGLang 0.5.23 takes it; its effect on memory is not computed by glm-kv"
    raise NotModelled(flag, why)


@lru_cache(maxsize=1)
def sglang_0523_flags() -> dict[str, Any]:
    """Every long option of SGLang 0.5.23's launch parser -> the words it takes (0, 1, '?', '*', '+')."""
    path = Path(__file__).resolve().parent / "data" / "sglang-0.5.23-flags.json"
    return json.loads(path.read_text())["flags"]


def _resolve_0523(flag: str) -> str:
    """argparse's lookup: the exact option, else the one option it abbreviates; else SGLang refuses."""
    table = sglang_0523_flags()
    if flag in table:
        return flag
    matches = [f for f in table if f.startswith(flag)]
    if len(matches) == 1:
        return matches[0]
    hint = RENAMED_IN_0523.get(flag)
    if matches:   # argparse's own words (Python 3.11 ArgumentParser._parse_optional), the parser's order
        said = f"ambiguous option: {flag} could match {', '.join(sorted(matches, key=list(table).index))}"
        raise ProfileError(flag, f"SGLang 0.5.23 refuses it: \"{said}\" (its launch parser; the "
                                 f"server does not start)" + (f"; 0.5.23 calls it {hint}" if hint else ""))
    raise ProfileError(flag, f"SGLang 0.5.23 refuses it: \"unrecognized arguments: {flag[:80]}\" (its "
                             "launch parser; the server does not start)" + (f"; 0.5.23 calls it {hint}" if hint
                                                                            else ""))


def inert_flags(inert: list[str]) -> dict[str, list[str]]:
    """The accepted inert flags of ``parse_launch_command`` (``"flag value ..."``, shell-quoted as a shell reads
    them back) by their canonical 0.5.23 option: what ``startup.validate_inert_flags`` checks against the rest of
    the launch. A value holding spaces (a JSON config) stays one value."""
    out: dict[str, list[str]] = {}
    for item in inert:
        flag, *values = shlex.split(item)
        try:
            out[_resolve_0523(flag)] = values
        except ProfileError:   # not a 0.5.23 option (the article's layout): nothing of SGLang's to check
            continue
    return out


def human_readable_int(flag: str, raw: str) -> int:
    """SGLang's ``human_readable_int``: an integer, or SI (k, M, G, T) / IEC (Ki, Mi, Gi, Ti) suffixes."""
    value = raw.strip()
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)", value)
    if m and len(value) <= 40:
        number, suffix = m.groups()
        iec = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
        if suffix in iec:
            if "." in number:
                raise ProfileError(flag, f"decimals are not allowed with IEC suffixes, got {shown(raw)}")
            return int(number) * iec[suffix]
        try:
            return int(Decimal(number) * {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}[suffix])
        except InvalidOperation:
            pass
    return _int(flag, raw)


def _int(flag: str, raw: str) -> int:
    if len(raw) > 40:
        raise ProfileError(flag, f"expects an integer, got {shown(raw)}")
    try:
        return int(raw)  # what argparse's type=int does (so ' 8', '+8' and '8_000' pass, '8.0' does not)
    except ValueError:
        raise ProfileError(flag, f"expects an integer, got {shown(raw)}") from None


def _convert(flag: str, kind: str, raw: str, field: Optional[str] = None) -> Any:
    if kind == "int":
        return _int(flag, raw)
    if kind == "hint":
        return human_readable_int(flag, raw)
    if kind == "float":
        try:
            value = float(raw) if len(raw) <= 400 else math.nan
        except ValueError:
            raise ProfileError(flag, f"expects a number, got {shown(raw)}") from None
        if not math.isfinite(value):
            raise ProfileError(flag, f"expects a finite number, got {shown(raw)}")
        return value
    if kind == "bool":  # SGLang's EnvBool
        low = raw.lower()
        if low in ("true", "1", "yes", "y"):
            return True
        if low in ("false", "0", "no", "n"):
            return False
        raise ProfileError(flag, f"is not a valid boolean (SGLang takes true/1/yes/y or false/0/no/n), "
                                 f"got {shown(raw)}")
    if field in CHOICES and raw not in CHOICES[field]:
        raise ProfileError(flag, f"invalid choice {shown(raw)} (SGLang 0.5.23 takes: {', '.join(CHOICES[field])})")
    return raw


def _split(command: str) -> list[str]:
    if not isinstance(command, str) or not command.strip():
        raise ProfileError("--sglang-args", "is empty: paste a launch command such as "
                                            "'python -m sglang.launch_server --model-path ... --tp-size 8'")
    if len(command) > COMMAND_MAX_CHARS:
        raise ProfileError("--sglang-args", f"is {len(command):,} characters long (at most {COMMAND_MAX_CHARS:,})")
    if "\x00" in command:
        raise ProfileError("--sglang-args", "contains a NUL byte")
    try:
        return shlex.split(re.sub(r"\\\r?\n", " ", command))
    except ValueError as e:
        raise ProfileError("--sglang-args", f"cannot split the command ({e})") from None


def _entry_index(words: list[str]) -> int:
    """Index of the first word after the entry point (``sglang.launch_server`` / ``sglang serve``)."""
    for i, w in enumerate(words):
        if w in ("sglang.launch_server", "sglang.launch_server.py") or w.endswith("/launch_server.py"):
            return i + 1
        if w == "serve" and i > 0 and words[i - 1].rsplit("/", 1)[-1] == "sglang":
            return i + 1
    raise ProfileError("--sglang-args", "expects a launch command such as "
                                        "'python -m sglang.launch_server --model-path ... --tp-size 8'")


def parse_launch_command(command: str, layout: Optional[str] = None) -> tuple[dict, list[str]]:
    """Profile fields from a launch command, and the flags proven inert (they move no pool byte), each as one
    shell-quoted ``"flag value ..."`` (``shlex.join``: a value with spaces reads back as one word).

    ``layout="0.5.23"`` checks every flag against SGLang 0.5.23's parser (unknown, ambiguous and
    renamed flags are refused). In every layout a flag glm-kv does not model and the flag table
    does not prove inert is refused by name (``NotModelled``).
    """
    words = _split(command)
    start = _entry_index(words)
    from .rules import rules_for

    strict = layout is not None and rules_for(layout).strict_launch_flags
    fields: dict[str, Any] = {}
    inert: list[str] = []
    pending: Optional[NotModelled] = None
    graph_bs_max: Optional[int] = None
    graph_json: dict[str, Any] = {}
    attn_dp: Optional[tuple[str, int]] = None
    ib_device: Optional[tuple[str, str]] = None
    given: dict[str, tuple[str, list[str]]] = {}   # canonical flag -> (as typed, values): cross-flag refusals
    for w in words[:start]:  # the launcher: env assignments, python, -m, ...
        name, eq, raw = w.partition("=")
        if eq and name in ENV_VARS:
            field, kind = ENV_VARS[name]
            fields[field] = _convert(name, kind, raw, field)
    i = start
    while i < len(words):
        w = words[i]
        i += 1
        if w[:1] in _DASHES or (w[:1] == "-" and w[1:2] in _DASHES):
            raise ProfileError(shown(w, 40), "starts with a typographic dash (pasted from a document?): "
                                             "SGLang would not recognize it; type it with '--'")
        if not w.startswith("-") or w == "-" or _NEGATIVE_NUMBER.match(w):
            raise ProfileError(shown(w, 40), "stray word in the launch command (not a flag or a flag's value): "
                                             "SGLang refuses unrecognized arguments")
        if not w.startswith("--"):
            if w in ("-h",):
                raise ProfileError(w, "asks SGLang for its help text; the server would not start")
            raise ProfileError(shown(w, 40), "single-dash flag: SGLang 0.5.23 has no short options "
                                             "(use e.g. --tp-size 8, not -tp 8)")
        flag, eq, inline = w.partition("=")
        if strict or flag not in FLAGS:
            try:
                canonical = _resolve_0523(flag)
            except ProfileError as e:
                if strict:
                    raise
                raise ProfileError(flag, e.rule) from None   # SGLang 0.5.23's parser's own refusal
        else:
            canonical = flag
        if strict or canonical not in FLAGS:
            nargs = sglang_0523_flags()[canonical]
        else:
            nargs = 0 if FLAGS[canonical][1] == "flag" else 1
        values: list[str] = []
        if eq:
            if nargs == 0:
                raise ProfileError(flag, f"is a switch and takes no value, got {shown(inline)} (SGLang refuses "
                                         f"'{flag}={inline[:20]}'; leave the flag out to keep it off)")
            values = [inline]
        elif nargs != 0:
            while i < len(words) and (not words[i].startswith("-") or _NEGATIVE_NUMBER.match(words[i])):
                if words[i][:1] in _DASHES:
                    break
                values.append(words[i])
                i += 1
                if nargs in (1, "?"):
                    break
            if nargs in (1, "+") and not values:
                raise ProfileError(flag, "needs a value")
        if canonical in ("--model-path", "--model"):
            fields["model"] = values[0]
            fields["weights_estimate"] = True   # the model is named: its weights are predictable (issue 20)
            continue
        given[canonical] = (flag, values)
        if canonical in CHECKED:
            CHECKED[canonical][1](flag, _int(flag, values[0]))
            continue
        if canonical in RUNTIME_ONLY:
            inert.append(shlex.join([flag, *values]))
            continue
        if canonical == "--cuda-graph-bs-decode":   # handle_gpu_memory_settings: max_bs = max(bs)
            graph_bs_max = _graph_batch_sizes(flag, "the batch sizes", [_int(flag, v) for v in values])
            continue
        if canonical == "--cuda-graph-config":   # JSON wins over the per-phase flags (parse_cuda_graph_config)
            graph_json = cuda_graph_config_fields(flag, values[0])
            continue
        if canonical == "--disaggregation-ib-device":   # decided once the mode and backends are read
            ib_device = (flag, values[0])
            continue
        if canonical in ATTN_DP_FLAGS:
            attn_dp = (flag, _int(flag, values[0]))
            if attn_dp[1] < 1:   # arg_groups/parallel_hook.py, SGLang's words
                raise ProfileError(flag, f"SGLang 0.5.23 refuses it: \"--attn-dp-size must be positive (got "
                                         f"{attn_dp[1]}).\"")
            continue
        if canonical not in FLAGS:
            try:
                refuse_unmodelled(flag, canonical)
            except NotModelled as e:   # raised once the whole command parsed: SGLang's own refusals first
                pending = pending or e
            inert.append(shlex.join([flag, *values]))
            continue
        field, kind = FLAGS[canonical]
        fields[field] = True if kind == "flag" else _convert(flag, kind, values[0], field)
        if isinstance(fields[field], str) and fields[field].upper() in VALUES_NOT_MODELLED.get(field, ()):
            pending = pending or NotModelled(flag, f"SGLang 0.5.23 serves {fields[field]!r} but glm-kv does not model it yet (its "
                                    f"draft model's pools and weights are not computed), so no plan is given")
            continue
    if "model" in fields and fields["model"].rstrip("/").lower().endswith("glm-5.3-flash"):
        fields["model"] = "glm-5.3-flash"
    if attn_dp is not None and attn_dp[1] > 1:
        dp = fields.get("dp_size", 1)
        if dp > 1:   # replicas next to attention DP (with --enable-dp-attention too: --attn-dp-size wins the
            # deprecated spelling's rewrite and dp_size stays), arg_groups/parallel_hook.py in SGLang's words
            raise ProfileError(attn_dp[0], f"SGLang 0.5.23 refuses it: \"--dp-size {dp} with --attn-dp-size "
                                           f"{attn_dp[1]}: data-parallel replicas combined with attention data "
                                           f"parallelism are not supported.\" (arg_groups/parallel_hook.py)")
        fields["dp_size"], fields["enable_dp_attention"] = attn_dp[1], True
    _refuse_inert_combinations(given)
    if ib_device is not None:
        from .ib_devices import check_ib_devices, validated_at_startup   # only a command that names the flag

        if validated_at_startup(fields.get("disaggregation_mode"), _first(given, "--disaggregation-transfer-backend"),
                                _first(given, "--encoder-transfer-backend")):
            check_ib_devices(ib_device[1])   # what holds on any machine; the plan notes the rest
            fields["disaggregation_ib_device"] = ib_device[1]
        else:   # SGLang does not check it at start-up here: inert (the flag table's proof)
            inert.append(shlex.join(list(ib_device)))
    # SGLang's port-range checks of the load publisher over its DP ranks (replicas x attention-DP groups: dp_size
    # here either way, after the --attn-dp-size rewrite above)
    if "--load-publish-endpoint" in given or "--kv-events-config" in given:   # else nothing to check (and no import)
        from .load_publish import check_load_publish

        check_load_publish(_first(given, "--load-publish-endpoint"), _first(given, "--kv-events-config"),
                           fields.get("dp_size", 1))
    refuse_swa_flags(fields.get("model"), inert)   # issue 32: inert on GLM-5.3-Flash, not on a hybrid-SWA model
    if pending is not None:
        raise pending
    graph_bs_max = graph_json.pop("decode_bs_max", graph_bs_max)   # the JSON's decode bs wins over the flag's
    fields.update(graph_json)
    if graph_bs_max is not None:   # a bs list wins over any max_bs, whatever the order (max_bs = max(bs))
        fields["cuda_graph_max_bs_decode"] = graph_bs_max
    return fields, inert
