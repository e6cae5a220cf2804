"""Issue 30, deliver 3: random launch commands (random_launches.py, the run's seed) planned by glm-kv and sized
by SGLang 0.5.23's own classes, every key compared both ways.

SGLang's side gets only what its own argparse reads off the command (``random_launches.sglang_kwargs``,
replacing the oracles' kwargs builders) and the hardware readings (``profiles.hardware``); glm-kv's side
gets the fields its ``parse_launch_command`` reads and the same readings. Two comparisons per launch:

* ``compare_memory.KEYS`` (oracle_memory.sglang_memory): the fraction, rest, pool sizes and HiCache host
  pools (with the DFLASH/DSPARK draft sidecar) at full size on meta, both ways;
* ``compare.compare_one`` (oracle.sglang_plan): every plan key compared, declared engine-only, or named;
  for launches without HiCache (that oracle allocates its small host pools in this machine's RAM) and off a
  decode server (its pool self-checks do not build the decode request pool; test_decode_extra_slots.py does);

a launch one side refuses must be refused by the other. Planted errors: the old ranks-per-host rule and glm-kv
without SGLang's start-up checks each fail a launch of the same kind.
"""
from __future__ import annotations

import contextlib

import pytest

L = {"sglang_layout": "0.5.23"}


@pytest.fixture(scope="module")
def drafts(tmp_path_factory):
    from test_flags_dflash import write_draft
    from test_flags_dspark import write_dspark

    d = tmp_path_factory.mktemp("drafts")
    return {"dflash": write_draft(d), "dspark": write_dspark(d)}


@pytest.fixture(scope="module")
def draw(drafts):
    from random_launches import launches

    from tests.pytest_glm_kv import run_seed

    return launches(run_seed(), drafts)


@contextlib.contextmanager
def sglang_reads(command: str):
    """Both oracles hand ServerArgs exactly the kwargs SGLang's parser reads off ``command``."""
    import oracle
    import oracle_memory
    from random_launches import sglang_kwargs

    kw = sglang_kwargs(command)
    real_a, real_b = oracle.server_args_kwargs, oracle_memory.kwargs_for
    oracle.server_args_kwargs = lambda profile: dict(kw)
    oracle_memory.kwargs_for = lambda profile, raw: dict(kw)
    try:
        yield kw
    finally:
        oracle.server_args_kwargs, oracle_memory.kwargs_for = real_a, real_b


def _profile(command: str, hw: dict) -> dict | None:
    """glm-kv's reading of the command plus the readings; None when glm-kv refuses the command itself."""
    from glm_kv.errors import ProfileError
    from random_launches import glm_kv_fields

    try:
        return {**L, **glm_kv_fields(command), **hw}
    except ProfileError:
        return None


def compare_launch(pid: str, command: str, hw: dict) -> list:
    """Every mismatch of the launch (key, glm-kv, SGLang), both comparisons."""
    from compare import compare_one
    from compare_memory import compare
    from oracle_memory import sglang_memory
    from profiles import hardware

    raw = _profile(command, hw)
    with sglang_reads(command):
        if raw is None:   # glm-kv refuses the command: SGLang must refuse it too
            # (its reading, with the suite's hardware readings; no glm-kv field)
            prof, measured = hardware({**L, **hw})
            sg = sglang_memory(prof, prof, pre_model_load_bytes=prof.get("pre_model_load_bytes"),
                               weights_bytes=(prof["weights_bytes"] if prof.get("weights_bytes") is not None
                                              and prof.get("available_bytes") is None else None))
            return [] if "errors" in sg else [("errors", "refused", "starts")]
        out = [(m["key"], m["engine"], m["sglang"]) for m in compare(pid, raw)["mismatches"]]
        ledger = not raw.get("enable_hierarchical_cache") and raw.get("disaggregation_mode") != "decode"
        if raw.get("disaggregation_mode") == "decode" or ledger:
            # a refusal SGLang makes only when it allocates the pools (MambaPool's replay-ring checks) is not
            # seen by the memory oracle, which sizes budgets only: on a decode server the oracles do not build
            # its request/state pools (seed 1512622610: DSPARK 8 draft tokens, --linear-replayssm-cache-len 8;
            # the rule is checked through MambaPool on the other servers, test_flags_replayssm_graph.py); on
            # the others the ledger oracle below builds them and must refuse alike (seed 99)
            out = [m for m in out if not (m[0] == "errors" and "allocates the pools" in str(m[1]))]
        if ledger:
            # the ledger oracle allocates its (W6-sized) host pools in this machine's RAM, so a HiCache
            # launch is compared by the memory oracle alone (host pools at full size on meta, every
            # compare_memory key both ways); the other launches by both
            out += [(m["key"], m["engine"], m["sglang"]) for m in compare_one(pid, None, raw).mismatches]
    return out


def test_every_modelled_flag_is_drawn(sglang_ready, drafts):
    """Over many draws the generator gives every field the flag table models (SGLang's parser names them)."""
    import random

    from glm_kv.inputs.launch import MODELLED
    from random_launches import KINDS, launch, sglang_kwargs

    seen = {"model_path"}   # every launch names it
    rng = random.Random(1)
    for i in range(3000):
        cmd, _hw = launch(rng, drafts, KINDS[i % len(KINDS)] if i % 3 == 0 else None)
        seen |= set(sglang_kwargs(cmd))
    # --speculative-dspark-{sps-table,confidence-sts}-path need planner files (inert, proven in
    # test_flags_dspark); --dcp-size's one accepted value is its default (others refused: test_flags_refusals);
    # --enable-hisparse / --hisparse-config: SGLang fails GLM-5.3-Flash with them past the sizing this draw's
    # oracles run (its allocator, test_flags_hisparse); --disaggregation-ib-device: SGLang checks it against this
    # machine's /sys/class/infiniband (test_flags_ib_device); --swa-full-tokens-ratio / --disable-hybrid-swa-memory
    # move only a hybrid sliding-window model's pools (GLM-5.3-Flash has none): drawn in gpt-oss's own stream
    # (test_models_contract.py)
    left = set(MODELLED) - seen - {"speculative_dspark_sps_table_path", "speculative_dspark_confidence_sts_path",
                                   "dcp_size", "enable_hisparse", "hisparse_config", "disaggregation_ib_device",
                                   "swa_full_tokens_ratio", "disable_hybrid_swa_memory"}
    assert left == set(), sorted(left)


def test_the_draw_has_every_kind(sglang_ready, draw):
    from random_launches import KINDS

    kinds = [pid.rsplit("-", 1)[-1] for pid, _, _ in draw]
    assert all(any(pid.endswith(k) for pid, _, _ in draw) for k in KINDS), kinds
    assert len(draw) >= 40


def test_random_launches_agree(sglang_ready, draw):
    bad = {}
    for pid, cmd, hw in draw:
        m = compare_launch(pid, cmd, hw)
        if m:
            bad[pid] = (cmd, hw, m[:6])
    assert bad == {}, bad


CMD = "python -m sglang.launch_server --model-path zai-org/GLM-5.3-Flash "


def test_planted_old_ranks_rule_is_caught(sglang_ready, monkeypatch):
    """1 rank per host unless stated (glm-kv's old default): an auto-sized HiCache launch on tp 8 disagrees."""
    import glm_kv.ledgers.host as host

    launch = (CMD + "--tp 8 --enable-hicache", {"gpu": "H200", "weights_bytes": 40 * 10**9,
                                              "host_memory_bytes": 500 * 10**9})
    assert compare_launch("ranks", *launch) == []
    monkeypatch.setattr(host, "ranks_per_host", lambda p: p.ranks_per_host or 1)
    assert "host.hicache_ratio" in {k for k, *_ in compare_launch("ranks", *launch)}


def test_planted_missing_startup_check_is_caught(sglang_ready, monkeypatch):
    """glm-kv without SGLang's start-up checks plans what SGLang refuses (check_server_args, mamba_hook)."""
    import glm_kv.inputs.resolve as resolve

    hw = {"gpu": "H200", "weights_bytes": 40 * 10**9}
    launches = [CMD + "--tp 8 --nnodes 3",
                CMD + "--tp 8 --disaggregation-mode prefill --mamba-radix-cache-strategy extra_buffer_lazy"]
    assert all(compare_launch("startup", c, hw) == [] for c in launches)
    monkeypatch.setattr(resolve, "validate_startup", lambda p, strategy, model=None, config=None: None)
    assert all(("errors", "starts") == tuple(x[:2]) or x[0] == "errors"
               for c in launches for x in compare_launch("startup", c, hw)), launches
    assert all(compare_launch("startup", c, hw) for c in launches)


# Found by random draws and fixed: each launch is kept here so that it is checked on every run.
FOUND = [
    # seed 1163281087 (CI, stop 37): a decode server on B200 with --dsa-decode-backend flashmla_kv. SGLang
    # picks the MLA row layout from the local role's backend only (calculate_mla_kv_cache_dim): scaled fp8
    # rows (528 B), though the prefill backend defaults to trtllm; glm-kv took trtllm on either side as raw
    # (512 B) and planned 10,953,216 tokens where SGLang sizes 10,640,896.
    (CMD + "--tp 8 --disaggregation-mode decode --disaggregation-decode-extra-slots 3 --max-running-requests 8 "
     "--disable-prefill-cuda-graph --dsa-decode-backend flashmla_kv", {"gpu": "B200", "available_bytes": 65831947362}),
    # the mirror: a prefill server keeps scaled rows with --dsa-prefill-backend flashmla_sparse on B200
    (CMD + "--tp 8 --disaggregation-mode prefill --dsa-prefill-backend flashmla_sparse",
     {"gpu": "B200", "available_bytes": 65831947362}),
]


@pytest.mark.parametrize("i", range(len(FOUND)))
def test_found_launches_agree(sglang_ready, i):
    cmd, hw = FOUND[i]
    assert compare_launch(f"found-{i}", cmd, hw) == []


def test_planted_either_side_row_rule_is_caught(sglang_ready, monkeypatch):
    """The old rule (trtllm on either side: raw rows, whatever the server's role) disagrees on FOUND[0]."""
    import glm_kv.ledgers.model_layers as ml

    real = ml.dsa_fp8_row
    monkeypatch.setattr(ml, "dsa_fp8_row", lambda pre, dec, mode="null": real(pre, dec))
    assert "capacity.max_total_num_tokens" in {k for k, *_ in compare_launch("planted", *FOUND[0])}


DECODE_HICACHE = ("python -m sglang.launch_server --model-path zai-org/GLM-5.3-Flash --tp 2 {spec}"
                  "--disaggregation-mode decode --disaggregation-decode-enable-radix-cache --max-running-requests 32 "
                  "--max-total-tokens 234496 --mamba-radix-cache-strategy extra_buffer --enable-hicache "
                  "--hicache-ratio 2.24")
DECODE_HW = {"gpu": "H200", "host_memory_bytes": 795_000_000_000, "available_bytes": 44_747_548_774}


def _decode_launches(drafts) -> list[str]:
    dspark = f"--speculative-algorithm DSPARK --speculative-draft-model-path {drafts['dspark']} " \
             "--speculative-dspark-block-size 3 "
    return [DECODE_HICACHE.format(spec=""), DECODE_HICACHE.format(spec=dspark)]


def test_decode_server_host_state_pool_follows_the_raised_mamba_pool(sglang_ready, drafts):
    """A PD decode server's MambaPool is raised to (requests + pre-allocated rows) x slots per request
    (HybridMambaDecodeReqToTokenPool), and HiCache's host state pool is the raised pool x the ratio (found by
    seed 1300734184: DSPARK on a decode server with the decode radix cache, host slots 350 against SGLang's 639)."""
    for cmd in _decode_launches(drafts):
        assert compare_launch("decode-hicache", cmd, DECODE_HW) == [], cmd


def test_a_planted_decode_pool_at_the_budget_size_is_caught(sglang_ready, drafts, monkeypatch):
    """Planted: the host state pool sized from the configurator's max_mamba_cache_size."""
    import glm_kv.ledgers.plan as plan_module

    monkeypatch.setattr(plan_module, "_decode_mamba_pool_slots", lambda args, cap: cap.max_mamba_cache_size if cap else None)
    for cmd in _decode_launches(drafts):
        assert any(key == "host.mamba_slots" for key, *_ in compare_launch("decode-hicache", cmd, DECODE_HW)), cmd
