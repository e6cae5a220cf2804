"""Start-up refusals of SGLang 0.5.23 for combinations of modelled flags (issue 30, item 6), in its words.

Each rule is one SGLang check the launch runs before any pool is sized; glm-kv refuses the same
combination naming the field, with SGLang's message quoted (tests/sglang/test_startup_refusals.py
drives SGLang's own ``ServerArgs`` resolution and ``check_server_args`` on the same launches).
The host-memory check of the HiCache pools needs the pool sizes: it lives in ``ledgers/host.py``.
"""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from ..errors import ProfileError
from .retraction import validate_retraction
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
    return _says_text(SGLANG_SAYS[key], where)


def _says_text(message: str, where: str) -> str:
    return f"SGLang 0.5.23 refuses it at start-up: \"{message}\" ({where})"


def resolved_a2a_backend(p, is_dsa: bool) -> str:
    """``--moe-a2a-backend`` as SGLang 0.5.23 resolves it before its checks: a DSA model's prefill CP with
    ``--cp-strategy zigzag`` sets deepep (model_overrides/deepseek_v2.py, "zigzag DSA CP requires ...
    moe_a2a_backend=deepep"), which a decode server never reaches (the override refuses prefill CP there). Only the
    start-up checks read it: SGLang's default mem_fraction_static is computed before that override runs, so the
    fraction keeps the launch's backend (0.903 on an H200 at TP 8 with zigzag CP, as SGLang; deepep would give 0.889)."""
    if is_dsa and p.enable_prefill_cp and p.cp_strategy == "zigzag" and p.disaggregation_mode != "decode":
        return "deepep"
    return p.moe_a2a_backend


def validate_two_batch_overlap(p, config=None, is_dsa: bool = False) -> None:
    """``--enable-two-batch-overlap``'s start-up refusals, in the order SGLang's hooks run them: the MoE
    hooks (mega_moe_hook.check_mega_moe_compat, moe_hook's DeepEP v2 branch), the DSA model override
    (model_hook._validate_dsa_tbo_index_sharing: index_topk_freq > 1, an "S" in index_topk_pattern or a
    "shared" indexer type), then validation_hook.check_two_batch_overlap (no a2a backend needs DP attention).
    The ones glm-kv cannot reach are left to the flags that lead there (LoRA, DWDP, unified memory, UNO,
    KV-cache sharding: refused by the flag table)."""
    if not p.enable_two_batch_overlap:
        return
    a2a = resolved_a2a_backend(p, is_dsa)
    if a2a == "megamoe":
        raise ProfileError("enable_two_batch_overlap", _says("tbo_megamoe", "arg_groups/mega_moe_hook.py"))
    if a2a == "deepep_v2":
        raise ProfileError("enable_two_batch_overlap", _says("tbo_deepep_v2", "arg_groups/moe_hook.py"))
    text = getattr(config, "text", None) or {}
    freq = text.get("index_topk_freq", 1) or 1
    if is_dsa and (freq > 1 or "S" in (text.get("index_topk_pattern") or "")
                   or "shared" in (text.get("indexer_types") or ())):
        raise ProfileError("enable_two_batch_overlap", _says("tbo_index_sharing", "arg_groups/model_hook.py"))
    if a2a == "none" and not _attn_dp(p):
        raise ProfileError("enable_two_batch_overlap",
                           _says("tbo_needs_dp", "arg_groups/validation_hook.py check_two_batch_overlap"))


def validate_startup(p, strategy: str, model=None, config=None) -> None:
    """``p``: the profile after ``resolve``'s decode-server adjustment; ``strategy``: the resolved
    mamba radix-cache strategy ("none" without the radix cache); ``model``: its facts (architectures);
    ``config``: its config.json (what the DSA override reads)."""
    if not rules_for(p).startup_refusals:   # the article's SGLang (upstream f4de6abee6) is not checked here
        return
    # pd_disaggregation_hook / kv_cache_hook / the tree cache: the decode retraction backup (inputs/retraction.py)
    validate_retraction(p, getattr(model, "family", None) or "mla_dsa+kda")
    validate_two_batch_overlap(p, config, bool(getattr(model, "is_dsa", False)))
    validate_host_memory_mode(p)   # arg_groups/hicache_hook.py, before the speculative hook
    # arg_groups/speculative_hook.py, on the final algorithm (NEXTN is EAGLE by then)
    if _decode_radix(p) and _spec(p) not in (None, "DSPARK", "EAGLE", "EAGLE3"):
        raise ProfileError("disaggregation_decode_enable_radix_cache", _says_text(
            "--disaggregation-decode-enable-radix-cache is incompatible with speculative decoding "
            f"(--speculative-algorithm {_spec(p)})", "arg_groups/speculative_hook.py"))
    nnodes = p.nnodes
    # arg_groups/validation_hook.py check_server_args (pp is 1: --pp-size is refused by the flag table)
    if p.tp_size % nnodes:
        raise ProfileError("nnodes", _says("nnodes_divides_tp", "arg_groups/validation_hook.py check_server_args")
                           + f"; tp_size {p.tp_size}, nnodes {nnodes}")
    if nnodes != 1 and p.dp_size > 1 and not p.enable_dp_attention:
        raise ProfileError("nnodes", _says("nnodes_dp_replicas", "arg_groups/validation_hook.py check_server_args"))
    # arg_groups/speculative_hook.py: EAGLE tree verify (topk > 1) with pages (256 here) needs an attention backend
    # this model does not have ('dsa' is its only one); with ReplaySSM its own topk refusal comes first there
    # (a DSA model's backend; the GQA hybrids run triton / flashinfer on page 1 under topk > 1, and SGLang starts)
    if (p.speculative_algorithm in ("EAGLE", "NEXTN") and (p.speculative_eagle_topk or 1) > 1
            and not p.enable_linear_replayssm_spec and getattr(model, "is_dsa", True)):
        raise ProfileError("speculative_eagle_topk", _says("topk_page", "arg_groups/speculative_hook.py"))
    # arg_groups/mamba_hook.py validate_mamba_extra_buffer (a decode server runs without the radix cache,
    # so its strategy is none and the check is not reached there)
    if strategy == "extra_buffer_lazy" and p.disaggregation_mode != "null":
        raise ProfileError("mamba_scheduler_strategy", _says("lazy_pd", "arg_groups/mamba_hook.py"))
    # arg_groups/model_hook.py, the DSA model overrides (is_deepseek_dsa only: gpt-oss starts, issue 32)
    if p.enable_prefill_cp and p.disaggregation_mode == "decode" and getattr(model, "is_dsa", True):
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


# Flags the flag table proves inert on some proof profiles only: SGLang 0.5.23 refuses them at start-up
# where another setting of the launch says so (the row's ``sglang_refuses_on``). canonical flag -> checks in
# the order SGLang's hooks run them: (condition on the profile, the flag's values and the GPU, SGLang's
# words, the file). Proven through SGLang by tests/sglang/test_flags_conditional.py.
def _spec(p) -> str | None:
    """The algorithm SGLang's validators see: NEXTN is EAGLE by then (speculative_hook)."""
    return "EAGLE" if p.speculative_algorithm == "NEXTN" else p.speculative_algorithm


def _attn_dp(p) -> bool:
    return p.enable_dp_attention and p.dp_size > 1


def _decode_radix(p) -> bool:
    """A decode server that keeps the radix cache (handle_pd_disaggregation reads the flag there only)."""
    return p.disaggregation_mode == "decode" and p.disaggregation_decode_enable_radix_cache


def _radix_off(p) -> bool:
    """The radix cache as SGLang resolves it: a decode server runs without it unless it keeps it, over
    --disable-radix-cache (handle_pd_disaggregation)."""
    if p.disaggregation_mode == "decode":
        return not p.disaggregation_decode_enable_radix_cache
    return p.disable_radix_cache


def _int(values: list[str]) -> int | None:
    try:
        return int(values[0])
    except (ValueError, IndexError):
        return None


def _track_interval_refused(p, values: list[str], g) -> bool:
    """model_hook runs validate_mamba_extra_buffer (mamba_hook.py) where the strategy resolves to
    extra_buffer(_lazy): its asserts want the interval a multiple of the page and at least the draft tokens.
    ``g.resolve``: ``resolve.resolve``, passed in by the caller (resolve imports this module)."""
    n = _int(values)
    if n is None or g.resolve is None:
        return False
    r = g.resolve(p)
    if r.mamba_strategy not in ("extra_buffer", "extra_buffer_lazy"):
        return False
    return n % r.page_size != 0 or (r.draft_tokens > 0 and n < r.draft_tokens)


def _hicache_host_mode_validated(p) -> bool:
    """hicache_hook.handle_hicache runs validate_hicache_host_memory_mode with HiCache, or on a decode server
    whose retraction backup is unset or host_pool (the decode offload flag is refused by the flag table)."""
    backup = getattr(p, "disaggregation_decode_retraction_backup", None)
    return p.enable_hierarchical_cache or (p.disaggregation_mode == "decode" and backup in (None, "host_pool"))


def validate_host_memory_mode(p) -> None:
    """``hicache_hook.validate_hicache_host_memory_mode``: buffer_only stages pages on their way to a storage
    backend, so SGLang refuses it without one, and on a decode server, where it is validated at all."""
    if p.hicache_host_memory_mode != "buffer_only" or not _hicache_host_mode_validated(p):
        return
    if p.hicache_storage_backend is None:
        raise ProfileError("hicache_host_memory_mode", _says_text(
            "--hicache-host-memory-mode buffer_only requires a storage backend (--hicache-storage-backend): host "
            "memory is only a staging buffer and all cached data lives in storage.", "arg_groups/hicache_hook.py"))
    if p.disaggregation_mode == "decode":
        raise ProfileError("hicache_host_memory_mode", _says_text(
            "--hicache-host-memory-mode buffer_only is not supported on decode instances: the decode-side prefetch "
            "and offload paths bypass the buffer-mode pipeline, fetching without its prefix context and never "
            "consuming its staged holds. Prefill instances share the standard scheduler path and are supported.",
            "arg_groups/hicache_hook.py"))


CONDITIONAL_REFUSALS: dict[str, tuple[tuple[Any, str, str], ...]] = {
    "--enable-tp-lm-head-all-to-all": (
        (lambda p, v, g: not _attn_dp(p), "--enable-tp-lm-head-all-to-all requires attention DP (--attn-dp-size).",
         "arg_groups/overrides.py"),),
    "--enable-deepseek-v4-fp4-indexer": (
        (lambda p, v, g: g.sm // 10 not in (10, 12),
         "--enable-deepseek-v4-fp4-indexer requires SM100, SM120, or gfx95 GPUs with FP4 indexer support.",
         "arg_groups/serving_hook.py"),),
    "--enable-int8-mamba-checkpoint": (
        (lambda p, v, g: p.enable_hierarchical_cache,
         "--enable-int8-mamba-checkpoint is not supported together with --enable-hierarchical-cache: the "
         "host-offload path is not int8-aware. Disable one of them.", "arg_groups/mamba_hook.py"),),
    "--enable-unified-cache-external-linker": (
        (lambda p, v, g: _radix_off(p), "--enable-unified-cache-external-linker requires the default "
         "UnifiedRadixCache with radix caching enabled.", "arg_groups/hicache_hook.py"),
        (lambda p, v, g: p.enable_hierarchical_cache, "--enable-unified-cache-external-linker and "
         "--enable-hierarchical-cache are mutually exclusive.", "arg_groups/hicache_hook.py")),
    "--enable-lmcache": (
        (lambda p, v, g: p.enable_hierarchical_cache,
         "--enable-lmcache and --enable-hierarchical-cache are mutually exclusive", "arg_groups/kv_cache_hook.py"),
        (lambda p, v, g: _radix_off(p), "--enable-lmcache requires radix cache to be enabled",
         "arg_groups/kv_cache_hook.py"),
        (lambda p, v, g: _spec(p) is not None, "LMCacheUnifiedRadixCache does not yet support speculative decoding",
         "arg_groups/kv_cache_hook.py"),
        (lambda p, v, g: _attn_dp(p), "LMCacheUnifiedRadixCache does not yet support DP attention",
         "arg_groups/kv_cache_hook.py"),
        (lambda p, v, g: p.disaggregation_mode != "null",
         "LMCacheUnifiedRadixCache currently supports colocated prefill/decode scheduling only",
         "arg_groups/kv_cache_hook.py")),
    "--encoder-only": (
        (lambda p, v, g: p.language_only, "Cannot set --encoder-only and --language-only together",
         "arg_groups/pd_disaggregation_hook.py"),
        (lambda p, v, g: p.disaggregation_mode != "null",
         "Cannot set --encoder-only and --disaggregation-mode prefill/decode together",
         "arg_groups/pd_disaggregation_hook.py")),
    "--enable-response-store": (
        (lambda p, v, g: p.disaggregation_mode != "null", "--enable-response-store is not supported with "
         "--disaggregation-mode=prefill or decode; response storage must remain disabled in PD mode.",
         "arg_groups/validation_hook.py"),),
    "--speculative-use-block-verification": (
        (lambda p, v, g: _spec(p) not in ("EAGLE", "EAGLE3", "DFLASH", "DSPARK"),
         "--speculative-use-block-verification only supports EAGLE / EAGLE3 / NEXTN / DFLASH / DSPARK.",
         "arg_groups/speculative_hook.py"),),
    "--enable-watermark": (
        (lambda p, v, g: p.disaggregation_mode != "null", "--enable-watermark is not supported with PD "
         "disaggregation", "arg_groups/validation_hook.py"),
        (lambda p, v, g: _spec(p) not in (None, "NGRAM", "EAGLE", "EAGLE3"),
         "--enable-watermark supports speculative algorithms NGRAM, EAGLE, and EAGLE3", "arg_groups/validation_hook.py")),
    "--disaggregation-transfer-backend": (
        (lambda p, v, g: _decode_radix(p) and v[:1] == ["fake"],
         "--disaggregation-decode-enable-radix-cache is incompatible with --disaggregation-transfer-backend fake",
         "arg_groups/pd_disaggregation_hook.py"),
        (lambda p, v, g: p.disaggregation_mode == "prefill" and v[:1] == ["fake"],
         "Prefill server does not support 'fake' as the transfer backend", "arg_groups/pd_disaggregation_hook.py")),
    "--weight-cache-mode": (
        (lambda p, v, g: v[:1] != ["off"] and p.speculative_algorithm is not None,
         "--weight-cache-mode is not supported together with speculative decoding (--speculative-algorithm): the "
         "weight cache daemon does not export the draft model's weights. Disable one of them (--weight-cache-mode "
         "off) for this configuration.", "arg_groups/model_path_hook.py"),),
    "--mamba-track-interval": (
        (lambda p, v, g: _track_interval_refused(p, v, g), "",
         "an AssertionError without a message in arg_groups/mamba_hook.py validate_mamba_extra_buffer: with the "
         "extra_buffer strategy the interval must be a multiple of the page size and at least the draft tokens"),),
}


# Flags the table proves inert where they move no pool, but which move one beside other settings glm-kv does
# not size yet: canonical flag -> (condition, glm-kv's refusal). Proven by tests/sglang/test_flags_conditional.py.
# (Empty since --hicache-host-memory-mode is modelled: buffer_only's default ratio, issue 30.)
CONDITIONALLY_UNSIZED: dict[str, tuple[Any, str]] = {}


def validate_inert_flags(p, given: dict[str, list[str]], resolve=None) -> None:
    """SGLang's start-up refusals of inert flags (``given``: canonical flag -> its values, from
    ``launch.inert_flags``) where the launch's other settings (``p``, the profile the command resolved to)
    say so; a flag inert everywhere has no entry. The article's layout is not checked here. ``resolve``:
    ``inputs.resolve.resolve``, for the checks that read SGLang's resolved strategy and page (without it they
    are skipped)."""
    if not rules_for(p).startup_refusals:
        return
    from .gpus import resolve_gpu

    launch = SimpleNamespace(sm=resolve_gpu(p).sm, given=given, resolve=resolve)
    for flag, checks in CONDITIONAL_REFUSALS.items():
        if flag not in given:
            continue
        for cond, says, where in checks:
            if cond(p, given[flag], launch):
                raise ProfileError(flag, f"SGLang 0.5.23 refuses it at start-up: \"{says}\" ({where})")
    for flag, (cond, why) in CONDITIONALLY_UNSIZED.items():
        if flag in given and cond(p, given[flag], launch):
            raise ProfileError(flag, why)
