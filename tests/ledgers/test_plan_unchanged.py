"""REGRESSION GUARD ONLY: the plan JSON of every shipped profile x twelve variants equals a snapshot.

``plans_before_layering.json`` was written by glm-kv itself (first before the layering move,
commit 70235d0; re-captured by ``capture_plans.py`` whenever numbers change on purpose). So this
test proves nothing about correctness: it only says that no number moved *unintentionally*. A
failure means "something changed": check the change against the independent tests below, then
re-capture and say why in the commit. A refusal must still be a refusal naming the same field.

Where each pinned number family was first checked independently (against the article's figures,
SGLang 0.5.23's own classes / formulas, or a public boot log):

* ``token.*``: tests/ledgers/test_article_figures.py (article #2-#12) and
  tests/ledgers/test_sglang_0523.py (page, indexer, cell_size); tests/sglang/test_agreement.py
  against SGLang's KVCacheConfigurator
* ``request.*``: tests/ledgers/test_article_figures.py (article #13-#19), test_sglang_0523.py (slots
  per request, TP halving); tests/sglang/test_agreement.py (MambaPool)
* ``tail.*``: test_article_figures.py (article #21, #22), test_sglang_0523.py (tail width and rows)
* ``parallel.*``: test_article_figures.py (article #20), test_sglang_0523.py (per-worker requests,
  DP attention)
* ``capacity.*``: test_sglang_0523.py (the 100 GiB worked example), tests/sglang/test_agreement.py
  (SGLang's configurator), tests/ledgers/boot_logs via tests/ledgers/test_verify.py
* ``capacity memory keys (mem_fraction_static, rest, weights)``: tests/ledgers/test_memory.py (the
  wheel's memory_hook formulas, typed by hand), tests/sglang/test_memory_agreement.py, the boot logs
* ``host.*``: test_article_figures.py (article #28), test_sglang_0523.py (host pools and rows),
  test_memory.py (hicache_size split, auto-size), tests/sglang/test_memory_agreement.py, the boot
  logs
* ``refusals (error)``: test_sglang_0523.py::test_startup_refusals, test_memory.py (host / CP
  refusals)

Device-side shapes behind these numbers are measured independently by ``glm-kv measure``
(tests/tensors/test_measure.py), which builds the pools from the config + resolved arguments.
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
            "speculative_eagle_topk": 1,
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
        assert json.dumps(got, indent=2) == json.dumps(want, indent=2), (
            f"{profile}/{name}: the plan JSON differs from the snapshot. REGRESSION GUARD ONLY: the "
            f"snapshot was written by glm-kv itself, so this says a number changed, not which side is "
            f"right. Check it against the independent tests named in this module's docstring "
            f"(article figures, SGLang 0.5.23, boot logs); if the change is intended, re-capture with "
            f"python tests/ledgers/capture_plans.py and say why in the commit.")


def test_the_capture_covers_capacity_host_and_refusals():
    assert len(BEFORE) == len(shipped_profiles()) * len(VARIANTS)
    assert sum("capacity" in v for v in BEFORE.values()) > 100
    assert sum((v.get("host") or {}).get("total_host_bytes") is not None for v in BEFORE.values()) >= 20
    assert any("error" in v for v in BEFORE.values())
