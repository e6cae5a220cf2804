"""The agreement check has teeth: a deliberately wrong engine fails it, naming the key."""

from __future__ import annotations

import pytest

GiB = 1 << 30
WORKED = ("worked-example", None, {"sglang_layout": "0.5.23", "kv_cache_dtype": "fp8_e4m3",
                                   "max_running_requests": None, "available_bytes": 100 * GiB})
DPATTN = ("tp8-dp4", None, {"sglang_layout": "0.5.23", "tp_size": 8, "dp_size": 4,
                            "enable_dp_attention": True, "max_running_requests": 64,
                            "available_bytes": 60 * GiB})
# sized from the weights, with MTP: the hardware readings (pre-load, draft) go to both sides
WEIGHTS_MTP = ("weights-mtp", None, {"sglang_layout": "0.5.23", "tp_size": 8, "dp_size": 8,
                                     "enable_dp_attention": True, "max_running_requests": 64,
                                     "speculative_algorithm": "EAGLE", "weights_bytes": 40_000_000_000})


def _failing_keys(res):
    return {m["key"] for m in res.mismatches}


@pytest.mark.parametrize("case", [WORKED, DPATTN], ids=lambda c: c[0])
def test_wrong_indexer_bytes_fail(sglang_ready, monkeypatch, case):
    """Forget the indexer's fp8 scales (128 instead of 132 B per token and layer)."""
    import glm_kv.ledgers.layers
    from compare import compare_one

    honest = compare_one(*case)
    assert not honest.mismatches, honest.mismatches

    monkeypatch.setattr(glm_kv.ledgers.layers.DsaIndexerK, "elements", property(lambda spec: spec.index_head_dim))
    res = compare_one(*case)
    keys = _failing_keys(res)
    assert {"token.indexer_bytes_per_token", "token.indexer_page_bytes",
            "token.cell_size_bytes", "capacity.max_total_num_tokens"} <= keys, keys
    assert all(m["explanation"] == "unexplained" for m in res.mismatches)


def test_wrong_tail_rows_fail(sglang_ready):
    """An engine that allocates the compress tail for requests + 1 rows instead of + 2."""
    from compare import compare_one, engine_plan

    def off_by_one(raw, pid, measured):
        plan, err = engine_plan(raw, pid, measured)
        plan["tail"]["rows"] -= 1
        plan["tail"]["bytes"] -= plan["tail"]["bytes_per_row"]
        return plan, err

    res = compare_one(*WORKED, engine=off_by_one)
    assert {"tail.rows", "tail.bytes"} <= _failing_keys(res)


def test_refusal_mismatch_fails(sglang_ready):
    """An engine that accepts a profile SGLang refuses (no_buffer needs page_size 1)."""
    from compare import compare_one, engine_plan

    case = ("no-buffer", None, {"sglang_layout": "0.5.23", "mamba_scheduler_strategy": "no_buffer"})

    def accepts_everything(raw, pid, measured):
        return engine_plan(dict(raw, mamba_scheduler_strategy="extra_buffer"), pid, measured)[0], None

    res = compare_one(*case, engine=accepts_everything)
    assert _failing_keys(res) == {"errors"}, res.mismatches
    assert "page_size=1" in res.mismatches[0]["sglang"]["message"]


# ---- issue 19: key sets compared both ways


@pytest.mark.parametrize("key", ["token.kv_bytes_per_token", "request.state_slot_bytes", "tail.rows",
                                 "host.mamba_slot_bytes", "capacity.max_total_num_tokens"])
def test_engine_dropping_a_key_fails_naming_it(sglang_ready, key):
    """A plan without one compared key fails the profile with that key's name."""
    from compare import compare_one, engine_plan

    def drops(raw, pid, measured):
        plan, err = engine_plan(raw, pid, measured)
        section, name = key.split(".")
        del plan[section][name]
        return plan, err

    res = compare_one(*DPATTN, engine=drops)
    bad = [m for m in res.mismatches if m["key"] == key]
    assert bad and bad[0]["engine"] == "<missing>", res.mismatches
    assert _failing_keys(res) == {key}, res.mismatches


def test_engine_key_nobody_compares_fails_naming_it(sglang_ready):
    """A new plan key that is neither compared with SGLang nor declared in ENGINE_ONLY fails."""
    from compare import compare_one, engine_plan

    def adds(raw, pid, measured):
        plan, err = engine_plan(raw, pid, measured)
        plan["token"]["kv_bytes_per_token_rounded"] = 11_000
        return plan, err

    res = compare_one(*DPATTN, engine=adds)
    assert _failing_keys(res) == {"token.kv_bytes_per_token_rounded"}, res.mismatches


def test_sglang_key_the_engine_lacks_fails_naming_it(sglang_ready, monkeypatch):
    """A key SGLang computes that the plan lacks is not skipped: it fails with its name."""
    import oracle
    from compare import compare_one

    real = oracle._measure_host
    monkeypatch.setattr(oracle, "_measure_host", lambda *a: {**real(*a), "kv_bytes_per_page": 2_883_584})
    res = compare_one(*DPATTN)
    assert _failing_keys(res) == {"host.kv_bytes_per_page"}, res.mismatches


def test_sglang_lacking_a_compared_key_fails_naming_it(sglang_ready, monkeypatch):
    """The other way: a compared key missing from SGLang's answer fails (it is not skipped)."""
    import oracle
    from compare import compare_one

    real = oracle._measure_host

    def without(*a):
        out = real(*a)
        del out["mamba_page_size"]
        return out

    monkeypatch.setattr(oracle, "_measure_host", without)
    res = compare_one(*DPATTN)
    assert _failing_keys(res) == {"host.mamba_page_size"}, res.mismatches
    assert res.mismatches[0]["sglang"] == "<missing>"


def test_hardware_readings_reach_both_sides(sglang_ready, monkeypatch):
    """The draft weights and pre-load reading are the suite's, on both sides: a different draft
    figure on the engine's side alone moves the rest, and the comparison names it."""
    from compare import compare_one, engine_plan

    honest = compare_one(*WEIGHTS_MTP)
    assert not honest.mismatches, honest.mismatches
    assert honest.inputs["pre_model_load_bytes"] and honest.inputs["draft_weights_bytes"], honest.inputs

    def other_draft(raw, pid, measured):
        return engine_plan(raw, pid, {"draft_weights_bytes": measured["draft_weights_bytes"] + (1 << 30)})

    res = compare_one(*WEIGHTS_MTP, engine=other_draft)
    assert {"capacity.available_bytes", "capacity.token_pool_budget_bytes"} <= _failing_keys(res), res.mismatches


def test_engine_only_table_in_readme():
    """tests/sglang/README.md lists exactly the plan keys SGLang never computes (compare.ENGINE_ONLY)."""
    import re
    from pathlib import Path

    from compare import ENGINE_ONLY

    text = (Path(__file__).parent / "README.md").read_text()
    section = text.split("## Keys SGLang never computes", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"^\| `([a-z_.*]+)` \|", section, flags=re.M))
    assert listed == set(ENGINE_ONLY), (sorted(listed - set(ENGINE_ONLY)), sorted(set(ENGINE_ONLY) - listed))


def test_radix_key_sets_compared_both_ways():
    """The radix differential names a key either side lacks (observation, counters, node fields)."""
    from test_radix_differential import key_set_difference

    node = {"span": (0, 256), "full": True, "mamba": False, "lock_full": 0}
    obs = {"nodes": [node], "free_tokens": 10, "evicted": {"tokens": 0, "mamba": 0}}
    assert key_set_difference(obs, {**obs}) is None
    what, ours, theirs = key_set_difference(obs, {k: v for k, v in obs.items() if k != "free_tokens"})
    assert "free_tokens" in theirs and what == "key set of the observation"
    what, ours, theirs = key_set_difference(obs, {**obs, "free_host": 3})
    assert "free_host" in ours
    what, ours, theirs = key_set_difference(obs, {**obs, "evicted": {"tokens": 0}})
    assert what == "key set of evicted" and "mamba" in theirs
    what, ours, theirs = key_set_difference(obs, {**obs, "nodes": [{**node, "lock_mamba": 0}]})
    assert what == "key set of node (0, 256)" and "lock_mamba" in ours
    # host_free_indexer is no longer set aside: a glm_kv side without it fails naming it
    hs = {**obs, "host_free_kv": 4, "host_free_indexer": 5}
    what, ours, theirs = key_set_difference(hs, {**obs, "host_free_kv": 4})
    assert what == "key set of the observation" and "host_free_indexer" in theirs


def test_glm_kv_observes_the_indexer_host_free_count(sglang_ready, reduced_config, one_thread):
    """Issue 19 finding, fixed: SGLang's DSAIndexerPoolHost keeps a free list of its own (HostKVCache
    .clear) that nothing allocates from (its indices come from KV), so after a prefill its free count
    (8,448) differs from the KV host pool's (7,680). glm_kv observes the same count."""
    from test_radix_differential import HICACHE_RATIO, GlmKvSide, _apply, _driver, generate_ops

    side = _driver(reduced_config, hicache=True, hicache_ratio=HICACHE_RATIO)
    handles = {"sglang": ([], []), "glm_kv": ([], [])}
    try:
        ours = GlmKvSide(reduced_config, hicache=True)
        moved = 0
        for op in generate_ops(20251134, 3000, hicache=True)[:40]:
            for name, s in (("sglang", side), ("glm_kv", ours)):
                _apply(s, op, *handles[name])
                s.tick()
            theirs, mine = side.observe(), ours.observe()
            assert mine.get("host_free_indexer") == theirs["host_free_indexer"], (op, mine, theirs)
            moved += theirs["host_free_kv"] != theirs["host_free_indexer"]
        assert moved, "no op moved the KV host free count away from the indexer's: the case tests nothing"
    finally:
        side.drain(handles["sglang"][1])
        side.d.close()
