"""Inert flags SGLang 0.5.23 refuses beside some other settings (issue 30): glm-kv refuses exactly there.

The flag table proves these flags inert on some proof profiles and records where SGLang refuses them
(``sglang_refuses_on``: a PD server, HiCache, speculative decoding, no attention DP, the GPU, the radix
cache off). ``glm_kv.inputs.startup.CONDITIONAL_REFUSALS`` holds SGLang's conditions; here each flag runs
through SGLang's own resolution and sizing (``flag_table.sizing``: ``ServerArgs`` + ``check_server_args`` +
the pools) on every launch below, and glm-kv's ``validate_inert_flags`` (what ``glm-kv plan --sglang-args``
runs) on the same launch as a profile: SGLang refuses it exactly where glm-kv does, with the message glm-kv
quotes; where SGLang starts it sizes every pool as without the flag.

Planted error: an empty rule table plans every launch SGLang refuses; the comparison names them.
"""
from __future__ import annotations

import shlex

import pytest

try:
    import flag_table as ft
except ImportError:   # outside the SGLang venv (conftest skips every test here)
    ft = None

GiB = 1 << 30
# (id, launch, free memory before the weights, weights): the proof profiles and launches that flip a condition
LAUNCHES = [
    *(ft.PROOF_PROFILES if ft else ()),
    ("h200-tp8-prefill", {"gpu": "H200", "tp_size": 8, "disaggregation_mode": "prefill", "max_running_requests": 64},
     139 * GiB, 20 * GiB),
    ("h200-tp8-dpattn", {"gpu": "H200", "tp_size": 8, "dp_size": 8, "enable_dp_attention": True,
                         "max_running_requests": 64}, 139 * GiB, 20 * GiB),
    ("b200-tp1", {"gpu": "B200", "tp_size": 1, "max_running_requests": None}, 176 * GiB, 70 * GiB),
    ("h200-tp1-radix-off", {"gpu": "H200", "tp_size": 1, "disable_radix_cache": True, "max_running_requests": None},
     139 * GiB, 70 * GiB),
    ("h200-tp2-eagle", {"gpu": "H200", "tp_size": 2, "speculative_algorithm": "EAGLE", "max_running_requests": 64},
     139 * GiB, 40 * GiB),
    ("h200-tp2-decode-radix", {"gpu": "H200", "tp_size": 2, "disaggregation_mode": "decode",
                               "disaggregation_decode_enable_radix_cache": True, "max_running_requests": 64},
     139 * GiB, 40 * GiB),
]
# (flag as typed, ServerArgs kwargs SGLang gets)
FLAGS = [
    (["--enable-tp-lm-head-all-to-all"], {"enable_tp_lm_head_all_to_all": True}),
    (["--enable-deepseek-v4-fp4-indexer"], {"enable_deepseek_v4_fp4_indexer": True}),
    (["--enable-int8-mamba-checkpoint"], {"enable_int8_mamba_checkpoint": True}),
    (["--enable-unified-cache-external-linker"], {"enable_unified_cache_external_linker": True}),
    (["--enable-lmcache"], {"enable_lmcache": True}),
    (["--encoder-only"], {"encoder_only": True}),
    (["--enable-response-store"], {"enable_response_store": True}),
    (["--speculative-use-block-verification"], {"speculative_use_block_verification": True}),
    (["--enable-watermark"], {"enable_watermark": True}),
    # (--disaggregation-decode-host-receive-threshold is modelled since it resolves a decode server's retraction
    # backup: its refusals are checked through SGLang in test_decode_retraction_backup.py)
    (["--disaggregation-transfer-backend", "fake"], {"disaggregation_transfer_backend": "fake"}),
    (["--weight-cache-mode", "daemon"], {"weight_cache_mode": "daemon"}),
    (["--mamba-track-interval", "259"], {"mamba_track_interval": 259}),
    (["--mamba-track-interval", "512"], {"mamba_track_interval": 512}),
    (["--mamba-track-interval", "2"], {"mamba_track_interval": 2}),
]
# (flag as typed): glm-kv refuses it where SGLang's pools move with it (startup.CONDITIONALLY_UNSIZED; none since
# --hicache-host-memory-mode is modelled: test_flags_hicache_host_mode.py)
UNSIZED: set[str] = set()


@pytest.fixture(scope="module")
def base(sglang_ready):
    """SGLang's answers, asked once: each launch without a flag, and with each flag."""
    out = {pid: ft.sizing({}, prof, pre, w) for pid, prof, pre, w in LAUNCHES}
    for argv, kwargs in FLAGS:
        for pid, prof, pre, w in LAUNCHES:
            out[" ".join(argv), pid] = ft.sizing(kwargs, prof, pre, w)
    return out


def _items(argv: list[str]) -> list[str]:
    """The words as ``parse_launch_command`` lists the inert flags it accepted: one "flag value ..." each."""
    items: list[list[str]] = []
    for w in argv:
        if w.startswith("--"):
            items.append([w])
        else:
            items[-1].append(w)
    return [shlex.join(i) for i in items]


def glm_kv_refusal(launch: dict, pre: int, w: int, argv: list[str]) -> str | None:
    """glm-kv's refusal (its message) of the inert flag beside the launch, or None."""
    from glm_kv.errors import ProfileError
    from glm_kv.inputs.launch import inert_flags
    from glm_kv.inputs.profile import make_profile
    from glm_kv.inputs.resolve import resolve
    from glm_kv.inputs.startup import validate_inert_flags

    p = make_profile({"sglang_layout": "0.5.23", **launch, "pre_model_load_bytes": pre, "weights_bytes": w})
    try:
        validate_inert_flags(p, inert_flags(_items(argv)), resolve)
    except ProfileError as e:
        return e.rule
    return None


def disagreements(base: dict) -> list[str]:
    bad = []
    for argv, kwargs in FLAGS:
        for pid, launch, pre, w in LAUNCHES:
            theirs = base[" ".join(argv), pid]
            ours = glm_kv_refusal(launch, pre, w, argv)
            if "errors" in theirs:
                said = " ".join(theirs["errors"]["message"].split())
                quoted = ours is not None and '"' in ours and ours.split('"')[1] in said
                if not quoted:
                    bad.append(f"{' '.join(argv)} on {pid}: SGLang refuses ({said[:200]}), glm-kv {ours!r}")
            elif any(theirs[k] != base[pid][k] for k in ft.COMPARED):
                if not (ours is not None and " ".join(argv) in UNSIZED and "does not size" in ours):
                    bad.append(f"{' '.join(argv)} on {pid}: SGLang's pools move with it, glm-kv {ours!r}")
            elif ours is not None:
                bad.append(f"{' '.join(argv)} on {pid}: SGLang starts, glm-kv refuses ({ours[:200]})")
    return bad


def test_conditional_refusals_are_sglangs(base):
    assert disagreements(base) == []


# valid values of a conditionally refused flag, started wherever SGLang gets them (the neighbours that show
# the condition is the value's: --mamba-track-interval 512 is a multiple of the page)
NEVER_REFUSED = {"--mamba-track-interval 512"}


def test_every_flag_is_refused_somewhere_and_started_somewhere(base):
    """Not vacuous: each flag meets both of SGLang's answers among the launches (a valid value: starts)."""
    for argv, kwargs in FLAGS:
        outcomes = {"errors" in base[" ".join(argv), pid] for pid, *_ in LAUNCHES}
        assert outcomes == ({False} if " ".join(argv) in NEVER_REFUSED else {True, False}), argv


def test_planted_no_conditional_refusals_is_caught(base, monkeypatch):
    import glm_kv.inputs.startup as startup

    monkeypatch.setattr(startup, "CONDITIONAL_REFUSALS", {})
    found = disagreements(base)
    assert found and all("SGLang refuses" in f for f in found), found
    assert {f.split(" on ")[0] for f in found} == {" ".join(a) for a, _ in FLAGS} - NEVER_REFUSED, found
