"""A disaggregated server's MLA rows follow its own role's DSA backend (``calculate_mla_kv_cache_dim``:
"In disaggregated serving only the backend for the local role determines the local pool layout").

Found by the GLM random launches (seed 1163281087); these are the other DSA models' tensors, measured
against the plan. Expected widths by hand from SGLang 0.5.23's formula: DeepSeek-V3.2 / GLM-5.1 keep a
64-wide rope, so a scaled fp8 row is 512 + 512/128 x 4 + 64 x 2 = 656 B and a raw one 512 + 64 = 576 B.
"""
from __future__ import annotations

import pytest

pytest.importorskip("torch")

from glm_kv.inputs.profile import make_profile  # noqa: E402
from glm_kv.ledgers.plan import load_plan  # noqa: E402
from glm_kv.tensors.model_pools import measure_model  # noqa: E402

SCALED, RAW = 656, 576
LAYERS = {"deepseek-v3.2": 61, "glm-5.1": 78}
B200_FP8 = {"gpu": "B200", "kv_cache_dtype": "fp8_e4m3", "tp_size": 8, "available_bytes": 60 << 30}
CASES = [
    ({"disaggregation_mode": "decode", "dsa_decode_backend": "flashmla_kv"}, SCALED),   # prefill default trtllm
    ({"disaggregation_mode": "decode", "dsa_prefill_backend": "flashmla_sparse", "dsa_decode_backend": "trtllm"}, RAW),
    ({"disaggregation_mode": "prefill", "dsa_prefill_backend": "flashmla_sparse"}, SCALED),   # decode default trtllm
    ({"dsa_prefill_backend": "flashmla_sparse"}, RAW),       # one server: trtllm on either side -> raw
]


@pytest.mark.parametrize("name", sorted(LAYERS))
@pytest.mark.parametrize("launch, row", CASES, ids=["decode-flashmla_kv", "decode-trtllm", "prefill-sparse", "null"])
def test_the_local_role_picks_the_row(name, launch, row):
    report = measure_model(load_plan(make_profile({"model": name, **B200_FP8, **launch})))
    assert report["measured"]["kv_bytes_per_token"] == row * LAYERS[name], report
    assert report["differences"] == {}, report
