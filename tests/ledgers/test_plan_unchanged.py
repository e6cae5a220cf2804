"""The layering move changed no number: the plan JSON of every shipped profile, and of twelve
variants of each (capacity, host pools, MTP, caps, refusals), equals the JSON captured before it.

``plans_before_layering.json`` was written by the engine as it stood before the move (commit
70235d0). A refusal must still be a refusal naming the same field (its wording was unified).
Later issues that change numbers on purpose regenerate the file and say so.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from glm_kv import ProfileError, build_plan, shipped_profiles

BEFORE = json.loads((Path(__file__).parent / "plans_before_layering.json").read_text())
VARIANTS = {
    "as-shipped": {},
    "avail-100GiB": {"available_bytes": 107374182400},
    "weights-40GB": {"weights_bytes": 40_000_000_000},
    "weights-hicache": {"weights_bytes": 40_000_000_000, "enable_hierarchical_cache": True, "hicache_ratio": 1.5},
    "avail-hicache-size": {"available_bytes": 80_000_000_000, "enable_hierarchical_cache": True, "hicache_size": 200},
    "auto-mrr": {"available_bytes": 60_000_000_000, "max_running_requests": None, "context_length": 32768},
    "mmc": {"available_bytes": 60_000_000_000, "max_mamba_cache_size": 40},
    "mtt": {"available_bytes": 60_000_000_000, "max_total_tokens": 100000},
    "radix-off": {"available_bytes": 60_000_000_000, "disable_radix_cache": True},
    "mtp": {"available_bytes": 60_000_000_000, "speculative_algorithm": "EAGLE", "speculative_num_steps": 3,
            "max_running_requests": None},
    "tp4": {"tp_size": 4, "weights_bytes": 80_000_000_000},
    "tiny": {"available_bytes": 2_000_000_000},
}


@pytest.mark.parametrize("profile", shipped_profiles())
def test_plan_json_is_byte_identical_to_before_the_move(profile):
    for name, overrides in VARIANTS.items():
        want = BEFORE[f"{profile}/{name}"]
        try:
            got = build_plan(profile, overrides)
        except ProfileError as e:
            assert "error" in want, (profile, name, str(e))
            assert str(e).split(":")[0] == want["error"].split(":")[0], (profile, name, str(e), want)
            continue
        assert "error" not in want, (profile, name, want)
        assert json.dumps(got, indent=2) == json.dumps(want, indent=2), (profile, name)


def test_the_capture_covers_capacity_host_and_refusals():
    assert len(BEFORE) == len(shipped_profiles()) * len(VARIANTS)
    assert sum("capacity" in v for v in BEFORE.values()) > 100
    assert sum((v.get("host") or {}).get("total_host_bytes") is not None for v in BEFORE.values()) >= 20
    assert any("error" in v for v in BEFORE.values())
