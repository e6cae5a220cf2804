"""DeepSeek-V4's weights on one GPU rank, ESTIMATED from its config.json as SGLang 0.5.23 allocates them.

Why: the DeepSeek-V4 plan (``dsv4_plan``) needs the bytes left for the KV pools, and SGLang measures the
weights only once they are loaded. This module counts, tensor by tensor, what ``DeepseekV4ForCausalLM``
(``sglang/srt/models/deepseek_v4.py``) and its MTP draft ``DeepseekV4ForCausalLMNextN``
(``deepseek_v4_nextn.py``) create on the device, at the dtype SGLang creates it with, split the way
SGLang's layers split it. Every dimension is read from the config (``cfg.text``); nothing is the model's
number. tests/sglang/test_dsv4_weights.py builds SGLang's own model classes on ``meta`` and requires
byte equality.

What one rank holds (``a`` = attention TP, ``t`` = TP):

* attention, per layer (``MqaAttentionBase`` / ``MQALayer``): ``wqkv_a`` (q_lora + head_dim rows,
  replicated; SGLANG_OPT_FUSE_WQA_WKV fuses wq_a and wkv), ``wq_b`` (heads x head_dim / a rows),
  ``wo_b`` (o_groups x o_lora_rank / a columns), all FP8 e4m3 with one fp32 scale per 128 x 128 block
  (``Fp8LinearMethod``: ``ceil(out/128) x ceil(in/128)`` fp32); ``wo_a`` (o_groups x o_lora_rank / a
  rows of heads x head_dim / o_groups) in bf16: SGLang dequantizes it at load unless its FP8 einsum runs
  (``wo_a_fp8``: DeepGEMM on SM100 / SM120, or SM90 with SGLANG_OPT_FP8_WO_A_GEMM=1 set explicitly);
  ``attn_sink`` (all heads, fp32), q_norm / kv_norm (bf16), the RadixAttention k/v scales (2 fp32);
* compressed layers: the ``Compressor`` (ratio 4 overlaps: ``coff`` = 2, ratio 128: 1): ``ape``
  (ratio x coff x head_dim, fp32), ``wkv_gate`` (2 coff head_dim x hidden, bf16), its norm (fp32);
  ratio-4 layers also the ``C4Indexer``: ``wq_b`` (index heads x index dim from q_lora, FP8),
  ``weights_proj`` (index heads x hidden, bf16) and its own compressor at index_head_dim; all replicated;
* hyper-connections (``hc_mult``): per layer two ``hc_*_fn`` ((2 + hc) hc x hc hidden), two bases and
  two 3-wide scales; the model's ``hc_head`` (hc x hc hidden, hc, 1); all fp32, replicated;
* MoE (``DeepseekV2MoE``): routed experts in MXFP4 as the checkpoint stores them (``expert_dtype``
  fp4; ``Fp8MoEMethod.create_fp8_moe_weight_`` with ``is_fp4_expert``): w13 and w2 packed two to a byte
  (int8), one e8m0 byte per 32 weights (``Mxfp4FlashinferCutlassMoEMethod``, SM90's default
  ``flashinfer_mxfp4`` runner, creates them so; SM100's TRT-LLM runner creates fp32 scales and turns
  them into one byte each after loading); 1/t of the intermediate size per rank (TP or EP: same bytes);
  shared experts (``n_shared_experts``) FP8 over t; the router ``gate`` (bf16, replicated);
  ``e_score_correction_bias`` (fp32) on the layers past ``num_hash_layers``; the hash layers'
  ``tid2eid`` table (vocab x top-k, int32) instead;
* embed_tokens (bf16; over a under DP attention, else over t), lm_head (bf16, over t), padded as
  ``VocabParallelEmbedding`` pads (64 rows, times the group when 64 does not divide);
  input / post-attention / final norms (bf16);
* the RoPE tables the layers register as device buffers, one per distinct table (SGLang caches them:
  ``precompute_freqs_cis`` is an lru_cache, ``get_rope`` keeps ``_ROPE_DICT``): ``freqs_cis``
  (max_position x rope/2, complex64) and ``rotary_emb.cos_sin_cache`` (positions x rope, fp32), one
  of each for the uncompressed layers (rope_theta, max_position_embeddings) and one for the
  compressed layers (compress_rope_theta, YaRN: original_max_position_embeddings x factor). These
  are ~0.5 GiB per table pair on every rank.

The draft (NextN, ``num_nextn_predict_layers`` layers) holds one decoder layer with compress ratio 0
(no compressor, no indexer; layer id 0 but never hash-routed: the correction bias, no tid2eid), ``e_proj`` and
``h_proj`` (FP8, replicated), enorm / hnorm / shared_head.norm, its own hc_head, and its OWN
embed_tokens and lm_head shards: ``set_embed_and_head`` replaces them with the target's only after the
draft worker is built, when the target pools are already sized. Its RoPE tables are new only where the
target has no uncompressed layer (DeepSeek-V4-Pro): otherwise SGLang's caches hand it the target's.

Left out: tensors created after loading (post-processing: the TRT-LLM runner's shuffled copies, DeepGEMM's
ue8m0 re-packing of dense scales, a few KiB of per-expert runner constants), CUDA-graph and workspace
buffers, and anything of pipeline parallelism (one stage holds every layer here).
"""
from __future__ import annotations

from ..inputs.hf_config import HfConfig

FP8_BLOCK = 128        # weight_block_size of the checkpoints' quantization_config (read below)
MXFP4_GROUP = 32       # one e8m0 scale per 32 fp4 weights (fp4_block_k in SGLang's FP4 expert methods)
VOCAB_PAD = 64         # DEFAULT_VOCAB_PADDING_SIZE
BF16, FP32, INT32, COMPLEX64 = 2, 4, 4, 8


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _block(t: dict) -> tuple[int, int]:
    q = t.get("quantization_config") or {}
    bn, bk = q.get("weight_block_size") or (FP8_BLOCK, FP8_BLOCK)
    return int(bn), int(bk)


def fp8_linear(t: dict, out: int, inp: int) -> int:
    """An FP8 block-quantized Linear: e4m3 weight plus one fp32 scale per block (``Fp8LinearMethod``)."""
    bn, bk = _block(t)
    return out * inp + _cdiv(out, bn) * _cdiv(inp, bk) * FP32


def vocab_rows(vocab: int, group: int) -> int:
    """Rows of one ``VocabParallelEmbedding`` / ``ParallelLMHead`` shard over ``group`` ranks."""
    pad = VOCAB_PAD
    if _cdiv(vocab, pad) * pad % group:
        pad *= group
    return _cdiv(vocab, pad) * pad // group


def hc_layer_bytes(t: dict) -> int:
    """The hyper-connection mixing parameters of one decoder layer (fp32, replicated)."""
    hc, h = t["hc_mult"], t["hidden_size"]
    mix = (2 + hc) * hc
    return (2 * mix * hc * h + 2 * mix + 2 * 3) * FP32


def hc_head_bytes(t: dict) -> int:
    hc, h = t["hc_mult"], t["hidden_size"]
    return (hc * hc * h + hc + 1) * FP32


def compressor_bytes(t: dict, ratio: int, head_dim: int) -> int:
    """One ``Compressor`` (replicated): ape (fp32), wkv_gate (bf16), norm (fp32)."""
    coff = 2 if ratio == 4 else 1
    return ratio * coff * head_dim * FP32 + 2 * coff * head_dim * t["hidden_size"] * BF16 + head_dim * FP32


def attention_bytes(t: dict, ratio: int, attn_tp: int, wo_a_fp8: bool) -> int:
    """One layer's attention on one rank (see the module docstring)."""
    h, ql, hd = t["hidden_size"], t["q_lora_rank"], t["head_dim"]
    heads, groups, o_rank = t["num_attention_heads"], t["o_groups"], t["o_lora_rank"]
    b = heads * FP32                                          # attn_sink: every head on every rank
    b += fp8_linear(t, ql + hd, h)                            # wqkv_a, replicated
    b += (ql + hd) * BF16                                     # q_norm, kv_norm
    b += fp8_linear(t, heads * hd // attn_tp, ql)             # wq_b, column parallel
    wo_a_out, wo_a_in = groups * o_rank // attn_tp, heads * hd // groups
    b += fp8_linear(t, wo_a_out, wo_a_in) if wo_a_fp8 else wo_a_out * wo_a_in * BF16
    b += fp8_linear(t, h, groups * o_rank // attn_tp)         # wo_b, row parallel
    b += 2 * FP32                                             # k_scale, v_scale
    if ratio in (4, 128):
        b += compressor_bytes(t, ratio, hd)
    if ratio == 4:                                            # C4Indexer
        ih, idim = t["index_n_heads"], t["index_head_dim"]
        b += fp8_linear(t, ih * idim, ql) + ih * h * BF16 + compressor_bytes(t, 4, idim)
    return b


def moe_bytes(t: dict, layer_id: int, tp: int, nextn: bool = False) -> int:
    """One layer's MoE on one rank: MXFP4 routed experts and FP8 shared experts over TP, router replicated.
    A hash-routed layer (``layer_id < num_hash_layers``, never the V4 NextN layer: deepseek_v2.py's
    ``is_hash``) holds the ``tid2eid`` table instead of the correction bias."""
    h, inter, e = t["hidden_size"], t["moe_intermediate_size"], t["n_routed_experts"]
    i_rank = inter // tp
    weights = e * (2 * i_rank * h + h * i_rank)               # w13 and w2 parameters
    if t.get("expert_dtype") == "fp4":
        b = weights // 2 + weights // MXFP4_GROUP            # int8 packs two; one e8m0 scale per 32
    else:
        bn, bk = _block(t)                                    # FP8 experts (a converted checkpoint)
        b = weights + e * (2 * _cdiv(i_rank, bn) * _cdiv(h, bk) + _cdiv(h, bn) * _cdiv(i_rank, bk)) * FP32
    shared = (t.get("n_shared_experts") or 0) * inter
    if shared:
        b += fp8_linear(t, 2 * shared // tp, h) + fp8_linear(t, h, shared // tp)
    b += e * h * BF16                                         # gate
    if layer_id < (t.get("num_hash_layers") or 0) and not nextn:
        b += t["vocab_size"] * t["num_experts_per_tok"] * INT32   # tid2eid
    else:
        b += e * FP32                                         # e_score_correction_bias
    return b


def layer_bytes(t: dict, layer_id: int, ratio: int, tp: int, attn_tp: int, wo_a_fp8: bool,
                nextn: bool = False) -> int:
    """One decoder layer on one rank: attention, MoE, hyper-connections, two norms."""
    return (attention_bytes(t, ratio, attn_tp, wo_a_fp8) + moe_bytes(t, layer_id, tp, nextn) + hc_layer_bytes(t)
            + 2 * t["hidden_size"] * BF16)


def embed_and_head_bytes(t: dict, tp: int, attn_tp: int, dp_attention: bool) -> int:
    """embed_tokens (over attention TP with DP attention, else TP) and lm_head (over TP), bf16."""
    h, vocab = t["hidden_size"], t["vocab_size"]
    return (vocab_rows(vocab, attn_tp if dp_attention else tp) + vocab_rows(vocab, tp)) * h * BF16


def rope_table_bytes(t: dict, compressed: bool) -> int:
    """One ``freqs_cis`` (complex64) and one ``cos_sin_cache`` (fp32) for the uncompressed or compressed layers."""
    rope, max_pos = t["qk_rope_head_dim"], t["max_position_embeddings"]
    freqs = max_pos * (rope // 2) * COMPLEX64
    if compressed:
        s = t.get("rope_scaling") or {}
        positions = int(s.get("original_max_position_embeddings", max_pos) * s.get("factor", 1.0))
    else:
        positions = max_pos
    return freqs + positions * rope * FP32


def _ratios(t: dict) -> list[int]:
    return list(t["compress_ratios"][: t["num_hidden_layers"]])


def dsv4_weight_bytes(cfg: HfConfig, tp_size: int, attn_tp_size: int, dp_attention: bool, *,
                      wo_a_fp8: bool = False) -> int:
    """The target ``DeepseekV4ForCausalLM``'s device bytes on one rank as SGLang 0.5.23 creates them.

    ``wo_a_fp8``: SGLang's fp8 wo_a GEMM is on (SM100 / SM120 with DeepGEMM); False keeps wo_a in bf16
    (SM90, SGLang's default there)."""
    t = cfg.text
    ratios = _ratios(t)
    b = sum(layer_bytes(t, i, r, tp_size, attn_tp_size, wo_a_fp8) for i, r in enumerate(ratios))
    b += embed_and_head_bytes(t, tp_size, attn_tp_size, dp_attention)
    b += hc_head_bytes(t) + t["hidden_size"] * BF16          # hc_head, final norm
    b += sum(rope_table_bytes(t, c) for c in {r != 0 for r in ratios})
    return b


def dsv4_draft_weight_bytes(cfg: HfConfig, tp_size: int, attn_tp_size: int, dp_attention: bool, *,
                            wo_a_fp8: bool = False) -> int:
    """The MTP draft (``DeepseekV4ForCausalLMNextN``, per NextN layer) on one rank when the target pools are
    sized: its own embed / lm_head shards included, the RoPE tables only where the target has none alike."""
    t = cfg.text
    n = t.get("num_nextn_predict_layers") or 0
    if n <= 0:
        return 0
    h = t["hidden_size"]
    one = layer_bytes(t, 0, 0, tp_size, attn_tp_size, wo_a_fp8, nextn=True)   # compress ratio 0, no hash table
    one += 2 * fp8_linear(t, h, h)                                      # e_proj, h_proj
    one += 3 * h * BF16 + hc_head_bytes(t)                              # enorm, hnorm, shared_head.norm
    one += embed_and_head_bytes(t, tp_size, attn_tp_size, dp_attention)
    rope = 0 if 0 in _ratios(t) else rope_table_bytes(t, compressed=False)
    return one * n + rope


def dsv4_param_count(cfg: HfConfig, *, nextn: bool = True) -> int:
    """The checkpoint's logical parameter count (one rank holding everything; FP4 experts unpacked, no
    quantization scales, no RoPE tables, no k/v scales; the hash layers' tid2eid tables counted as the
    checkpoint stores them): the figure DeepSeek publishes, for checking the config's reading. ``nextn``
    adds the MTP layers (their e_proj / h_proj, norms, hc_head and decoder layer; embed / head shared)."""
    t = cfg.text
    h, ql, hd = t["hidden_size"], t["q_lora_rank"], t["head_dim"]
    heads, groups, o_rank = t["num_attention_heads"], t["o_groups"], t["o_lora_rank"]
    e, inter, ns = t["n_routed_experts"], t["moe_intermediate_size"], t.get("n_shared_experts") or 0
    hc = t["hc_mult"]
    mix = (2 + hc) * hc

    def comp(ratio: int, dim: int) -> int:
        coff = 2 if ratio == 4 else 1
        return ratio * coff * dim + 2 * coff * dim * h + dim

    def layer(i: int, ratio: int, is_nextn: bool) -> int:
        n = heads + (ql + hd) * h + ql + hd + heads * hd * ql + groups * o_rank * (heads * hd // groups) \
            + h * groups * o_rank
        if ratio in (4, 128):
            n += comp(ratio, hd)
        if ratio == 4:
            ih, idim = t["index_n_heads"], t["index_head_dim"]
            n += ih * idim * ql + ih * h + comp(4, idim)
        n += (e + ns) * 3 * inter * h + e * h
        n += t["vocab_size"] * t["num_experts_per_tok"] if i < (t.get("num_hash_layers") or 0) and not is_nextn \
            else e
        return n + 2 * mix * hc * h + 2 * mix + 6 + 2 * h

    hc_head = hc * hc * h + hc + 1
    total = sum(layer(i, r, False) for i, r in enumerate(_ratios(t))) + 2 * t["vocab_size"] * h + hc_head + h
    if nextn:
        total += (t.get("num_nextn_predict_layers") or 0) * (layer(0, 0, True) + 2 * h * h + 3 * h + hc_head)
    return total
