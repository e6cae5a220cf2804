"""``--enable-hisparse`` / ``--hisparse-config`` read from a pasted command (issue 30); no SGLang needed.

The sizes and SGLang's own refusals are compared with SGLang's classes in tests/sglang/test_flags_hisparse.py;
here: the flags become profile fields, the inert flags SGLang refuses beside HiSparse are refused in its words,
and a ``--hisparse-config`` SGLang cannot read is one line naming the field.
"""
from __future__ import annotations

import pytest

from glm_kv.errors import ProfileError
from glm_kv.inputs.launch import parse_launch_command
from glm_kv.inputs.profile import make_profile
from glm_kv.inputs.resolve import resolve

LAUNCH = "python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3.2 --tp-size 8 --disable-radix-cache "


def test_flags_become_fields():
    fields, inert = parse_launch_command(LAUNCH + "--enable-hisparse --hisparse-config '{\"host_to_device_ratio\": 3}'",
                                         "0.5.23")
    assert fields["enable_hisparse"] is True and fields["hisparse_config"] == '{"host_to_device_ratio": 3}'
    assert inert == []
    fields, _ = parse_launch_command(LAUNCH + "--hierarchical-sparse-attention-extra-config {}", "0.5.23")
    assert fields["hisparse_config"] == "{}"


@pytest.mark.parametrize("extra,flag,says", [
    ("--enable-mixed-chunk", "--enable-mixed-chunk", "does not support --enable-mixed-chunk yet"),
    ("--speculative-algorithm EAGLE --speculative-adaptive", "--speculative-adaptive", "statically sized swap state"),
])
def test_inert_flags_sglang_refuses_beside_hisparse(extra, flag, says):
    parse_launch_command(LAUNCH + extra, "0.5.23")   # inert without HiSparse
    with pytest.raises(ProfileError) as e:
        parse_launch_command(LAUNCH + "--enable-hisparse " + extra, "0.5.23")
    assert e.value.field == flag and says in e.value.rule


def test_host_receive_threshold_beside_hisparse_is_refused():
    """--disaggregation-decode-host-receive-threshold is modelled (it resolves a decode server's retraction backup,
    inputs/retraction.py): below 1 beside HiSparse the launch is refused at resolution, in SGLang's words."""
    extra = "--disaggregation-mode decode --disaggregation-decode-host-receive-threshold 0.5"
    fields, inert = parse_launch_command(LAUNCH + "--enable-hisparse " + extra, "0.5.23")
    assert fields["disaggregation_decode_host_receive_threshold"] == 0.5 and inert == []
    with pytest.raises(ProfileError) as e:
        resolve(make_profile(fields, default_name="x"))
    assert e.value.field == "disaggregation_decode_host_receive_threshold"
    assert "Decode host receive does not yet support HiSparse" in e.value.rule


def test_adaptive_without_speculation_is_not_refused():
    """SGLang refuses --speculative-adaptive beside HiSparse only under speculative decoding."""
    fields, inert = parse_launch_command(LAUNCH + "--enable-hisparse --speculative-adaptive", "0.5.23")
    assert fields["enable_hisparse"] is True and inert == ["--speculative-adaptive"]


@pytest.mark.parametrize("config,says", [
    ("[1]", "must be a JSON object"),
    ('{"host_to_device_ratio": 1.5}', "host_to_device_ratio must be a positive integer"),
    ('{"host_to_device_ratio": 0}', "host_to_device_ratio must be a positive integer"),
    ('{"swap_in_block_size": 2048}', "must be in the range [1, 1024]"),
    ('{"swap_in_block_size": true}', "swap_in_block_size must be an integer"),
    ('{"top_k": "a"}', "top_k and device_buffer_size must be integers"),
])
def test_bad_hisparse_config_is_one_line_naming_the_field(config, says):
    p = make_profile({"model": "deepseek-ai/DeepSeek-V3.2", "tp_size": 8, "enable_hisparse": True,
                      "disable_radix_cache": True, "hisparse_config": config}, default_name="x")
    with pytest.raises(ProfileError) as e:
        resolve(p)
    assert e.value.field == "hisparse_config" and says in e.value.rule and "\n" not in str(e.value)


def test_config_is_not_read_without_hisparse():
    p = make_profile({"model": "deepseek-ai/DeepSeek-V3.2", "tp_size": 8, "hisparse_config": "not json"},
                     default_name="x")
    assert resolve(p).hisparse_ratio == 0
