"""Device pools: every tensor has SGLang's name, shape and dtype for each layout and profile."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from glm_kv.ledgers.plan import load_plan  # noqa: E402
from glm_kv.tensors.memory_pool import (  # noqa: E402
    DevicePools,
    MambaSlotAllocator,
    PagedTokenToKVPoolAllocator,
    geometry_from_plan,
    write_reduced_model_config,
)
from glm_kv.inputs.profile import shipped_profiles  # noqa: E402

FULL_LAYERS = [3, 7, 11, 15, 19, 23, 27, 31, 35, 39, 43]


def _pools(profile: str, **sizes) -> DevicePools:
    plan = load_plan(profile)
    # fill="empty": same storage as SGLang's torch.zeros without touching 100s of MB of KDA state
    return DevicePools(geometry_from_plan(plan, **sizes), device="cpu", fill="empty")


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
    assert list(hybrid.full_attention_layer_id_mapping) == FULL_LAYERS
    # one kv_buffer per full layer: (size + page_size, 1, kv_cache_dim), fp8 stored as uint8
    kv = [b[f"full_kv_pool.kv_buffer[{i}]"] for i in range(11)]
    assert all(t.shape == (128 + 64, 1, 528) and t.dtype == torch.uint8 for t in kv)
    # IndexKeyCache: (num_pages, 64 x 132) uint8, num_pages = (size + page_size + 1) // page_size
    idx = [b[f"full_kv_pool.index_key_cache.buffer[{i}]"] for i in range(11)]
    assert all(t.shape == ((128 + 64 + 1) // 64, 8448) and t.dtype == torch.uint8 for t in idx)
    # the compress tail pair: (max_reqs + 2, index_kpool, 128) bf16 per full layer
    for name in ("_compress_tail_k", "_compress_tail_score"):
        tails = [b[f"full_kv_pool.{name}[{i}]"] for i in range(11)]
        assert all(t.shape == (66, 4, 128) and t.dtype == torch.bfloat16 for t in tails)
    # MambaPool: 34 KDA layers, slots + 1 rows
    assert b["mamba_pool.conv[0]"].shape == (34, 2, 3, 24576)
    assert b["mamba_pool.conv[0]"].dtype == torch.bfloat16
    assert b["mamba_pool.temporal"].shape == (34, 2, 64, 128, 128)
    assert b["mamba_pool.temporal"].dtype == torch.float32
    assert pools.mamba_pool.slot_bytes() == 147_619_840
    # ReqToTokenPool: (max_reqs + 1, context_len) int32
    assert b["req_to_token_pool.req_to_token"].shape == (65, 131072)
    assert b["req_to_token_pool.req_to_token"].dtype == torch.int32
    assert len(b) == 1 + 11 * 4 + 2


def test_0523_pools_use_256_token_pages_with_the_same_8448_byte_index_row():
    pools = _pools("h200-0.5.23", size=2 * 256, mamba_size=1)
    b = _buffers(pools)
    assert b["full_kv_pool.kv_buffer[0]"].shape == (512 + 256, 1, 512)
    assert b["full_kv_pool.kv_buffer[0]"].dtype == torch.bfloat16
    # page_size // index_kpool x 132 = 64 x 132: 33 B per token per layer
    assert b["full_kv_pool.index_key_cache.buffer[0]"].shape == ((512 + 256 + 1) // 256, 8448)
    # DP8: 8 requests per worker -> 10 tail rows, 9 req_to_token rows
    assert b["full_kv_pool._compress_tail_k[0]"].shape == (10, 4, 128)
    assert b["req_to_token_pool.req_to_token"].shape == (9, 131072)


@pytest.mark.parametrize("profile", shipped_profiles())
def test_state_shapes_agree_with_the_plan_for_every_profile(profile):
    """Shapes are derived from the model config + TP here, independently of the plan's ledger."""
    plan = load_plan(profile)
    g = geometry_from_plan(plan)
    assert list(g.conv_state_shapes[0]) == list(plan.request.conv_state_shape)
    assert list(g.temporal_state_shape) == list(plan.request.temporal_state_shape)
    assert g.kv_row_bytes == plan.token.kv_row_bytes
    assert g.tail_width == plan.tail.width


def test_tp8_divides_the_kda_state_and_dp_attention_keeps_it():
    tp8 = geometry_from_plan(load_plan("tp8"))
    assert tp8.conv_state_shapes == ((3, 3072),) and tp8.temporal_state_shape == (8, 128, 128)
    dp4 = geometry_from_plan(load_plan("tp8-dp4-dpattn"))
    assert dp4.conv_state_shapes == ((3, 12288),) and dp4.temporal_state_shape == (32, 128, 128)
    dp8 = geometry_from_plan(load_plan("tp8-dp8-dpattn"))
    assert dp8.temporal_state_shape == (64, 128, 128)


def test_kv_row_per_profile():
    assert geometry_from_plan(load_plan("article")).kv_row_bytes == 528
    assert geometry_from_plan(load_plan("article-trtllm-raw")).kv_row_bytes == 512
    bf16 = geometry_from_plan(load_plan("article-bf16"))
    assert (bf16.kv_cache_dim, bf16.store_dtype, bf16.kv_row_bytes) == (512, "bfloat16", 1024)
    assert geometry_from_plan(load_plan("ssm-bf16")).temporal_dtype == "bfloat16"


def test_mtp_adds_the_verify_scratch_to_the_mamba_pool():
    small = geometry_from_plan(load_plan("mtp"), size=256, mamba_size=1)
    assert small.spec_state_size == 1  # the default geometry stays small, scratch included
    # SGLang sizes the scratch for the resolved max_running_requests (+1 row); 3 keeps it small here
    g = small.with_sizes(spec_state_size=3)
    pools = DevicePools(g, device="cpu", fill="empty")
    assert g.speculative_num_draft_tokens == 4 and g.tail_width == 8
    b = _buffers(pools)
    assert b["mamba_pool.intermediate_ssm"].shape == (34, 4, 4, 64, 128, 128)
    assert b["mamba_pool.intermediate_conv_window[0]"].shape == (34, 4, 4, 3, 24576)
    assert b["full_kv_pool._compress_tail_k[0]"].shape == (39, 8, 128)


def test_skipped_topk_layers_get_zero_row_placeholders(tmp_path):
    import json
    path = write_reduced_model_config(tmp_path / "config.json")
    cfg = json.loads(open(path).read())
    cfg["text_config"]["indexer_types"][7] = "shared"  # the second DSA layer reuses top-k
    open(path, "w").write(json.dumps(cfg))
    pools = DevicePools(geometry_from_plan(load_plan("article", {"model": path}), size=128),
                        device="cpu", fill="empty")
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
    pools = DevicePools(geometry_from_plan(load_plan("article"), size=128, mamba_size=1),
                        device="cpu", fill="zeros")
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
        plan = load_plan(prof)
        ps = plan.token.page_size
        g = geometry_from_plan(plan, size=2 * ps, mamba_size=2, max_running_requests_per_worker=3, context_len=64)
        if g.speculative_num_draft_tokens:
            g = g.with_sizes(spec_state_size=3)
        pools = DevicePools(g, device="cpu", fill="empty")
        ours[prof] = {k: [list(v.shape), str(v.dtype).removeprefix("torch."), v.untyped_storage().nbytes()]
                      for k, v in pools.named_buffers()}
        cfgs[prof] = dict(size=g.size, page=ps, kv_store=g.store_dtype, kv_dim=g.kv_cache_dim, reqs=3,
                          ctx=64, tp=plan.parallel.linear_attn_tp_size, temporal=g.temporal_dtype,
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
