"""Start-up refusals of SGLang 0.5.23 for combinations of modelled flags (issue 30, item 6), in its words.

Each rule is one SGLang check the launch runs before any pool is sized; glm-kv refuses the same
combination naming the field, with SGLang's message quoted (tests/sglang/test_startup_refusals.py
drives SGLang's own ``ServerArgs`` resolution and ``check_server_args`` on the same launches).
The host-memory check of the HiCache pools needs the pool sizes: it lives in ``ledgers/host.py``.
"""
from __future__ import annotations

from ..errors import ProfileError
from .rules import rules_for

# SGLang 0.5.23's own messages (file of the check in parentheses at each use)
SGLANG_SAYS = {
    "nnodes_divides_tp": "tp_size must be divisible by number of nodes",
    "nnodes_dp_replicas": ("multi-node data-parallel replicas are not supported; use attention DP "
                           "(--attn-dp-size) across nodes"),
    "lazy_pd": ("extra_buffer_lazy unsupported under PD disaggregation; use --mamba-radix-cache-strategy "
                "extra_buffer."),
    "prefill_cp_decode": ("CP is only supported for prefill when PD disaggregation, please remove "
                          "--enable-prefill-cp."),
    "cp_sharing_pd_spec": "--speculative-algorithm != DFLASH is not supported with CP-TP group sharing.",
    "cp_sharing_pd_dp": "--dp-size > 1 is not supported with CP-TP group sharing.",
    "tbo_needs_dp": ("When enabling two batch overlap without an EP a2a backend (moe_a2a_backend='none'), "
                     "attention DP (--attn-dp-size) is required (DeepSeek-V4 non-EP DP TBO path)."),
    "tbo_megamoe": ("--moe-a2a-backend megamoe has no two-batch / single-batch overlap decomposition; disable "
                    "--enable-two-batch-overlap and --enable-single-batch-overlap."),
    "tbo_deepep_v2": ("DeepEP v2 MoE has not implemented the TBO/SBO overlap hooks yet. Disable "
                      "--enable-two-batch-overlap and --enable-single-batch-overlap when using --moe-a2a-backend "
                      "deepep_v2."),
    "tbo_index_sharing": ("--enable-two-batch-overlap is not supported with DSA index-topk sharing: the TBO op path "
                          "does not propagate topk indices across layers, so shared layers would run sparse "
                          "attention without indices."),
    "topk_page": ("speculative_eagle_topk > 1 with page_size > 1 is only supported on ('flashinfer', 'fa3', "
                  "'triton'); got attention_backend='dsa'. Use page_size == 1 or one of those backends."),
}
CP_TP_SHARING_ARCHS = ("Glm5NextForConditionalGeneration",)   # arg_groups/cp_tp_group_sharing_hook.py


def validate_linear_attn_backend(p, sm: int | None) -> None:
    """arg_groups/attention_hook.py ``handle_linear_attn_backend`` (every model, at resolution): FlashInfer's
    linear-attention decode on SM100+ needs a bf16 SSM state, and SGLang refuses the launch otherwise. The
    decode backend is ``--linear-attn-backend`` here (``--linear-attn-decode-backend`` is not read by glm-kv);
    the state dtype as SGLang's field holds it: None when ``--mamba-ssm-dtype`` is not given."""
    if not rules_for(p).startup_refusals or p.linear_attn_backend != "flashinfer" or sm is None or sm < 100:
        return
    given = p.mamba_ssm_dtype if "mamba_ssm_dtype" in p.model_fields_set else None
    if given != "bfloat16":
        raise ProfileError("linear_attn_backend", "SGLang 0.5.23 refuses it at start-up: \"--linear-attn-decode-backend "
                                                  "flashinfer on SM100+ requires --mamba-ssm-dtype bfloat16, got "
                                                  f"{given!r}\" (arg_groups/attention_hook.py handle_linear_attn_backend)")


def _says(key: str, where: str) -> str:
    return f"SGLang 0.5.23 refuses it at start-up: \"{SGLANG_SAYS[key]}\" ({where})"


def validate_two_batch_overlap(p, config=None, is_dsa: bool = False) -> None:
    """``--enable-two-batch-overlap``'s start-up refusals, in the order SGLang's hooks run them: the MoE
    hooks (mega_moe_hook.check_mega_moe_compat, moe_hook's DeepEP v2 branch), the DSA model override
    (model_hook._validate_dsa_tbo_index_sharing: index_topk_freq > 1, an "S" in index_topk_pattern or a
    "shared" indexer type), then validation_hook.check_two_batch_overlap (no a2a backend needs DP attention).
    The ones glm-kv cannot reach are left to the flags that lead there (LoRA, DWDP, unified memory, UNO,
    KV-cache sharding: refused by the flag table)."""
    if not p.enable_two_batch_overlap:
        return
    if p.moe_a2a_backend == "megamoe":
        raise ProfileError("enable_two_batch_overlap", _says("tbo_megamoe", "arg_groups/mega_moe_hook.py"))
    if p.moe_a2a_backend == "deepep_v2":
        raise ProfileError("enable_two_batch_overlap", _says("tbo_deepep_v2", "arg_groups/moe_hook.py"))
    text = getattr(config, "text", None) or {}
    freq = text.get("index_topk_freq", 1) or 1
    if is_dsa and (freq > 1 or "S" in (text.get("index_topk_pattern") or "")
                   or "shared" in (text.get("indexer_types") or ())):
        raise ProfileError("enable_two_batch_overlap", _says("tbo_index_sharing", "arg_groups/model_hook.py"))
    if p.moe_a2a_backend == "none" and not (p.enable_dp_attention and p.dp_size > 1):
        raise ProfileError("enable_two_batch_overlap",
                           _says("tbo_needs_dp", "arg_groups/validation_hook.py check_two_batch_overlap"))


def validate_startup(p, strategy: str, model=None, config=None) -> None:
    """``p``: the profile after ``resolve``'s decode-server adjustment; ``strategy``: the resolved
    mamba radix-cache strategy ("none" without the radix cache); ``model``: its facts (architectures);
    ``config``: its config.json (what the DSA override reads)."""
    if not rules_for(p).startup_refusals:   # the article's SGLang (upstream f4de6abee6) is not checked here
        return
    validate_two_batch_overlap(p, config, bool(getattr(model, "is_dsa", False)))
    nnodes = p.nnodes
    # arg_groups/validation_hook.py check_server_args (pp is 1: --pp-size is refused by the flag table)
    if p.tp_size % nnodes:
        raise ProfileError("nnodes", _says("nnodes_divides_tp", "arg_groups/validation_hook.py check_server_args")
                           + f"; tp_size {p.tp_size}, nnodes {nnodes}")
    if nnodes != 1 and p.dp_size > 1 and not p.enable_dp_attention:
        raise ProfileError("nnodes", _says("nnodes_dp_replicas", "arg_groups/validation_hook.py check_server_args"))
    # arg_groups/speculative_hook.py: EAGLE tree verify (topk > 1) with pages (256 here) needs an attention backend
    # this model does not have ('dsa' is its only one); with ReplaySSM its own topk refusal comes first there
    if (p.speculative_algorithm in ("EAGLE", "NEXTN") and (p.speculative_eagle_topk or 1) > 1
            and not p.enable_linear_replayssm_spec):
        raise ProfileError("speculative_eagle_topk", _says("topk_page", "arg_groups/speculative_hook.py"))
    # arg_groups/mamba_hook.py validate_mamba_extra_buffer (a decode server runs without the radix cache,
    # so its strategy is none and the check is not reached there)
    if strategy == "extra_buffer_lazy" and p.disaggregation_mode != "null":
        raise ProfileError("mamba_scheduler_strategy", _says("lazy_pd", "arg_groups/mamba_hook.py"))
    # arg_groups/model_hook.py, the DSA model overrides
    if p.enable_prefill_cp and p.disaggregation_mode == "decode":
        raise ProfileError("enable_prefill_cp", _says("prefill_cp_decode", "arg_groups/model_hook.py"))
    # arg_groups/cp_tp_group_sharing_hook.py: prefill CP over the TP group on a PD (prefill) server of this
    # model needs DFLASH and no DP replicas (the decode case is model_hook's refusal above; the transfer
    # backend, pp and ep it also checks are flags glm-kv does not read: --pp-size / --ep-size are refused)
    archs = tuple(getattr(model, "architectures", ()) or ())
    if (p.enable_prefill_cp and p.attn_cp_size > 1 and p.disaggregation_mode != "null"
            and (not archs or archs[0] in CP_TP_SHARING_ARCHS)):
        if p.speculative_algorithm != "DFLASH":
            raise ProfileError("enable_prefill_cp", _says("cp_sharing_pd_spec", "arg_groups/cp_tp_group_sharing_hook.py")
                               + " on a PD prefill server")
        if p.dp_size > 1:
            raise ProfileError("enable_prefill_cp", _says("cp_sharing_pd_dp", "arg_groups/cp_tp_group_sharing_hook.py"))
