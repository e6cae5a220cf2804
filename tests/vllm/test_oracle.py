"""vLLM 0.33.0's own KV sizing, driven on the CPU (oracle.py in .venv-vllm), against anchors that do not
come from vLLM's code path run here, and against invariants vLLM's own output must satisfy.

Anchors: the feasibility study ../shared/reference/vllm-0.33.md (section 3's table at a fake H200 sm_90,
TP=8, default flags, 60 GiB available per rank; section 3/4's concurrency figures), stated as literals
with their source. They were read off an independent earlier run of vLLM 0.33.0 by the study, not
computed by this harness; where this harness disagrees, one of the two setups is wrong and the test says so.

Random launches: the run's seed (GLM_KV_SEED, tests/pytest_glm_kv.run_seed) draws one launch per model
(GPU, TP, dtypes, prefix caching, max_model_len, max_num_seqs, MTP tokens, KV memory); vLLM's answer
must satisfy the invariants in ``check_invariants``. A refusal is a valid vLLM answer only where vLLM
refuses in words (a named stage and message), never a crash of the harness.
"""
from __future__ import annotations

import math
import random
import re

import pytest

from tests.pytest_glm_kv import run_seed

GiB = 1 << 30
STUDY = "../shared/reference/vllm-0.33.md"
MODELS = ("glm-5.3-flash", "kimi-k3", "qwen3.5-35b-a3b", "nemotron-3-super-120b-a12b-fp8", "deepseek-v3.2",
          "glm-5.1")
HYBRID = {"glm-5.3-flash", "kimi-k3", "qwen3.5-35b-a3b", "nemotron-3-super-120b-a12b-fp8"}
# The vendored Kimi-K3 config has num_nextn_predict_layers: 0 (no MTP layers in the checkpoint)
NO_MTP_LAYERS = {"kimi-k3"}

# The study's set-up for every anchor: fake H200 (sm_90), TP=8, vLLM's default flags (prefix caching on,
# mamba_cache_mode align), 60 GiB available per rank.
BASE = {"gpu": "H200", "tp": 8, "kv_cache_memory_bytes": 60 * GiB}

# (model, launch overrides) -> expected, each with the study's words it comes from
ANCHORS = [
    # section 3 table, "block" and "groups" columns
    ("glm-5.3-flash", {}, {"cache_block_size": 640, "num_groups": 6}, f"{STUDY} s3 table: block 640, groups 6"),
    ("kimi-k3", {}, {"cache_block_size": 768, "num_groups": 4}, f"{STUDY} s3 table: block 768, groups 4"),
    ("qwen3.5-35b-a3b", {}, {"cache_block_size": 320, "num_groups": 4}, f"{STUDY} s3 table: block 320, groups 4"),
    ("nemotron-3-super-120b-a12b-fp8", {}, {"cache_block_size": 2080, "num_groups": 6},
     f"{STUDY} s3 table: block 2080, groups 6"),
    ("deepseek-v3.2", {}, {"cache_block_size": 64, "num_groups": 1}, f"{STUDY} s3 table: block 64, groups 1"),
    ("glm-5.1", {}, {"cache_block_size": 64, "num_groups": 1}, f"{STUDY} s3 table: block 64, groups 1"),
    # section 3 prose: concurrency
    ("glm-5.3-flash", {"speculative_config": {"method": "mtp", "num_speculative_tokens": 3}},
     {"maximum_concurrency_printed": "4.77x"}, f"{STUDY} s3: GLM-5.3-Flash with MTP=3 gives 4.77x"),
    ("glm-5.1", {"gpu": "B200"}, {"maximum_concurrency_printed": "5.75x"},
     f"{STUDY} s3: fake B200 (sm_100) ... GLM-5.1 ... 5.75x"),
    ("glm-5.3-flash", {"gpu": "B200"}, {"maximum_concurrency_printed": "9.92x"},
     f"{STUDY} s3: fake B200 (sm_100) ... GLM-5.3-Flash ... 9.92x"),
    # section 4: flags
    ("qwen3.5-35b-a3b", {}, {"maximum_concurrency_printed": "23.72x"}, f"{STUDY} s4: Qwen3.5 ... 23.72x"),
    ("qwen3.5-35b-a3b", {"kv_cache_dtype": "fp8"}, {"maximum_concurrency_printed": "46.98x", "cache_block_size": 576},
     f"{STUDY} s4: Qwen3.5 fp8 ... 46.98x, and its hybrid block from 320 to 576"),
    ("glm-5.3-flash", {"mamba_ssm_cache_dtype": "bfloat16"}, {"cache_block_size": 384},
     f"{STUDY} s4: GLM-5.3-Flash with an ssm state in bf16 moves its block from 640 to 384"),
    ("qwen3.5-35b-a3b", {"enable_prefix_caching": False}, {"cache_block_size": 272},
     f"{STUDY} s4: the block size is rounded to the checkpoint alignment (Qwen3.5: 320 vs 272)"),
]


def anchor_launch(model: str, overrides: dict) -> dict:
    return {**BASE, "model": model, **overrides}


def _observed(plan: dict, key: str):
    if key == "num_groups":
        return len(plan["groups"])
    return plan[key]


@pytest.mark.parametrize("model,overrides,expected,source", ANCHORS,
                         ids=[f"{m}-{'-'.join(f'{k}={v}' for k, v in o.items()) or 'default'}-{'-'.join(e)}"
                              for m, o, e, _ in ANCHORS])
def test_study_anchor(vllm_plan, model, overrides, expected, source):
    plan = vllm_plan(anchor_launch(model, overrides))
    assert "refused" not in plan, f"vLLM refused a launch the study ran ({source}): {plan}"
    got = {k: _observed(plan, k) for k in expected}
    assert got == expected, f"{model} {overrides}: vLLM says {got}, the study says {expected} ({source})"
    check_invariants(plan)


GENERATION_LAUNCHES = ({**BASE, "model": "glm-5.1"}, {**BASE, "model": "glm-5.1", "gpu": "B200"})


def test_the_gpu_generation_is_an_input(vllm_plan):
    """The stand-in platform's capability reaches vLLM: B200 (sm_100) switches GLM-5.1 to an fp8 KV
    cache (vllm/model_executor/models/config.py), H200 (sm_90) keeps bf16 (study s3)."""
    h200, b200 = (vllm_plan(launch) for launch in GENERATION_LAUNCHES)
    assert h200["gpu_capability"] == [9, 0] and b200["gpu_capability"] == [10, 0]
    assert "fp8" not in h200["kv_cache_dtype"] and "fp8" in b200["kv_cache_dtype"], (h200["kv_cache_dtype"],
                                                                                       b200["kv_cache_dtype"])
    assert b200["maximum_concurrency"] > h200["maximum_concurrency"]


# ------------------------------------------------------------------------------------------------------
# invariants on random launches
# ------------------------------------------------------------------------------------------------------

ATTENTION_KINDS = {"FullAttentionSpec", "MLAAttentionSpec"}


def check_invariants(plan: dict, dcp: int = 1) -> None:
    """What vLLM's own output must satisfy, whatever the formulas inside (``dcp``: the launch's decode context
    parallel size, which the plan does not report)."""
    mem = plan["kv_cache_memory_bytes"]
    n = plan["num_blocks"]
    assert n > 1, n   # block 0 is the null block
    tensors = plan["kv_cache_tensors"]
    # 1. one backing allocation (vLLM's allocate_kv_cache asserts it) and it fits the memory given
    sizes = {t["size_bytes"] for t in tensors}
    assert len(sizes) == 1, sizes
    backing = sizes.pop()
    assert 0 < backing <= mem, (backing, mem)
    # 2. every layer's every block lies inside it: offset + l*layer_stride + b*block_stride + page <= size
    for t in tensors:
        page = max(plan["layers"][name]["page_size_bytes"] for name in t["layers"])
        last = t["offset_bytes"] + (len(t["layers"]) - 1) * t["layer_stride_bytes"] \
            + (t["num_blocks"] - 1) * t["block_stride_bytes"] + page
        assert t["num_blocks"] >= n and last <= backing, (t["num_blocks"], n, last, backing, t["layers"][:3])
    # 3. every layer with a spec is in exactly one group, and is backed by a tensor
    grouped = [name for g in plan["groups"] for name in g["layer_names"]]
    assert sorted(grouped) == sorted(plan["layers"]), "layers and groups disagree"
    assert set(plan["layers"]) <= {name for t in tensors for name in t["layers"]}
    # 4. the printed line: GPU KV cache size = int(concurrency x max_model_len)
    assert plan["gpu_kv_cache_size_tokens"] == int(plan["maximum_concurrency"] * plan["max_model_len"])
    assert plan["maximum_concurrency_printed"] == f"{plan['maximum_concurrency']:.2f}x"
    assert plan["maximum_concurrency"] > 0
    # 5. a request of max_model_len tokens needs ceil(len / block) blocks of every group that keeps one KV
    #    entry per token (full attention or MLA, no window, one token per state; under DCP a rank keeps
    #    ceil(len / dcp) of them: the ranks share the request's tokens), all from the one pool
    #    of num_blocks. (vLLM's printed concurrency counts the null block in that pool:
    #    get_max_concurrency_for_kv_cache_config divides num_blocks itself, so the bound is num_blocks.)
    #    (a group's layers may mix specs of one type: the scheduler shows one of them, so read each layer's)
    def per_token(name: str) -> bool:
        spec = plan["layers"][name]
        return (spec["kind"] in ATTENTION_KINDS and spec.get("sliding_window") is None
                and spec.get("tokens_per_state", 1) == 1)

    need = sum(math.ceil(math.ceil(plan["max_model_len"] / dcp) / g["block_size"]) for g in plan["groups"]
               if any(per_token(name) for name in g["layer_names"]))
    assert need > 0, [g["kind"] for g in plan["groups"]]
    assert plan["maximum_concurrency"] * need <= n * (1 + 1e-12), (plan["maximum_concurrency"], need, n)


def random_launch(rng: random.Random, model: str) -> dict:
    launch = {"model": model, "gpu": rng.choice(["H200", "B200"]), "tp": rng.choice([1, 2, 4, 8]),
              "kv_cache_memory_bytes": rng.randrange(4 * GiB, 100 * GiB, 1 << 20)}
    if rng.random() < 0.5:
        launch["enable_prefix_caching"] = rng.random() < 0.5
    if rng.random() < 0.5:
        launch["max_model_len"] = rng.choice([4096, 8192, 32768, 131072, 200000])
    if rng.random() < 0.5:
        launch["max_num_seqs"] = rng.choice([1, 16, 64, 256, 1024])
    if rng.random() < 0.3:
        launch["kv_cache_dtype"] = rng.choice(["auto", "fp8", "bfloat16"])
    if model in HYBRID and rng.random() < 0.4:
        launch["mamba_ssm_cache_dtype"] = rng.choice(["float32", "bfloat16"])
    # every model, Kimi-K3 too (no MTP layer: vLLM's ZeroDivisionError, which glm-kv must give as well)
    if rng.random() < 0.3:
        launch["speculative_config"] = {"method": "mtp", "num_speculative_tokens": rng.randint(1, 3)}
    if rng.random() < 0.15:   # the Mamba hybrids: vLLM's refusal (xfail); the DSA models: a plan
        launch["disable_hybrid_kv_cache_manager"] = True
    # decode context parallelism over the TP ranks (a divisor of tp; vLLM refuses many: the GQA models' two KV
    # heads, bf16 sparse MLA on FlashMLA sparse)
    if launch["tp"] > 1 and rng.random() < 0.25:
        launch["decode_context_parallel_size"] = rng.choice([d for d in (2, 4, 8) if launch["tp"] % d == 0])
    return launch


# random launches per model and run: each costs ~2-3 s of CPU through the warm server (conftest.py); the
# seed varies per run, so coverage adds up across runs
RANDOM_PER_MODEL = 2


def seeded_launch(model: str, i: int = 0) -> dict:
    """This run's i-th random launch of ``model`` (GLM_KV_SEED); i = 0 is the one drawn before there were two."""
    return random_launch(random.Random(f"{run_seed()}-{model}" + (f"-{i}" if i else "")), model)


@pytest.mark.parametrize("i", range(RANDOM_PER_MODEL))
@pytest.mark.parametrize("model", MODELS)
def test_random_launch_invariants(vllm_plan, model, i):
    launch = seeded_launch(model, i)
    plan = vllm_plan(launch)
    if "refused" in plan and model in NO_MTP_LAYERS and "speculative_config" in launch:
        # vLLM's failure on MTP without MTP layers (test_mtp_on_a_checkpoint_without_mtp_layers_crashes_vllm)
        assert plan["refused"] == {"stage": "engine_config", "type": "ZeroDivisionError",
                                   "message": "integer modulo by zero"}, (launch, plan["refused"])
        pytest.xfail(f"vLLM fails on MTP without MTP layers: {launch}")
    if "refused" in plan:
        r = plan["refused"]
        # vLLM's own refusal: a named stage and vLLM's words, never the harness's crash
        # ("model": a layer's backend selection refuses, e.g. "No valid attention backend")
        assert r["stage"] in {"engine_config", "model", "update_block_size_for_backend", "get_kv_cache_configs"}, \
            (launch, r)
        assert r["type"] in {"ValueError", "NotImplementedError", "ValidationError"} and r["message"], (launch, r)
        pytest.xfail(f"vLLM refuses {launch}: {r['message'][:300]}")
    check_invariants(plan, launch.get("decode_context_parallel_size", 1))
    # the launch reached vLLM as given
    assert plan["tp"] == launch["tp"] and plan["kv_cache_memory_bytes"] == launch["kv_cache_memory_bytes"]
    if "max_model_len" in launch:
        assert plan["max_model_len"] == launch["max_model_len"]
    assert plan["num_speculative_tokens"] == launch.get("speculative_config", {}).get("num_speculative_tokens", 0)


def memory_pair() -> tuple[dict, dict]:
    rng = random.Random(f"{run_seed()}-mem")
    model = rng.choice(MODELS)
    mem = rng.randrange(8 * GiB, 40 * GiB, 1 << 20)
    return ({**BASE, "model": model, "kv_cache_memory_bytes": mem},
            {**BASE, "model": model, "kv_cache_memory_bytes": 2 * mem})


def test_more_memory_more_blocks(vllm_plan):
    """Metamorphic, on one model the seed draws: doubling the KV memory at least doubles the blocks (less
    the null block) and never lowers the concurrency; the specs and block size do not move."""
    one, two = (vllm_plan(launch) for launch in memory_pair())
    # at vLLM's default max_model_len (1,048,576 for some models) the smaller memory may be too little for
    # one request: vLLM refuses it in words (found by seed 1305712060: Kimi-K3 at 21.8 GiB, 27.19 GiB
    # needed). More memory never turns an answer into a refusal; a refusal may become an answer.
    for plan in (one, two):
        if "refused" in plan:
            assert plan["refused"]["stage"] == "get_kv_cache_configs" and plan["refused"]["type"] == "ValueError" \
                and "larger than the available KV cache memory" in plan["refused"]["message"], plan["refused"]
    assert not ("refused" in two and "refused" not in one), (one.get("num_blocks"), two["refused"])
    if "refused" in one:
        if "refused" in two:
            pytest.xfail(f"vLLM refuses both memories for one request at max_model_len: {two['refused']['message'][:200]}")
        check_invariants(two)
        return
    assert two["num_blocks"] >= 2 * one["num_blocks"] - 1, (one["num_blocks"], two["num_blocks"])
    assert two["maximum_concurrency"] >= one["maximum_concurrency"]
    assert two["cache_block_size"] == one["cache_block_size"] and two["layers"] == one["layers"]


KIMI_MTP = {**BASE, "model": "kimi-k3", "speculative_config": {"method": "mtp", "num_speculative_tokens": 3}}


def test_mtp_on_a_checkpoint_without_mtp_layers_crashes_vllm(vllm_plan):
    """Found by a random launch (seed 680826868): --speculative-config mtp on Kimi-K3, whose config has
    num_nextn_predict_layers 0, is not refused in words by vLLM 0.33.0: SpeculativeConfig.__post_init__
    (vllm/config/speculative.py) computes num_speculative_tokens % n_predict with n_predict 0."""
    plan = vllm_plan(KIMI_MTP)
    assert plan.get("refused", {}).get("stage") == "engine_config", plan.get("refused", plan.get("num_blocks"))
    assert plan["refused"]["type"] == "ZeroDivisionError", plan["refused"]


def fresh_check_model() -> str:
    return random.Random(f"{run_seed()}-fresh").choice(MODELS)


def test_the_server_changes_nothing(vllm_plan):
    """The launches run as forks of a server that imported vLLM once (conftest.py, oracle.py ``serve``).
    This run's random launch of one model the seed draws, run again in a new process of its own (the plain
    ``oracle.py '<json>'``, no server, no pre-imported modules), gives vLLM's answer key for key."""
    from tests.vllm.conftest import run_fresh

    launch = seeded_launch(fresh_check_model())
    assert _same_run(run_fresh(launch)) == _same_run(vllm_plan(launch)), launch


VOLATILE = re.compile(r"pid=\d+\) (\w+) \d\d-\d\d \d\d:\d\d:\d\d")


def _same_run(plan: dict) -> dict:
    """The answer without what differs between any two processes: the pid and clock in the prefix of
    vLLM's log lines (``vllm_log``); the messages must be the same."""
    if "vllm_log" not in plan:
        return plan
    return {**plan, "vllm_log": [VOLATILE.sub(r"pid=*) \1 *", ln) for ln in plan["vllm_log"]]}


def launches_of(item) -> list[dict]:
    """The launches a test of this module will ask for (conftest.py queues them after collection)."""
    name = item.originalname if hasattr(item, "originalname") else item.name
    params = getattr(getattr(item, "callspec", None), "params", {})
    if name == "test_study_anchor":
        return [anchor_launch(params["model"], params["overrides"])]
    if name == "test_the_gpu_generation_is_an_input":
        return list(GENERATION_LAUNCHES)
    if name == "test_random_launch_invariants":
        return [seeded_launch(params["model"], params["i"])]
    if name == "test_more_memory_more_blocks":
        return list(memory_pair())
    if name == "test_mtp_on_a_checkpoint_without_mtp_layers_crashes_vllm":
        return [KIMI_MTP]
    if name == "test_the_server_changes_nothing":
        return [seeded_launch(fresh_check_model())]
    return []
