"""Device pools: every tensor has SGLang's name, shape and dtype for each layout and profile.

The pools are built from the model config and the resolved server arguments only
(``pool_geometry(resolve(profile))``): no plan and no ledger is involved, so the expected values
below come from outside glm-kv. "article #N" is row N of /work/shared/reference/article-figures.md;
"0.5.23 item N" is /work/shared/reference/sglang-0.5.23.md; "SGLang" names the 0.5.23 class or
function whose rule gives the number. The opt-in test at the end holds every buffer against
SGLang 0.5.23's own classes.
"""
from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from glm_kv.inputs.profile import load_profile, shipped_profiles  # noqa: E402
from glm_kv.inputs.resolve import resolve  # noqa: E402
from glm_kv.tensors.memory_pool import (  # noqa: E402
    DevicePools,
    MambaSlotAllocator,
    PagedTokenToKVPoolAllocator,
    pool_geometry,
    write_reduced_model_config,
)

FULL_LAYERS = [3, 7, 11, 15, 19, 23, 27, 31, 35, 39, 43]


def _geometry(profile: str, overrides: dict | None = None, **sizes):
    """Shapes from the config + resolved arguments (no plan, no ledger)."""
    return pool_geometry(resolve(load_profile(profile, overrides)), **sizes)


def _pools(profile: str, **sizes) -> DevicePools:
    # fill="empty": same storage as SGLang's torch.zeros without touching 100s of MB of KDA state
    return DevicePools(_geometry(profile, **sizes), device="cpu", fill="empty")


def _buffers(pools: DevicePools) -> dict:
    return {name: t for name, t in pools.named_buffers()}


def test_article_pools_have_sglang_names_shapes_and_dtypes():
    pools = _pools("article", size=2 * 64, mamba_size=1)
    b = _buffers(pools)
    hybrid = pools.token_to_kv_pool
    assert type(hybrid).__name__ == "HybridLinearKVPool"
    assert type(hybrid.full_kv_pool).__name__ == "DSATokenToKVPool"
    assert type(hybrid.full_kv_pool.index_key_cache).__name__ == "IndexKeyCache"
    assert type(hybrid.mamba_pool).__name__ == "MambaPool"
    assert type(pools.req_to_token_pool).__name__ == "ReqToTokenPool"
    assert list(hybrid.full_attention_layer_id_mapping) == FULL_LAYERS  # article #1
    # one kv_buffer per full layer: (size + page_size, 1, kv_cache_dim) (SGLang MLATokenToKVPool),
    # fp8 stored as uint8 (SGLang KVCache.store_dtype), scaled row 528 (article #3)
    kv = [b[f"full_kv_pool.kv_buffer[{i}]"] for i in range(11)]
    assert all(t.shape == (128 + 64, 1, 528) and t.dtype == torch.uint8 for t in kv)
    # IndexKeyCache: (num_pages, 64 x 132) uint8 (article #10), num_pages = (size + page_size + 1)
    # // page_size (SGLang IndexKeyCache.__init__)
    idx = [b[f"full_kv_pool.index_key_cache.buffer[{i}]"] for i in range(11)]
    assert all(t.shape == ((128 + 64 + 1) // 64, 8448) and t.dtype == torch.uint8 for t in idx)
    # the compress tail pair: 64 requests + 2 rows, width index_kpool 4, 128 bf16 (article #21)
    for name in ("_compress_tail_k", "_compress_tail_score"):
        tails = [b[f"full_kv_pool.{name}[{i}]"] for i in range(11)]
        assert all(t.shape == (66, 4, 128) and t.dtype == torch.bfloat16 for t in tails)
    # MambaPool: 34 KDA layers (article #1), slots + 1 rows (SGLang MambaPool); conv (3, 24,576)
    # bf16 (article #13), temporal (64, 128, 128) fp32 (article #14)
    assert b["mamba_pool.conv[0]"].shape == (34, 2, 3, 24576)
    assert b["mamba_pool.conv[0]"].dtype == torch.bfloat16
    assert b["mamba_pool.temporal"].shape == (34, 2, 64, 128, 128)
    assert b["mamba_pool.temporal"].dtype == torch.float32
    assert pools.mamba_pool.slot_bytes() == 147_619_840  # article #16
    # ReqToTokenPool: (max_reqs + 1, context_len + 4) int32: 64 requests (the article's profile) +
    # the padding row (SGLang ReqToTokenPool), 4 columns of headroom without speculative decoding
    # (SGLang allocation_sizing.get_req_to_token_extra_context_len: "4 + draft tokens")
    assert b["req_to_token_pool.req_to_token"].shape == (65, 131072 + 4)
    assert b["req_to_token_pool.req_to_token"].dtype == torch.int32
    assert len(b) == 1 + 11 * 4 + 2


def test_0523_pools_use_256_token_pages_with_the_same_8448_byte_index_row():
    pools = _pools("h200-0.5.23", size=2 * 256, mamba_size=1)
    b = _buffers(pools)
    # 256-token pages (0.5.23 item 1); bf16 row of 512 elements = 1,024 B (0.5.23 item 5)
    assert b["full_kv_pool.kv_buffer[0]"].shape == (512 + 256, 1, 512)
    assert b["full_kv_pool.kv_buffer[0]"].dtype == torch.bfloat16
    # page_size // index_kpool x 132 = 64 x 132 = 8,448 B per 256-token page (0.5.23 item 2)
    assert b["full_kv_pool.index_key_cache.buffer[0]"].shape == ((512 + 256 + 1) // 256, 8448)
    # DP8: 8 requests per worker -> 10 tail rows (0.5.23 item 6; article #22), 9 req_to_token rows;
    # the profile states no context length, so SGLang runs at the model's: max_position_embeddings
    # 1,048,576 of config.json (ModelConfig.context_len), + 4 columns of headroom
    assert b["full_kv_pool._compress_tail_k[0]"].shape == (10, 4, 128)
    assert b["req_to_token_pool.req_to_token"].shape == (9, 1048576 + 4)


def test_tp8_divides_the_kda_state_and_dp_attention_keeps_it():
    # conv (3, 24,576 / tp), temporal (64 / tp, 128, 128) with tp the linear-attention TP = attn_tp
    # (glm-5.3-flash-config.md, KimiLinearStateShape; article #20: TP8/DP4 -> 2, TP8 -> 8)
    tp8 = _geometry("tp8")
    assert tp8.conv_state_shapes == ((3, 3072),) and tp8.temporal_state_shape == (8, 128, 128)
    dp4 = _geometry("tp8-dp4-dpattn")
    assert dp4.conv_state_shapes == ((3, 12288),) and dp4.temporal_state_shape == (32, 128, 128)
    dp8 = _geometry("tp8-dp8-dpattn")  # 0.5.23 "Details": TP8 DP8 keeps the full slot per rank
    assert dp8.temporal_state_shape == (64, 128, 128)


def test_kv_row_per_profile():
    assert _geometry("article").kv_row_bytes == 528                 # article #3: 512 + 512/128 x 4
    assert _geometry("article-trtllm-raw").kv_row_bytes == 512      # article #5: 5,632 / 11
    bf16 = _geometry("article-bf16")                                # article #2: 11,264 / 11 = 512 x 2 B
    assert (bf16.kv_cache_dim, bf16.store_dtype, bf16.kv_row_bytes) == (512, "bfloat16", 1024)
    assert _geometry("ssm-bf16").temporal_dtype == "bfloat16"      # article #17: --mamba-ssm-dtype bfloat16
    # SM100 auto -> fp8 + trtllm -> raw 512 B rows (0.5.23 "Where it agrees")
    assert _geometry("b200-0.5.23").kv_row_bytes == 512


def test_kv_row_follows_the_local_role_under_disaggregation():
    """SGLang calculate_mla_kv_cache_dim: a decode server's row follows the decode backend only."""
    over = {"kv_cache_dtype": "fp8_e4m3", "dsa_prefill_backend": "trtllm", "dsa_decode_backend": "flashmla_kv"}
    assert _geometry("article", over).kv_cache_dim == 512   # trtllm on either side: raw
    g = _geometry("article", {**over, "disaggregation_mode": "decode", "disable_radix_cache": True})
    assert g.kv_cache_dim == 528


def test_mtp_adds_the_verify_scratch_to_the_mamba_pool():
    small = _geometry("mtp", size=256, mamba_size=1)
    assert small.spec_state_size == 1  # the default geometry stays small, scratch included
    # SGLang sizes the scratch for the resolved max_running_requests (+1 row); 3 keeps it small here
    g = small.with_sizes(spec_state_size=3)
    pools = DevicePools(g, device="cpu", fill="empty")
    # 4 draft tokens by default (0.5.23 "Details": 3 steps, topk 1); tail width 4 + 4 = 8 (0.5.23 item 6)
    assert g.speculative_num_draft_tokens == 4 and g.tail_width == 8
    # req_to_token headroom under MTP with 256-token pages: max(4 + 4, 2 x max(3 x 1, 4) + 255)
    # (SGLang get_req_to_token_extra_context_len / get_alloc_reserve_per_decode)
    assert g.extra_context_len == 263
    b = _buffers(pools)
    assert b["mamba_pool.intermediate_ssm"].shape == (34, 4, 4, 64, 128, 128)
    assert b["mamba_pool.intermediate_conv_window[0]"].shape == (34, 4, 4, 3, 24576)
    # tail rows = requests + 2 (article #21 rule) for the profile's 64 requests per worker (the
    # capacity may cap them lower; measure then passes the capped count), width 8
    assert b["full_kv_pool._compress_tail_k[0]"].shape == (66, 8, 128)
    capped = pool_geometry(resolve(load_profile("mtp")), size=256, max_running_requests_per_worker=37)
    assert capped.tail_rows == 39 and capped.req_to_token_rows == 38


def test_skipped_topk_layers_get_zero_row_placeholders(tmp_path):
    import json
    path = write_reduced_model_config(tmp_path / "config.json")
    cfg = json.loads(Path(path).read_text())
    cfg["text_config"]["indexer_types"][7] = "shared"  # the second DSA layer reuses top-k
    Path(path).write_text(json.dumps(cfg))
    pools = DevicePools(_geometry("article", {"model": path}, size=128), device="cpu", fill="empty")
    idx = pools.full_kv_pool.index_key_cache.buffer
    assert idx[0].shape[0] > 0 and idx[1].shape == (0, 8448)
    assert pools.full_kv_pool._compress_tail_k[1].shape[0] == 0


def test_paged_allocator_never_hands_out_the_padding_page():
    a = PagedTokenToKVPoolAllocator(size=4 * 64, page_size=64)
    got = a.alloc(4 * 64)
    assert got is not None and int(got.min()) == 64 and int(got.max()) == 5 * 64 - 1
    assert a.alloc(64) is None
    a.free(got[:128])
    assert a.available_size() == 128
    with pytest.raises(ValueError):
        a.alloc(10)
    m = MambaSlotAllocator(3)
    slots = m.alloc(3)
    assert slots.tolist() == [1, 2, 3] and m.alloc(1) is None


def test_byte_helpers_round_trip_real_rows():
    pools = DevicePools(_geometry("article", size=128, mamba_size=1), device="cpu", fill="zeros")
    idx = pools.token_to_kv_pool_allocator.alloc(64)
    rows = [torch.randint(0, 256, (64, 528), dtype=torch.uint8) for _ in range(11)]
    pools.write_token_rows(idx, rows)
    assert all(torch.equal(a, b) for a, b in zip(pools.read_token_rows(idx), rows))
    # padding rows stay untouched
    assert int(pools.full_kv_pool.kv_buffer[0][:64].abs().sum()) == 0


# ---------------------------------------------------------------------------------------------
# Against SGLang 0.5.23's own classes (optional: needs a Python with sglang==0.5.23 installed,
# e.g. the .venv-sglang that scripts/sglang-env.sh builds, or GLM_KV_SGLANG_PYTHON=/path/python).

_SGLANG_SIDE = r'''
import json, sys, torch
from sglang.srt.mem_cache.memory_pool import DSATokenToKVPool, MambaPool, ReqToTokenPool
from sglang.srt.configs.mamba_utils import KimiLinearStateShape, KimiLinearCacheParams, Mamba2StateDType

def build(cfg):
    out = {}
    dt = {"uint8": torch.float8_e4m3fn, "bfloat16": torch.bfloat16}[cfg["kv_store"]]
    def dsa(size, page, kpool):
        return DSATokenToKVPool(size=size, page_size=page, kv_lora_rank=512, dtype=dt, qk_rope_head_dim=0,
            layer_num=cfg["layers"], device="cpu", index_head_dim=128, enable_memory_saver=False,
            kv_cache_dim=cfg["kv_dim"], index_buf_size=size, index_kpool=kpool, index_kpool_compress=True,
            tail_extra_slots=cfg["spec"], max_running_requests=cfg["reqs"] + 1)
    # the article's 64-token page with 64 x 132 index rows is what 0.5.23 builds with index_kpool=1
    kp = 1 if cfg["layout"] == "article" else 4
    pool = dsa(cfg["size"], cfg["page"], kp)
    tails = pool if kp > 1 else dsa(256, 256, 4)  # the tail pair does not depend on the page size
    for i in range(cfg["layers"]):
        out[f"full_kv_pool.kv_buffer[{i}]"] = pool.kv_buffer[i]
        out[f"full_kv_pool.index_key_cache.buffer[{i}]"] = pool.index_k_with_scale_buffer[i]
        out[f"full_kv_pool._compress_tail_k[{i}]"] = tails._compress_tail_k[i]
        out[f"full_kv_pool._compress_tail_score[{i}]"] = tails._compress_tail_score[i]
    shape = KimiLinearStateShape.create(tp_world_size=cfg["tp"], num_heads=64, head_dim=128, conv_kernel_size=4)
    tdt = {"float32": torch.float32, "bfloat16": torch.bfloat16}[cfg["temporal"]]
    params = KimiLinearCacheParams(shape=shape, layers=list(range(cfg["kda"])),
                                   dtype=Mamba2StateDType(conv=torch.bfloat16, temporal=tdt))
    kw = dict(speculative_num_draft_tokens=cfg["spec"], speculative_eagle_topk=1) if cfg["spec"] else {}
    mp = MambaPool(size=cfg["mamba"], spec_state_size=cfg["reqs"], cache_params=params,
                   mamba_layer_ids=list(range(cfg["kda"])), device="cpu", **kw)
    out["mamba_pool.conv[0]"] = mp.mamba_cache.conv[0]
    out["mamba_pool.temporal"] = mp.mamba_cache.temporal
    if cfg["spec"]:
        out["mamba_pool.intermediate_ssm"] = mp.mamba_cache.intermediate_ssm
        out["mamba_pool.intermediate_conv_window[0]"] = mp.mamba_cache.intermediate_conv_window[0]
    r = ReqToTokenPool(size=cfg["reqs"], max_context_len=cfg["ctx"], device="cpu", enable_memory_saver=False)
    out["req_to_token_pool.req_to_token"] = r.req_to_token
    return {k: [list(v.shape), str(v.dtype).removeprefix("torch."), v.untyped_storage().nbytes()]
            for k, v in out.items()}

print(json.dumps({name: build(cfg) for name, cfg in json.loads(sys.stdin.read()).items()}))
'''


def _sglang_python():
    """GLM_KV_SGLANG_PYTHON, or .venv-sglang's python when GLM_KV_SGLANG=1 (opt-in: ~20 s)."""
    import os
    from pathlib import Path
    env = os.environ.get("GLM_KV_SGLANG_PYTHON")
    if env:
        return env
    venv = Path(__file__).resolve().parents[2] / ".venv-sglang" / "bin" / "python"
    return str(venv) if os.environ.get("GLM_KV_SGLANG") == "1" and venv.exists() else None


@pytest.mark.skipif(_sglang_python() is None,
                    reason="opt-in: GLM_KV_SGLANG=1 (with .venv-sglang from scripts/sglang-env.sh) or "
                           "GLM_KV_SGLANG_PYTHON=/path/to/python with sglang==0.5.23 holds every buffer "
                           "against SGLang's own classes")
def test_every_buffer_is_identical_to_sglang_0523_own_classes():
    """Build SGLang's DSATokenToKVPool / MambaPool / ReqToTokenPool and ours at the same sizes."""
    import json
    import subprocess

    ours, cfgs = {}, {}
    for prof in shipped_profiles():
        args = resolve(load_profile(prof))
        ps = args.page_size
        g = pool_geometry(args, size=2 * ps, mamba_size=2, max_running_requests_per_worker=3, context_len=64)
        if g.speculative_num_draft_tokens:
            g = g.with_sizes(spec_state_size=3)
        pools = DevicePools(g, device="cpu", fill="empty")
        ours[prof] = {k: [list(v.shape), str(v.dtype).removeprefix("torch."), v.untyped_storage().nbytes()]
                      for k, v in pools.named_buffers()}
        # max_context_len: SGLang's configurator adds get_req_to_token_extra_context_len to context_len
        cfgs[prof] = dict(size=g.size, page=ps, kv_store=g.store_dtype, kv_dim=g.kv_cache_dim, reqs=3,
                          ctx=g.max_context_len, tp=g.num_linear_layers and 64 // g.temporal_state_shape[0],
                          temporal=g.temporal_dtype,
                          mamba=2, spec=g.speculative_num_draft_tokens, layout=g.layout,
                          layers=g.num_full_layers, kda=g.num_linear_layers)
    res = subprocess.run([_sglang_python(), "-c", _SGLANG_SIDE], input=json.dumps(cfgs),
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    theirs = json.loads(res.stdout.strip().splitlines()[-1])
    for prof in cfgs:
        diff = {k: (ours[prof].get(k), theirs[prof].get(k))
                for k in set(ours[prof]) | set(theirs[prof]) if ours[prof].get(k) != theirs[prof].get(k)}
        assert not diff, f"{prof}: {diff}"
