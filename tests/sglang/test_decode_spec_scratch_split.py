"""A PD decode server's speculative verify scratch in the ``--hicache-size`` split, against SGLang 0.5.23.

On a decode server ``HybridMambaDecodeReqToTokenPool`` (disaggregation/decode.py) builds MambaPool with
``mamba_spec_state_size = size + pre_alloc_size``: the verify scratch (intermediate SSM states and conv windows,
or under ``--enable-linear-replayssm-spec`` the replay ring and the conv windows) covers the pre-allocated rows
too, where the budget counted the requests only. ``_split_hicache_size`` (mem_cache/hybrid_cache/
hybrid_pool_assembler.py) splits ``--hicache-size`` over the pools' own bytes (``MambaPool.get_kv_size_bytes``),
so those rows move host bytes from the KV pool to the state pool. Found by CI's random launch 21 at seed
1551495789 (EAGLE, 17 extra slots, --hicache-size 22): glm-kv split by the budget's scratch (host mamba slots 92,
SGLang 104).

Each launch is a command as a user pastes it: SGLang's side reads only what its argparse takes off it
(test_random_launches.compare_launch), every compared key both ways. Planted error: the scratch without the
pre-allocated rows.
"""
from __future__ import annotations

import pytest

CMD = "python -m sglang.launch_server --model-path zai-org/GLM-5.3-Flash "
DECODE = "--disaggregation-mode decode --disaggregation-decode-enable-radix-cache --enable-hierarchical-cache "
HW = {"gpu": "H200", "weights_bytes": 9_750_000_000}
LAUNCHES = [
    # CI's launch (seed 1551495789, launch 21), as it was drawn
    ("eagle-extra17", CMD + "--tp-size 8 --speculative-algorithm EAGLE --disaggregation-mode decode "
     "--disaggregation-decode-extra-slots 17 --max-mamba-cache-size 291 --page-size 256 --disable-overlap-schedule "
     "--disaggregation-decode-enable-radix-cache --enable-hierarchical-cache --hicache-size 22 "
     "--enable-priority-scheduling"),
    # the default pre-allocation: 2 x 16 rows per worker under a cap of 16 (pd_disaggregation_hook)
    ("eagle-default-rows", CMD + "--tp-size 8 --speculative-algorithm EAGLE --max-running-requests 16 " + DECODE
     + "--hicache-size 40"),
    # ReplaySSM: no intermediate states, but the replay ring and the conv windows over the same rows
    ("replayssm-dspark-extra17", CMD + "--tp-size 8 --speculative-algorithm DSPARK --speculative-draft-model-path "
     "{dspark} --enable-linear-replayssm-spec --disaggregation-decode-extra-slots 17 " + DECODE + "--hicache-size 30"),
]


@pytest.fixture(scope="module")
def commands(tmp_path_factory):
    from test_flags_dspark import write_dspark

    dspark = write_dspark(tmp_path_factory.mktemp("dspark"))
    return {pid: cmd.format(dspark=dspark) for pid, cmd in LAUNCHES}


@pytest.mark.parametrize("pid", [pid for pid, _ in LAUNCHES])
def test_the_split_counts_the_pre_allocated_rows(sglang_ready, commands, pid):
    from test_random_launches import compare_launch

    assert compare_launch(pid, commands[pid], dict(HW)) == [], pid


def test_the_launches_have_pre_allocated_rows_and_a_scratch(sglang_ready, commands):
    """The cases mean what they say: glm-kv's own note names the rows' scratch in each."""
    from random_launches import glm_kv_fields

    from glm_kv.inputs.profile import make_profile
    from glm_kv.inputs.resolve import resolve
    from glm_kv.ledgers.plan import plan_from_args

    for pid, cmd in commands.items():
        pl = plan_from_args(resolve(make_profile({"sglang_layout": "0.5.23", **glm_kv_fields(cmd), **HW})))
        assert any("pre-allocated rows too" in n for n in pl.notes) or pid.startswith("replayssm"), (pid, pl.notes)
        assert pl.host.mamba_slots > 0 and pl.profile.hicache_size > 0, pid


@pytest.mark.parametrize("pid", [pid for pid, _ in LAUNCHES])
def test_planted_scratch_without_the_rows_is_caught(sglang_ready, commands, monkeypatch, pid):
    import glm_kv.ledgers.plan as plan
    from test_random_launches import compare_launch

    monkeypatch.setattr(plan, "_decode_spec_rows_extra", lambda args, cap, slots: 0)   # the budget's rows only
    keys = {k for k, *_ in compare_launch(pid, commands[pid], dict(HW))}
    assert "host.mamba_slots" in keys, (pid, keys)
