"""``--attn-dp-size N`` (0.5.23's spelling of attention DP, issue 30): glm-kv reads it as ``--dp-size N
--enable-dp-attention``; SGLang's own sizing gives the same fraction, pools and host pools for both
spellings on every flag-table proof profile, and refuses ``--dp-size`` replicas next to it with the words
glm-kv quotes. Planted error: reading it as plain ``--dp-size N`` (replicas, no DP attention) moves the pools.
"""
from __future__ import annotations

import pytest

try:
    import flag_table as ft
except ImportError:
    ft = None

LAUNCH = "python -m sglang.launch_server --model-path zai-org/GLM-5.3-Flash"


def _as_glm_kv_reads(argv: str) -> dict:
    from glm_kv.inputs.launch import parse_launch_command

    fields, _ = parse_launch_command(f"{LAUNCH} {argv}", layout="0.5.23")
    return {k: v for k, v in fields.items() if k in ("dp_size", "enable_dp_attention")}


@pytest.mark.parametrize("tp,n", [(4, 4), (4, 2), (8, 8)])
def test_attn_dp_size_sizes_as_dp_attention(sglang_ready, tp, n):
    read = _as_glm_kv_reads(f"--tp-size {tp} --attn-dp-size {n}")
    assert read == {"dp_size": n, "enable_dp_attention": True}
    prof = {"gpu": "B200", "tp_size": tp, "max_running_requests": 64}
    new = ft.sizing({"attn_dp_size": n}, prof, 176 * ft.GiB, 40 * ft.GiB)
    old = ft.sizing(read, prof, 176 * ft.GiB, 40 * ft.GiB)
    assert "errors" not in new and new == old
    plain = ft.sizing({"dp_size": n}, prof, 176 * ft.GiB, 40 * ft.GiB)   # planted: replicas, no DP attention
    assert plain != new


def test_replicas_next_to_attn_dp_refused_in_sglangs_words(sglang_ready):
    from glm_kv.errors import ProfileError

    prof = {"gpu": "B200", "tp_size": 4, "dp_size": 2, "max_running_requests": 64}
    got = ft.sizing({"attn_dp_size": 4}, prof, 176 * ft.GiB, 40 * ft.GiB)
    said = got["errors"]["message"]
    with pytest.raises(ProfileError) as e:
        _as_glm_kv_reads("--tp-size 4 --dp-size 2 --attn-dp-size 4")
    assert f'"{said}"' in e.value.rule, (said, e.value.rule)
