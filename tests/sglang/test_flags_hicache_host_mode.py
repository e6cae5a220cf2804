"""--hicache-host-memory-mode, --hicache-storage-backend and --hicache-host-memory-fraction (issue 30), planned
by glm-kv and sized by SGLang 0.5.23's own classes, every key compared both ways (``test_random_launches.compare_launch``:
SGLang gets only what its argparse reads off the command).

SGLang defaults the HiCache ratio to 1.2 when host memory is only a staging buffer (buffer_only), not 2.0
(``hicache_hook.handle_hicache_ratio_default``), and caps auto-sizing with it; the fraction scales the host RAM that
auto-sizing gives the machine's ranks (``hicache_auto_size``); buffer_only needs a storage backend and is refused on
a decode server (``validate_hicache_host_memory_mode``). The flag table first called all three inert: its HiCache
proof profile had 2 TiB of host RAM, where auto-sizing never binds (now 128 GiB, ``flag_table.PROOF_PROFILES``).

Planted errors: the cache-mode default ratio in buffer_only mode, and the fraction left at 0.8, each disagree.
"""
from __future__ import annotations

import pytest

CMD = "python -m sglang.launch_server --model-path zai-org/GLM-5.3-Flash --tp 8 --enable-hicache "
HW = {"gpu": "H200", "weights_bytes": 40 * 10**9}
ROOMY = {**HW, "host_memory_bytes": 3000 * 10**9}   # auto-size caps at the mode's default ratio
TIGHT = {**HW, "host_memory_bytes": 400 * 10**9}    # auto-size binds below it
LAUNCHES = [
    ("buffer-only-default", CMD + "--hicache-host-memory-mode buffer_only --hicache-storage-backend file", HW),
    ("buffer-only-roomy", CMD + "--hicache-host-memory-mode buffer_only --hicache-storage-backend mooncake", ROOMY),
    ("buffer-only-tight", CMD + "--hicache-host-memory-mode buffer_only --hicache-storage-backend file", TIGHT),
    ("buffer-only-size", CMD + "--hicache-host-memory-mode buffer_only --hicache-storage-backend file "
                               "--hicache-size 100", TIGHT),
    ("buffer-only-ratio", CMD + "--hicache-host-memory-mode buffer_only --hicache-storage-backend file "
                                "--hicache-ratio 3", HW),
    ("fraction-tight", CMD + "--hicache-host-memory-fraction 0.3", TIGHT),
    ("fraction-roomy", CMD + "--hicache-host-memory-fraction 0.5", ROOMY),
    ("fraction-explicit-ratio", CMD + "--hicache-host-memory-fraction 0.3 --hicache-ratio 1.5", TIGHT),
    ("backend-cache-mode", CMD + "--hicache-storage-backend file", TIGHT),
    # SGLang's refusals, which glm-kv must give too
    ("buffer-only-no-backend", CMD + "--hicache-host-memory-mode buffer_only", HW),
    ("buffer-only-decode", CMD + "--hicache-host-memory-mode buffer_only --hicache-storage-backend file "
                                 "--disaggregation-mode decode", HW),
    ("buffer-only-decode-no-hicache", "python -m sglang.launch_server --model-path zai-org/GLM-5.3-Flash --tp 8 "
                                      "--hicache-host-memory-mode buffer_only --disaggregation-mode decode", HW),
    ("fraction-zero", CMD + "--hicache-host-memory-fraction 0", TIGHT),
    ("fraction-above-one", CMD + "--hicache-host-memory-fraction 1.5", TIGHT),
]


def _compare(pid, cmd, hw):
    from test_random_launches import compare_launch

    return compare_launch(pid, cmd, hw)


@pytest.mark.parametrize("pid,cmd,hw", LAUNCHES, ids=[x[0] for x in LAUNCHES])
def test_glm_kv_sizes_the_host_mode_as_sglang(sglang_ready, pid, cmd, hw):
    assert _compare(pid, cmd, hw) == []


def test_the_launches_reach_both_answers(sglang_ready):
    """Not vacuous: some launches SGLang refuses, and the ones it starts size the host ratio differently."""
    from test_random_launches import _profile

    from glm_kv.errors import ProfileError
    from glm_kv.inputs.profile import make_profile
    from glm_kv.ledgers.plan import compute_plan

    ratios, refused = {}, set()
    for pid, cmd, hw in LAUNCHES:
        raw = _profile(cmd, hw)
        try:
            ratios[pid] = compute_plan(make_profile(raw)).host.hicache_ratio if raw else None
        except ProfileError:
            ratios[pid] = None
        if ratios[pid] is None:
            refused.add(pid)
    assert {"buffer-only-no-backend", "buffer-only-decode", "buffer-only-decode-no-hicache", "fraction-zero",
            "fraction-above-one"} <= refused, ratios
    assert ratios["buffer-only-default"] == pytest.approx(1.2) and ratios["backend-cache-mode"] < 2.0
    assert ratios["fraction-tight"] < ratios["backend-cache-mode"], ratios


def test_planted_cache_mode_ratio_in_buffer_only_is_caught(sglang_ready, monkeypatch):
    import glm_kv.ledgers.host as host

    monkeypatch.setattr(host, "BUFFER_ONLY_HICACHE_RATIO", host.DEFAULT_HICACHE_RATIO)
    keys = {k for k, *_ in _compare(*LAUNCHES[0])}
    assert "host.hicache_ratio" in keys, keys


def test_planted_fraction_ignored_is_caught(sglang_ready, monkeypatch):
    import glm_kv.ledgers.host as host

    monkeypatch.setattr(host, "host_memory_fraction", lambda p: host.HICACHE_HOST_MEMORY_FRACTION)
    keys = {k for k, *_ in _compare(*LAUNCHES[5])}
    assert "host.hicache_ratio" in keys, keys
