"""Capacity from a launch command alone (issue 20): weights from safetensors headers or the config."""
from __future__ import annotations

import json
import struct

import pytest

from glm_kv.errors import ProfileError
from glm_kv.inputs.weights import BYTES_PER_PARAM, quantization_of, safetensors_bytes


def _write_safetensors(path, tensors: dict) -> int:
    """A minimal safetensors file (header + zero data); returns the data bytes it declares."""
    header, offset = {}, 0
    size = {"BF16": 2, "F8_E4M3": 1, "F32": 4, "U8": 1}
    for name, (dtype, shape) in tensors.items():
        n = size[dtype]
        for d in shape:
            n *= d
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + n]}
        offset += n
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + bytes(offset))
    return offset


def test_safetensors_total_is_the_sum_of_tensor_bytes(tmp_path):
    a = _write_safetensors(tmp_path / "model-00001-of-00002.safetensors",
                           {"w": ("F8_E4M3", (64, 32)), "s": ("F32", (1, 1)), "e": ("BF16", (10, 8))})
    b = _write_safetensors(tmp_path / "model-00002-of-00002.safetensors", {"x": ("U8", (7,))})
    assert safetensors_bytes(str(tmp_path)) == a + b == 64 * 32 + 4 + 160 + 7
    assert safetensors_bytes(str(tmp_path / "none")) is None


def test_broken_safetensors_is_named(tmp_path):
    (tmp_path / "bad.safetensors").write_bytes(b"\xff" * 8)
    with pytest.raises(ProfileError) as e:
        safetensors_bytes(str(tmp_path))
    assert e.value.field == "model" and "bad.safetensors" in e.value.rule


@pytest.mark.parametrize("cfg,q", [({}, "fp8"), ({"quantization_config": {"quant_method": "fp8"}}, "fp8"),
                                   ({"quantization_config": {"quant_method": "modelopt", "quant_algo": "NVFP4"}},
                                    "nvfp4"),
                                   ({"text_config": {"quantization_config": {"quant_method": "modelopt_fp4"}}},
                                    "nvfp4")])
def test_quantization_from_config(cfg, q):
    assert quantization_of(cfg) == q


def test_bytes_per_param_include_scales():
    assert BYTES_PER_PARAM["fp8"] == 1 + 4 / 16384 and BYTES_PER_PARAM["nvfp4"] == 0.5 + 1 / 16


LAUNCH = "python -m sglang.launch_server --model-path zai-org/GLM-5.3-Flash --tp-size 2"


def _plan(capsys, *extra):
    from glm_kv.cli import main

    assert main(["plan", "--sglang-args", LAUNCH, *extra, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_launch_command_gives_a_capacity_with_its_weights_source(capsys):
    d = _plan(capsys, "--set", "gpu=B200", "--set", "tp_size=8")
    assert d["capacity"] is not None and d["capacity"]["max_total_num_tokens"] > 0
    text = json.dumps(d)
    assert '"estimate"' in text


def test_given_weights_win_over_the_estimate(capsys):
    d = _plan(capsys, "--set", "gpu=H200", "--set", "weights_bytes=70000000000")
    assert '"estimate"' not in json.dumps(d.get("memory") or {}).replace("+estimate", "")


def test_local_checkpoint_is_read_exactly(capsys, tmp_path):
    from glm_kv.inputs.model import PACKAGE_DIR

    cfg = json.loads((PACKAGE_DIR / "data" / "glm-5.3-flash.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({k: v for k, v in cfg.items() if not k.startswith("_")}))
    _write_safetensors(tmp_path / "model.safetensors", {"w": ("U8", (1 << 20,))})
    from glm_kv.cli import main

    cmd = f"python -m sglang.launch_server --model-path {tmp_path} --tp-size 2"
    assert main(["plan", "--sglang-args", cmd, "--set", "gpu=H200", "--json"]) == 0
    assert '"safetensors"' in capsys.readouterr().out


def test_nvfp4_checkpoint_on_gb10_fits_where_fp8_does_not(capsys, tmp_path):
    """2 x GB10, TP 2 (sglang #36889's hardware): the NVFP4 checkpoint gives a capacity, the FP8 one cannot."""
    from glm_kv.cli import main
    from glm_kv.inputs.model import PACKAGE_DIR

    cfg = json.loads((PACKAGE_DIR / "data" / "glm-5.3-flash.json").read_text())
    cfg = {k: v for k, v in cfg.items() if not k.startswith("_")}
    cfg["quantization_config"] = {"quant_method": "modelopt", "quant_algo": "NVFP4"}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    cmd = f"python -m sglang.launch_server --model-path {tmp_path} --tp-size 2"
    assert main(["plan", "--sglang-args", cmd, "--set", "gpu=GB10", "--json"]) == 0
    assert '"estimate"' in capsys.readouterr().out
    assert main(["plan", "--sglang-args", LAUNCH, "--set", "gpu=GB10", "--json"]) == 2
    assert "weights_bytes" in capsys.readouterr().err
