"""Real tensors for the other hybrid models' pools, shaped like SGLang 0.5.23's (issue 22).

Why: the plan's ledgers (``glm_kv.ledgers.plan``) sum layer specs; this module allocates the
buffers SGLang's pool constructors allocate and counts their bytes, so a spec that is wrong shows
up as a difference. The two sides share no byte formula: shapes are restated here from the
config (``glm_kv.inputs.hf_config``) and the resolved launch facts (kv dtype, DSA backends,
attention TP, SSM dtype, page size: ``plan.args`` / ``plan.profile`` / ``plan.token.page_size``), after SGLang's
constructors:

* ``MLATokenToKVPool`` / ``DSATokenToKVPool``: ``kv_buffer[i]`` (size + page, 1, kv_cache_dim),
  bf16 or uint8 (fp8); DSA FlashMLA rows are kv_lora + kv_lora/128 x 4 + rope x 2 wide.
* ``IndexKeyCache``: ``buffer[i]`` ((size + page + 1) // page, page // kpool x (d + d/128 x 4)) uint8.
* ``MHATokenToKVPool``: ``k_buffer[i]``, ``v_buffer[i]`` (size + page, kv heads per rank, head dim).
* ``MambaPool``: ``conv[0]`` (layers, slots + 1, *conv) bf16, ``temporal`` (layers, slots + 1, *ssm).
* ``SWAKVPool`` (hybrid sliding-window models, gpt-oss): an ``MHATokenToKVPool`` for the full-attention layers
  and one for the sliding-window layers (``swa_k_buffer`` / ``swa_v_buffer``: SWA heads per rank, SWA head dims,
  the config's own when it names no SWA ones), ``layer_types`` split as ``get_hybrid_layer_ids``.

Bytes per token and per slot are the difference between two allocations (2 and 4 pages, 1 and 2
slots): the padding row/page and slot cancel, as in tests/sglang's oracle.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from types import SimpleNamespace

import torch

from ..inputs.hf_config import HfConfig, config_where, config_int as _int, nemotron_pattern  # the config rules
from .memory_pool import mla_kv_cache_dim

TORCH = {"bfloat16": torch.bfloat16, "float32": torch.float32, "float16": torch.float16, "uint8": torch.uint8}


@dataclass
class ModelPools:
    """The buffers of one model's pools (per layer lists, as SGLang keeps them)."""

    kv_buffer: list        # MLA rows
    k_buffer: list         # GQA
    v_buffer: list
    index_buffer: list     # DSA IndexKeyCache
    conv: list             # MambaPool conv (one tensor per conv part)
    temporal: list         # MambaPool temporal (one tensor, or none)
    swa_k_buffer: list = None   # SWAKVPool's sliding-window pool (hybrid SWA only)
    swa_v_buffer: list = None

    def nbytes(self, *names: str) -> int:
        return sum(t.numel() * t.element_size() for n in names for t in (getattr(self, n) or []))


def _layer_kinds(cfg: HfConfig, hybrid_swa: bool = True) -> tuple[list[int], list[int]]:
    """(full-attention layer ids, state layer ids), restated from each config class."""
    t = cfg.text
    if cfg.family in ("mla+kda", "mla_dsa+kda"):
        n = t["num_hidden_layers"]
        kda = t["linear_attn_config"]["kda_layers"]
        one_based = cfg.model_type in ("kimi_k3", "kimi_linear")
        state = [i for i in range(n) if (i + 1 if one_based else i) in kda]
    elif cfg.family == "gqa+gdn":
        n, every = t["num_hidden_layers"], t.get("full_attention_interval", 4)
        state = [i for i in range(n) if (i + 1) % every]
    elif cfg.family == "gqa+mamba2":
        pattern = nemotron_pattern(t, config_where(cfg))
        return [i for i, c in enumerate(pattern) if c == "*"], [i for i, c in enumerate(pattern) if c == "M"]
    elif cfg.family == "gqa+jet":   # JetNemotronConfig (issue 32): "jet" state layers, "attn" / "swa" full
        types = t["layer_types"]
        return [i for i, x in enumerate(types) if x in ("attn", "swa")], [i for i, x in enumerate(types) if x == "jet"]
    elif cfg.family == "gqa_swa" and hybrid_swa:   # get_hybrid_layer_ids (SWA_SINK_ARCHS): the full pool's; no state
        return [i for i, x in enumerate(t["layer_types"]) if x == "full_attention"], []
    else:
        n, state = t["num_hidden_layers"], []
    return [i for i in range(n) if i not in state], state


def _indexed(cfg: HfConfig, layers: list[int]) -> list[int]:
    types = cfg.text.get("indexer_types")
    return [i for i in layers if not (isinstance(types, list) and i < len(types) and types[i] == "shared")]


def allocate(plan, tokens: int, slots: int, device: str = "cpu") -> ModelPools:
    """Allocate the pools for ``tokens`` token slots and ``slots`` state slots (plus padding)."""
    cfg, args, page = plan.config, plan.args, plan.token.page_size
    t, tp, state_tp = cfg.text, args.attn_tp_size, args.linear_attn_tp_size
    hybrid_swa = not plan.profile.disable_hybrid_swa_memory   # --disable-hybrid-swa-memory: one full pool
    full, state = _layer_kinds(cfg, hybrid_swa)
    fp8 = args.kv_cache_dtype == "fp8_e4m3"
    kv_dtype = torch.uint8 if fp8 else torch.bfloat16
    rows = tokens + page
    pools = ModelPools([], [], [], [], [], [])
    dsa = cfg.family in ("mla_dsa", "mla_dsa+kda")
    if cfg.family.startswith("mla"):
        lora, rope = t["kv_lora_rank"], t["qk_rope_head_dim"]
        # calculate_mla_kv_cache_dim's row (the tensors side's own statement, memory_pool.py): the local
        # role's backend decides on a disaggregated server
        dim = (mla_kv_cache_dim(SimpleNamespace(kv_lora_rank=lora, qk_rope_head_dim=rope), args.kv_cache_dtype,
                                args.dsa_prefill_backend, args.dsa_decode_backend, plan.profile.disaggregation_mode)
               if dsa else lora + rope)
        pools.kv_buffer = [torch.empty((rows, 1, dim), dtype=kv_dtype, device=device) for _ in full]
    else:
        heads = max(1, t.get("num_key_value_heads", t["num_attention_heads"]) // tp)
        # ModelConfig._derive_model_shapes: head_dim None -> hidden // heads; v_head_dim None or 0 -> head_dim
        where = config_where(cfg)
        hd = (_int(t, "head_dim", where) if t.get("head_dim") is not None
              else t["hidden_size"] // t["num_attention_heads"])
        vd = t.get("v_head_dim")
        vhd = hd if vd is None or (type(vd) is int and vd == 0) else _int(t, "v_head_dim", where)
        pools.k_buffer = [torch.empty((rows, heads, hd), dtype=kv_dtype, device=device) for _ in full]
        pools.v_buffer = [torch.empty((rows, heads, vhd), dtype=kv_dtype, device=device) for _ in full]
        if cfg.family == "gqa_swa" and hybrid_swa:   # SWAKVPool's SWA pool, here as many tokens as the full pool
            swa_layers = [i for i, x in enumerate(t["layer_types"]) if x == "sliding_attention"]
            sh = max(1, t["swa_num_key_value_heads"] // tp) if "swa_num_key_value_heads" in t else heads
            shd = t.get("swa_head_dim") or hd
            svd = t.get("swa_v_head_dim") or (t.get("swa_head_dim") or vhd)
            pools.swa_k_buffer = [torch.empty((rows, sh, shd), dtype=kv_dtype, device=device) for _ in swa_layers]
            pools.swa_v_buffer = [torch.empty((rows, sh, svd), dtype=kv_dtype, device=device) for _ in swa_layers]
    if dsa:
        d, kpool = t["index_head_dim"], t.get("index_kpool", 1)
        pages = (tokens + page + 1) // page
        width = page // kpool * (d + d // 128 * 4) if page % kpool == 0 else math.ceil(page / kpool) * (d + d // 128 * 4)
        pools.index_buffer = [torch.empty((pages, width), dtype=torch.uint8, device=device)
                              for _ in _indexed(cfg, full)]
    if state:
        ssm = plan.profile.mamba_ssm_dtype
        from_config = "mamba_ssm_dtype" not in plan.profile.model_fields_set
        if from_config and cfg.family in ("gqa+gdn", "gqa+mamba2", "gqa+jet"):
            ssm = t.get("mamba_ssm_dtype") or ssm
            ssm = ssm if ssm in TORCH else "float32"
        if cfg.family in ("mla+kda", "mla_dsa+kda"):
            lac = t["linear_attn_config"]
            h, hd, k = lac["num_heads"], lac["head_dim"], lac["short_conv_kernel_size"]
            conv = (k - 1, 3 * h * hd // state_tp)
            temporal = (h // state_tp, hd, hd)
        else:
            if cfg.family == "gqa+gdn":
                h, hd, groups, st, k = (t["linear_num_value_heads"], t["linear_value_head_dim"],
                                        t["linear_num_key_heads"], t["linear_key_head_dim"], t["linear_conv_kernel_dim"])
            elif cfg.family == "gqa+jet":   # JetBlock: heads = groups, v dim = int(k dim x expand_v)
                jet = t["efficient_attention_config"]["jet"]
                h = groups = jet["num_heads"]
                st, k = jet["head_dim"], jet["conv_size"]
                hd = int(st * jet["expand_v"])
            else:
                h, hd, st = t["mamba_num_heads"], t["mamba_head_dim"], t["ssm_state_size"]
                groups, k = t.get("n_groups", t.get("mamba_n_groups", 8)), t.get("conv_kernel", t.get("mamba_d_conv", 4))
            if groups % state_tp:
                groups = state_tp
            conv = ((h * hd + 2 * groups * st) // state_tp, k - 1)
            temporal = (h // state_tp, hd, st)
        n = len(state)
        pools.conv = [torch.empty((n, slots + 1, *conv), dtype=torch.bfloat16, device=device)]
        pools.temporal = [torch.empty((n, slots + 1, *temporal), dtype=TORCH[ssm], device=device)]
    return pools


def measure_model(plan, device: str = "cpu") -> dict:
    """Per-token KV, per-token indexer and per-slot bytes, measured from two allocations, beside
    the plan's figures; ``differences`` names every key where they disagree."""
    page = plan.token.page_size
    small = max(page, 64)
    a = allocate(plan, 2 * small, 1, device)
    sizes_a = (a.nbytes("kv_buffer", "k_buffer", "v_buffer"), a.nbytes("index_buffer"), a.nbytes("conv", "temporal"),
               a.nbytes("swa_k_buffer", "swa_v_buffer"))
    del a
    b = allocate(plan, 4 * small, 2, device)
    sizes_b = (b.nbytes("kv_buffer", "k_buffer", "v_buffer"), b.nbytes("index_buffer"), b.nbytes("conv", "temporal"),
               b.nbytes("swa_k_buffer", "swa_v_buffer"))
    del b
    dt = 2 * small
    measured = {"kv_bytes_per_token": (sizes_b[0] - sizes_a[0]) // dt,
                "indexer_bytes_per_token": (sizes_b[1] - sizes_a[1]) // dt,
                "state_slot_bytes": sizes_b[2] - sizes_a[2]}
    planned = {"kv_bytes_per_token": plan.token.kv_bytes_per_token,
               "indexer_bytes_per_token": plan.token.indexer_bytes_per_token,
               "state_slot_bytes": plan.request.state_slot_bytes}
    if plan.token.swa_kv_bytes_per_token is not None:   # hybrid SWA (issue 32): the SWA pool's bytes per token
        measured["swa_kv_bytes_per_token"] = (sizes_b[3] - sizes_a[3]) // dt
        planned["swa_kv_bytes_per_token"] = plan.token.swa_kv_bytes_per_token
    return {"measured": measured, "plan": planned,
            "differences": {k: (planned[k], measured[k]) for k in planned if planned[k] != measured[k]}}
