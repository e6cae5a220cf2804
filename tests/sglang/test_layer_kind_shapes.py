"""Issue 32: the state layer kinds of SGLang 0.5.23's hybrid architectures that ship no config here,
checked against SGLang's own config classes on random dimensions (seed: the suite's run seed).

Mamba-1 (MambaConfig / FalconMambaConfig), LFM2's short convolution (Lfm2Config), lightning attention
(MiniCPMHybridConfig, BailingHybridConfig without KDA) and Zaya's CCA state (ZayaConfig): glm-kv has no
published config of these models (glm_kv/inputs/catalog.py NOT_PLANNED says so), so no model plans, but
each layer kind is a frozen spec in glm_kv/ledgers/layers.py whose shapes and bytes must be the ones
SGLang's ``mamba2_cache_params`` gives: SGLang's config class is built with the drawn dimensions, its
``get_parallel()`` answers the drawn TP, and its ``mamba2_cache_params`` (conv shapes, temporal shape,
``mamba_cache_per_req`` over its layers, in its dtypes) is compared with the spec's. Nothing glm-kv
computes goes to SGLang. Each kind also has a planted error that the comparison catches.
"""
from __future__ import annotations

import contextlib
import random
from types import SimpleNamespace

import pytest

from tests.pytest_glm_kv import run_seed

DRAWS = 6


@contextlib.contextmanager
def sglang_tp(tp: int):
    """SGLang's ``get_parallel()`` (imported by name in some config modules) answering ``tp``."""
    import importlib

    import sglang.srt.runtime_context as rc

    par = SimpleNamespace(attn_tp_size=tp, tp_size=tp)
    mods = [rc] + [importlib.import_module(f"sglang.srt.configs.{m}")
                   for m in ("lfm2", "minicpm", "bailing_hybrid", "zaya")]
    saved = [(m, m.get_parallel) for m in mods if hasattr(m, "get_parallel")]
    try:
        for m, _ in saved:
            m.get_parallel = lambda: par
        yield
    finally:
        for m, f in saved:
            m.get_parallel = f


def _items(params) -> dict:
    return {"conv_item_bytes": params.dtype.conv.itemsize, "ssm_item_bytes": params.dtype.temporal.itemsize}


def draw(kind: str, rng: random.Random) -> tuple[object, object, int]:
    """(SGLang's config, glm-kv's spec builder taking SGLang's dtypes, tp) for one random draw of ``kind``."""
    from glm_kv.ledgers import layers as L

    tp = rng.choice([1, 2, 4, 8])
    if kind in ("mamba", "falcon_mamba"):
        from sglang.srt.configs.mamba import FalconMambaConfig, MambaConfig

        hidden, expand = tp * rng.choice([16, 32, 64]), rng.choice([1, 2])
        state, k = rng.choice([8, 16]), rng.choice([2, 3, 4])
        cls = MambaConfig if kind == "mamba" else FalconMambaConfig
        cfg = cls(hidden_size=hidden, expand=expand, state_size=state, conv_kernel=k, num_hidden_layers=rng.randint(1, 5))
        return cfg, lambda it: L.Mamba1State(intermediate_size=cfg.intermediate_size, state_size=state,
                                             conv_kernel=k, attn_tp=tp, **it), tp
    if kind == "lfm2":
        from sglang.srt.configs.lfm2 import Lfm2Config

        hidden, cache = tp * rng.choice([8, 16, 64]), rng.choice([2, 3, 4])
        types = [rng.choice(["conv", "full_attention"]) for _ in range(rng.randint(2, 8))] + ["conv"]
        cfg = Lfm2Config(hidden_size=hidden, conv_L_cache=cache, num_hidden_layers=len(types), layer_types=types)
        return cfg, lambda it: L.ShortConvState(hidden_size=hidden, conv_kernel=cache, attn_tp=tp, **it), tp
    if kind == "minicpm_lightning":
        from sglang.srt.configs.minicpm import MiniCPMHybridConfig

        heads, hd = tp * rng.choice([1, 2, 4]), rng.choice([16, 32, 64])
        mixers = [rng.choice(["lightning-attn", "minicpm4"]) for _ in range(rng.randint(2, 8))] + ["lightning-attn"]
        cfg = MiniCPMHybridConfig(num_hidden_layers=len(mixers), mixer_types=mixers, lightning_nh=heads,
                                  lightning_nkv=heads, lightning_head_dim=hd)
        return cfg, lambda it: L.LightningState(num_heads=heads, head_dim=hd, attn_tp=tp, **it), tp
    if kind == "bailing_lightning":
        from sglang.srt.configs.bailing_hybrid import BailingHybridConfig

        heads, hd = tp * rng.choice([1, 2, 4]), rng.choice([16, 32, 64])
        cfg = BailingHybridConfig(num_hidden_layers=rng.randint(2, 8), num_attention_heads=heads, head_dim=hd,
                                  hidden_size=heads * hd, layer_group_size=rng.choice([2, 3, 4]))
        return cfg, lambda it: L.LightningState(num_heads=heads, head_dim=hd, attn_tp=tp, **it), tp
    if kind == "zaya":
        from sglang.srt.configs.zaya import ZayaConfig

        kv = rng.choice([1, 2, 4])
        heads, hd = kv * tp * rng.choice([1, 2]), rng.choice([16, 32])
        hidden, t0, t1 = rng.choice([64, 128]), rng.choice([2, 3]), rng.choice([2, 3])
        cfg = ZayaConfig(num_hidden_layers=rng.randint(1, 6), num_attention_heads=heads, num_key_value_heads=kv,
                         num_query_groups=kv, head_dim=hd, hidden_size=hidden, cca_time0=t0, cca_time1=t1)
        return cfg, lambda it: L.ZayaCcaState(num_attention_heads=heads, num_kv_heads=kv, head_dim=hd,
                                              hidden_size=hidden, cca_time0=t0, cca_time1=t1, attn_tp=tp, **it), tp
    raise AssertionError(kind)


KINDS = ["mamba", "falcon_mamba", "lfm2", "minicpm_lightning", "bailing_lightning", "zaya"]


def shape_problems(cfg, build, tp: int) -> list[str]:
    """Every difference between SGLang's ``mamba2_cache_params`` and the spec, named."""
    with sglang_tp(tp):
        params = cfg.mamba2_cache_params
    spec = build(_items(params))
    n = len(params.layers)
    conv = [tuple(c) for c in params.shape.conv]
    ours = list(getattr(spec, "conv_shapes", (spec.conv_shape,)))
    out = []
    if ours != conv:
        out.append(f"conv: glm-kv {ours} != SGLang {conv}")
    if tuple(spec.temporal_shape) != tuple(params.shape.temporal):
        out.append(f"temporal: glm-kv {spec.temporal_shape} != SGLang {tuple(params.shape.temporal)}")
    if spec.bytes_per_slot * n != params.mamba_cache_per_req:
        out.append(f"mamba_cache_per_req: glm-kv {spec.bytes_per_slot} x {n} layers != SGLang {params.mamba_cache_per_req}")
    return out


@pytest.mark.parametrize("kind", KINDS)
def test_random_dimensions_agree_with_sglang(sglang_ready, kind):
    seed = run_seed()
    rng = random.Random(f"{seed}:{kind}")
    failures = []
    for i in range(DRAWS):
        cfg, build, tp = draw(kind, rng)
        problems = shape_problems(cfg, build, tp)
        if problems:
            failures.append(f"draw {i} (tp {tp}): " + "; ".join(problems))
    assert not failures, f"seed {seed} (reproduce: GLM_KV_SEED={seed}), {kind}:\n" + "\n".join(failures)


# ---- one planted error per kind: the comparison names it (fixed draws, the plant after a clean check)
PLANTS = {
    "mamba": ("Mamba1State", "temporal_shape",
              lambda s: (s.intermediate_size // s.attn_tp, 2, s.state_size)),          # head_dim 2, not 1
    "lfm2": ("ShortConvState", "conv_shape", lambda s: (s.hidden_size // s.attn_tp, s.conv_kernel)),   # K, not K-1
    "minicpm_lightning": ("LightningState", "temporal_shape",
                          lambda s: (s.num_heads, s.head_dim, s.head_dim)),               # heads not split
    "zaya": ("ZayaCcaState", "conv_shapes",
             lambda s: (((s.num_attention_heads + s.num_kv_heads) * s.head_dim // s.attn_tp,
                         (s.cca_time0 - 1) + (s.cca_time1 - 1)),)),                     # no prev-hidden conv
}


@pytest.mark.parametrize("kind", sorted(PLANTS))
def test_a_planted_shape_is_caught(sglang_ready, monkeypatch, kind):
    from glm_kv.ledgers import layers as L

    rng = random.Random(f"plant:{kind}")
    while True:   # a draw the plant changes (tp > 1 for the split plants)
        cfg, build, tp = draw(kind, rng)
        if tp > 1:
            break
    assert shape_problems(cfg, build, tp) == []
    cls, attr, wrong = PLANTS[kind]
    monkeypatch.setattr(getattr(L, cls), attr, property(wrong))
    assert shape_problems(cfg, build, tp), kind
