"""Issue 20.3: every default SGLang 0.5.23 resolves from the device, for every GPU glm-kv knows.

SGLang is given the GPU's facts from this suite's own table (``cpu_workarounds.GPU_FACTS``, each
with its source), never glm-kv's gpus.json; ``test_glm_kv_gpu_table_matches_the_suite_facts`` holds
glm-kv's table to it, so a wrong entry there fails here.

SGLang's side: ``ServerArgs(...).resolve_once()`` (``oracle.resolve_for_sizing``) on a fake device
with the GPU's capability and CUDA memory. The platform facts SGLang reads (``is_sm90``,
``is_sm100``, ``is_sm120``, ``is_blackwell``, ...) are derived from the wheel's own probes: each is a
``partial(_check_cuda_device_version, device_capability_majors=[...])`` in ``utils/common.py``,
and its majors are read here, so SM 103 (B300) counts as ``is_sm100`` and SM 121 (GB10) as
``is_sm120`` exactly as the wheel says (``cpu_workarounds.cpu_as_gpu`` answers SM 90 / SM 100 only).

glm-kv's side: ``make_profile({"gpu": name, ...})`` -> ``resolve`` -> the memory ledger's default
fraction and ``gpu_defaults`` (chunked prefill, decode graph max bs).

Compared: kv dtype, DSA prefill/decode backends, page size, chunked_prefill_size, the decode CUDA
graph's max_bs, mem_fraction_static; and SGLang's start-up refusals that depend on the SM.
"""
from __future__ import annotations

import contextlib

import pytest

from glm_kv.errors import ProfileError
from cpu_workarounds import GPU_FACT_SOURCES, GPU_FACTS, NOMINAL_GPU_FACTS

# (tp_size, extra profile fields): the default launch, a small TP, and the kv dtype the SM does not pick
CASES = [(8, {}), (2, {}), (1, {"kv_cache_dtype": "fp8_e4m3"}), (1, {"kv_cache_dtype": "bfloat16"})]


def platform_facts(sm: int) -> dict:
    """The wheel's own answer to is_sm90 / is_sm100 / is_sm120 / is_blackwell / ... for this SM."""
    from sglang.srt.runtime_context import _PLATFORM_PROBES
    from sglang.srt.utils import common

    facts = {}
    for name, probe in _PLATFORM_PROBES.items():
        fn = getattr(common, probe)
        partial = getattr(fn, "__wrapped__", None)
        majors = getattr(partial, "keywords", {}).get("device_capability_majors")
        if majors is not None:   # CUDA >= the probe's minimum is assumed (12.8 ships with Blackwell)
            facts[name] = sm // 10 in majors
    assert {"is_sm90", "is_sm100", "is_sm120", "is_blackwell"} <= set(facts), facts
    return facts


@contextlib.contextmanager
def on_gpu(name: str):
    from cpu_workarounds import FakeGpu, cpu_as_gpu
    from sglang.srt.runtime_context import override_platform

    g = FakeGpu(**GPU_FACTS[name])      # this suite's facts, not glm-kv's gpus.json
    with cpu_as_gpu(g), override_platform(device_sm=g.sm, device_capability=g.capability,
                                          **platform_facts(g.sm)):
        yield


def sglang_defaults(name: str, tp: int, extra: dict) -> dict:
    from oracle import SGLangRefused, resolve_for_sizing, shipped_config

    with on_gpu(name):
        try:
            v = resolve_for_sizing(shipped_config(), {"tp_size": tp, **extra}).v
        except SGLangRefused as e:
            return {"refused": str(e.exc)}
        return {"kv_cache_dtype": v.kv_cache_dtype, "dsa_prefill_backend": v.dsa_prefill_backend,
                "dsa_decode_backend": v.dsa_decode_backend, "page_size": v.page_size,
                "chunked_prefill_size": v.chunked_prefill_size,
                "decode_graph_max_bs": v.cuda_graph_config.decode.max_bs,
                "mem_fraction_static": v.mem_fraction_static}


def glm_kv_defaults(name: str, tp: int, extra: dict) -> dict:
    from glm_kv.inputs.profile import make_profile
    from glm_kv.inputs.resolve import resolve
    from glm_kv.ledgers.memory import fraction_from_inputs, fraction_inputs, gpu_defaults

    try:
        p = make_profile({"gpu": name, "tp_size": tp, **extra})
        a = resolve(p)
    except ProfileError as e:
        return {"refused": str(e)}
    chunk, max_bs = gpu_defaults(a.gpu.memory_bytes / (1 << 20), tp)
    frac = fraction_from_inputs(fraction_inputs(p, a.config, a.gpu, a.attn_dp_size, p.max_running_requests))
    return {"kv_cache_dtype": a.kv_cache_dtype, "dsa_prefill_backend": a.dsa_prefill_backend,
            "dsa_decode_backend": a.dsa_decode_backend, "page_size": a.page_size,
            "chunked_prefill_size": chunk, "decode_graph_max_bs": max_bs, "mem_fraction_static": frac}


def mismatches(ours: dict, theirs: dict) -> list[str]:
    if "refused" in ours or "refused" in theirs:
        return [] if ("refused" in ours) == ("refused" in theirs) else [f"glm-kv {ours}, SGLang {theirs}"]
    return [f"{k}: glm-kv {ours[k]!r}, SGLang 0.5.23 {theirs[k]!r}" for k in theirs if ours[k] != theirs[k]]


def test_platform_facts_follow_the_wheel(sglang_ready):
    """The families the issue names: SM 103 is SM100-class, SM 121 (GB10) is SM120-class."""
    assert platform_facts(103)["is_sm100"] and not platform_facts(103)["is_sm120"]
    assert platform_facts(121)["is_sm120"] and platform_facts(121)["is_blackwell"]
    assert not platform_facts(121)["is_sm100"] and not platform_facts(90)["is_blackwell"]


def test_glm_kv_gpu_table_matches_the_suite_facts():
    """Every GPU glm-kv knows has a fact here, with its source; SM equal, CUDA memory equal to the
    byte (nominal entries, which no public printout backs, within 1 %)."""
    from glm_kv.inputs.gpus import GPUS

    assert set(GPUS) == set(GPU_FACTS) == set(GPU_FACT_SOURCES), set(GPUS) ^ set(GPU_FACTS)
    bad = []
    for name, g in GPUS.items():
        f = GPU_FACTS[name]
        mem = f["memory_mib"] * (1 << 20)
        if g.sm != f["sm"]:
            bad.append(f"{name}: sm glm-kv {g.sm}, suite {f['sm']} ({GPU_FACT_SOURCES[name]})")
        tol = 0.01 * mem if name in NOMINAL_GPU_FACTS else 0
        if abs(g.memory_bytes - mem) > tol:
            bad.append(f"{name}: memory glm-kv {g.memory_bytes:,} B, suite {int(mem):,} B ({GPU_FACT_SOURCES[name]})")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("name", list(GPU_FACTS))
def test_device_defaults_agree(sglang_ready, name):
    bad = []
    for tp, extra in CASES:
        theirs, ours = sglang_defaults(name, tp, extra), glm_kv_defaults(name, tp, extra)
        bad += [f"{name} tp {tp} {extra}: {m}" for m in mismatches(ours, theirs)]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("name", ["A100", "L40S", "H100"])
def test_tilelang_fp8_needs_sm89(sglang_ready, name):
    """``_check_dsa_backend_constraints``: CUDA TileLang FP8 KV requires SM89 or newer."""
    extra = {"kv_cache_dtype": "fp8_e4m3", "dsa_prefill_backend": "tilelang", "dsa_decode_backend": "tilelang"}
    theirs, ours = sglang_defaults(name, 8, extra), glm_kv_defaults(name, 8, extra)
    assert ("refused" in theirs) == (GPU_FACTS[name]["sm"] < 89), theirs
    assert not mismatches(ours, theirs)


def test_a_planted_sm_rule_is_caught(sglang_ready, monkeypatch):
    """The old rule 'fp8 only on SM 100..109' (GB10 and RTX PRO 6000 read as Hopper) is caught."""
    import glm_kv.inputs.resolve as resolve_module

    def hopper_below_110(p, gpu):
        if p.kv_cache_dtype != "auto":
            return p.kv_cache_dtype
        return "fp8_e4m3" if 100 <= gpu.sm < 110 else "bfloat16"

    monkeypatch.setattr(resolve_module, "resolve_kv_dtype", hopper_below_110)
    bad = mismatches(glm_kv_defaults("GB10", 8, {}), sglang_defaults("GB10", 8, {}))
    assert any(b.startswith("kv_cache_dtype:") for b in bad), bad


def test_a_planted_graph_size_is_caught(sglang_ready, monkeypatch):
    import glm_kv.ledgers.memory as memory

    real = memory.gpu_defaults
    monkeypatch.setattr(memory, "gpu_defaults", lambda m, tp: (real(m, tp)[0], 256))
    bad = mismatches(glm_kv_defaults("B200", 8, {}), sglang_defaults("B200", 8, {}))
    assert any(b.startswith("decode_graph_max_bs:") for b in bad), bad
    assert any(b.startswith("mem_fraction_static:") for b in bad), bad
