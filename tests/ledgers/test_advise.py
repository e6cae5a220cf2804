"""`glm-kv advise`, checked rather than asserted.

Every advice is fed back into `glm-kv plan` through the CLI's own parsing (`--sglang-args` with
the advised flags), and the resulting capacity is judged by SGLang 0.5.23's rules written out
here, not imported: a worker runs min(requested, tokens // 2, slots // slots_per_request)
requests, each holding ceil(T / page) pages, and max_running_requests is global (divided by
attn_dp). A brute force over every split the flag accepts, in each KV dtype the profile allows
(``split_space``), then shows that no other choice serves more of the workload.
Random profiles and workloads are seeded from GLM_KV_SEED.
"""
from __future__ import annotations

import json
import math
import random

import numpy as np
import pytest
import yaml

from glm_kv import load_plan, load_profile, shipped_profiles
from glm_kv.cli import main
from glm_kv.errors import ProfileError
from glm_kv.inputs.launch import parse_launch_command
from glm_kv.inputs.workload_spec import load_workload, make_workload, shipped_workloads
from glm_kv.ledgers import advise as advise_module
from glm_kv.ledgers.advise import advise
from tests.pytest_glm_kv import run_seed

SEED = run_seed()
ENTRY = "python -m sglang.launch_server"


# -- the judge: SGLang's rules, applied to `glm-kv plan --json` ------------------------------------

def plan_json(profile_arg: str, flags, capsys) -> dict:
    argv = ["plan", "--profile", profile_arg, "--json"]
    if flags:
        argv += ["--sglang-args", " ".join([ENTRY, *flags])]
    assert main(argv) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def ceil_pages(tokens: int, page: int) -> int:
    return math.ceil(tokens / page) * page


def served(plan: dict, tokens_per_request: int, prefix: int) -> int:
    """Requests of this size the pools hold at once, per worker (not capped by the requested count)."""
    cap, page = plan["capacity"], plan["token"]["page_size"]
    t = ceil_pages(tokens_per_request, page)
    k, tokens, spr = cap["max_mamba_cache_size"], cap["max_total_num_tokens"], plan["request"]["slots_per_request"]
    by_tokens = min(max(tokens - prefix, 0) // t, tokens // 2)
    return by_tokens if spr == 0 else min(k // spr, by_tokens)   # no state layers: no state pool to run out of


def serves(plan: dict, concurrent: int, tokens_per_request: int, prefix: int) -> bool:
    attn_dp = plan["parallel"]["attn_dp_size"]
    per_worker = math.ceil(concurrent / attn_dp)
    cap, page = plan["capacity"], plan["token"]["page_size"]
    return (cap["max_running_requests"] >= per_worker
            and cap["max_total_num_tokens"] >= per_worker * ceil_pages(tokens_per_request, page) + prefix
            and (plan["request"]["slots_per_request"] == 0
                 or cap["max_mamba_cache_size"] // plan["request"]["slots_per_request"] >= per_worker))


RATIO_MAX = 1000.0  # the profile's bound on --mamba-full-memory-ratio (le=1000): the search space's edge


def flag_value(flags, name):
    for f in flags:
        if f.startswith(name + " "):
            return f.split(" ", 1)[1]
    return None


def check(profile_arg: str, workload, capsys) -> None:
    """The advice for (profile, workload), judged through `glm-kv plan` and a grid of other splits."""
    prof = load_profile(profile_arg)
    adv = advise(prof, workload)
    d = adv.to_dict()
    assert set(d) >= {"fits", "flags", "binding_limit", "plan", "largest_fitting"}
    T, P, N = workload.sizing_tokens, workload.prefix_cache_tokens, workload.concurrent_requests
    if not adv.flags:
        assert not adv.fits and adv.largest_fitting.concurrent_requests == 0
        check_against_brute_force(prof, adv, {}, T, P, (f"seed {SEED}", profile_arg, workload))
        return
    plan = plan_json(profile_arg, adv.flags, capsys)
    assert plan["capacity"] == d["plan"]["capacity"]
    attn_dp = plan["parallel"]["attn_dp_size"]
    if adv.fits:
        assert adv.largest_fitting is None
        assert serves(plan, N, T, P), (profile_arg, workload, adv.flags)
        assert int(flag_value(adv.flags, "--max-running-requests")) == math.ceil(N / attn_dp) * attn_dp
    else:
        lf = adv.largest_fitting
        assert lf.binding_resource in ("tokens", "mamba", "memory")
        assert serves(plan, lf.concurrent_requests, T, P)
        assert not serves(plan, lf.concurrent_requests + attn_dp, T, P)
    assert served(plan, T, P) == adv.served_per_worker
    check_against_brute_force(prof, adv, parse_launch_command(" ".join([ENTRY, *adv.flags]))[0], T, P,
                              (f"seed {SEED}", profile_arg, workload))


# -- the brute force: every split the flag accepts, in both KV dtypes -------------------------------
#
# Independent of advise's search (its grid, its kernel call, its dtype list): the space is read off
# the profile's own bounds, and every point is planned through the public planning path
# (``load_plan`` with overrides), the requests it serves counted by SGLang's rule as ``served``
# does. Why one point per slot count is the whole space: SGLang sizes the token pool from what the
# mamba pool leaves (rest - (K + 1) x slot - verify scratch(K)), so two values of the flag that give
# the same K per worker give the same pools; the ratio reaches every K from 1 to its value at the
# bound (the budget rest x r / (1 + r) is continuous and increasing in r), and a pinned size reaches
# every K from 1 to the bound / attn_dp, of which only K < rest / slot can leave a token pool.

MAMBA_CACHE_MAX = 1 << 24  # the profile's bound on --max-mamba-cache-size (le=16,777,216)
KNOB_FIELDS = ("mamba_full_memory_ratio", "max_mamba_cache_size")
BACKENDS = {"dsa_prefill_backend": None, "dsa_decode_backend": None}


def try_plan(prof, overrides: dict):
    try:
        return load_plan(prof, overrides)
    except ProfileError:
        return None


def served_by(p, tokens_per_request: int, prefix: int) -> int:
    """``served`` on a typed plan (the same rule; the brute force plans thousands of points)."""
    cap, t, spr = p.capacity, ceil_pages(tokens_per_request, p.token.page_size), p.request.slots_per_request
    by_tokens = min(max(cap.max_total_num_tokens - prefix, 0) // t, cap.max_total_num_tokens // 2)
    return by_tokens if spr == 0 else min(cap.max_mamba_cache_size // spr, by_tokens)


def no_capacity(prof, fixed: dict):
    """The plan without memory (no capacity, so no pool refusal): what the dtype and backends resolve to."""
    return try_plan(prof, {**fixed, "available_bytes": None, "weights_bytes": None, "weights_estimate": False,
                           "memory_bytes": None})


def dtype_fields(prof, fixed: dict) -> dict[str, dict]:
    """Resolved KV dtype -> the fields that select it: the profile's own first, then each dtype
    explicitly with the profile's backends, else with SGLang's defaults for it."""
    base = {k: v for k, v in fixed.items() if k not in ("kv_cache_dtype", *BACKENDS)}
    out: dict[str, dict] = {}
    for extra in ({}, {"kv_cache_dtype": "bfloat16"}, {"kv_cache_dtype": "fp8_e4m3"},
                  {"kv_cache_dtype": "bfloat16", **BACKENDS}, {"kv_cache_dtype": "fp8_e4m3", **BACKENDS}):
        p = no_capacity(prof, {**base, **extra})
        if p is not None and p.token.kv_cache_dtype not in out:
            out[p.token.kv_cache_dtype] = {**base, **extra}
    return out


def any_accepted(prof, fixed: dict, slot_bound: int):
    """One plan the pools accept (its rest and slot bytes hold for every split), else None:
    a few values of the flag, then every pinned slot count up to ``slot_bound`` (the same pools
    as the ratio's, K for K), so None means no split is accepted at all."""
    for r in (0.9, 1.0, 1000.0, 0.1, 10.0, 100.0, 0.01):
        p = try_plan(prof, {**fixed, "mamba_full_memory_ratio": r})
        if p is not None and p.capacity is not None:
            return p
    attn_dp = no_capacity(prof, fixed).parallel.attn_dp_size
    for k in range(1, slot_bound + 2):
        p = try_plan(prof, {**fixed, "max_mamba_cache_size": k * attn_dp})
        if p is not None:
            return p
    return None


def split_space(prof, fixed: dict, tokens_per_request: int, prefix: int) -> dict:
    """Every split the profile's flag accepts at ``fixed`` (the other fields): {K per worker: served}.

    ``{None: served}`` where there is no split to choose (radix cache off, nothing pinned)."""
    fixed = {k: v for k, v in fixed.items() if k not in KNOB_FIELDS}
    stateless = no_capacity(prof, fixed).request.slots_per_request == 0   # no mamba pool: nothing to split
    if stateless or (prof.disable_radix_cache and prof.max_mamba_cache_size is None):
        p = try_plan(prof, fixed)
        return {} if p is None else {None: served_by(p, tokens_per_request, prefix)}
    free = no_capacity(prof, fixed)
    slot, attn_dp = free.request.budget_slot_bytes, free.parallel.attn_dp_size
    # an upper bound on the rest: what the profile gives, or the whole device
    rest_bound = max(prof.available_bytes or 0, free.gpu.memory_bytes, prof.memory_bytes or 0)
    out: dict = {}
    if prof.max_mamba_cache_size is not None:
        # every value 1..MAMBA_CACHE_MAX; v and v' with v // attn_dp == v' // attn_dp are one split.
        # Beyond rest / slot nothing is left for tokens, and K only takes more: stop at the first
        # refusal after an accepted K (the accepted K are contiguous), or at the memory's bound.
        seen = False
        for k in range(1, min(MAMBA_CACHE_MAX // attn_dp, rest_bound // slot + 1) + 1):
            p = try_plan(prof, {**fixed, "max_mamba_cache_size": k * attn_dp})
            if p is None:
                if seen:
                    break
                continue
            seen = True
            assert p.capacity.max_mamba_cache_size == k
            out[k] = served_by(p, tokens_per_request, prefix)
        return out
    p0 = any_accepted(prof, fixed, rest_bound // slot)
    if p0 is None:
        return out
    # SGLang: budget = rest x r / (1 + r); K = (budget - slot) // slot, or under MTP
    # (budget - slot (1 + d)) // (slot (1 + d / spr)). Aim at the middle of each K's budget interval.
    rest, d, spr = p0.capacity.available_bytes, p0.args.verify_state_draft_tokens, p0.request.slots_per_request
    first, step = (slot * (1 + d), slot * (1 + d / spr)) if d else (slot, slot)
    top = math.floor((rest * RATIO_MAX / (1 + RATIO_MAX) - first) / step)
    for k in range(1, top + 1):
        share = (first + (k + 0.5) * step) / rest
        r = RATIO_MAX if share >= RATIO_MAX / (1 + RATIO_MAX) else share / (1 - share)
        p = try_plan(prof, {**fixed, "mamba_full_memory_ratio": r})
        if p is not None:
            assert p.capacity.max_mamba_cache_size == k, ("the brute force missed a split", k, r)
            out[k] = served_by(p, tokens_per_request, prefix)
    p = try_plan(prof, {**fixed, "mamba_full_memory_ratio": RATIO_MAX})
    assert p is None or p.capacity.max_mamba_cache_size == top, ("the bound's split", top)
    return out


def best_of(space: dict) -> int:
    return max(space.values(), default=-1)


def check_against_brute_force(prof, adv, flags_fields: dict, T: int, P: int, where) -> None:
    """advise serves at least what the best split of the space serves, and its pick is in the space.

    The dtype: advise keeps the profile's own while some split of it serves the workload (fp8 is
    advised only where bf16 cannot, ``_dtype_options``). Not fitting, what advise maximises is the
    count m it advises (--max-running-requests m x attn_dp): no split of any dtype serves m + 1
    requests at m + 1 (a split may hold m + 1 at m, where less verify scratch is reserved, and still
    not run them: seed 6 held 34 in fp8 at 33, and nothing holds 34 at 34)."""
    attn_dp = adv.default_plan.parallel.attn_dp_size
    n = adv.requests_per_worker
    own = no_capacity(prof, {}).token.kv_cache_dtype
    dtypes = dtype_fields(prof, flags_fields)
    assert adv.plan.token.kv_cache_dtype in dtypes
    at = lambda dt, mrr: split_space(prof, {**dtypes[dt], "max_running_requests": mrr}, T, P)  # noqa: E731
    if adv.flags:
        mrr = int(flag_value(adv.flags, "--max-running-requests"))
        mine = adv.plan.token.kv_cache_dtype
        space = at(mine, mrr)
        # the pick is a point of the space, within the flag's bounds
        k = adv.plan.capacity.max_mamba_cache_size
        ratio, pinned = flag_value(adv.flags, "--mamba-full-memory-ratio"), flag_value(adv.flags, "--max-mamba-cache-size")
        assert ratio is None or 0 < float(ratio) <= RATIO_MAX, (where, ratio)
        assert pinned is None or 1 <= int(pinned) <= MAMBA_CACHE_MAX, (where, pinned)
        assert (None if adv.knob == "none" else k) in space, (where, "the pick is not in the space", k)
        if adv.fits and mine != own:
            assert best_of(at(own, mrr)) < n, (where, f"{own} serves the workload, advise chose {mine}")
        best = best_of(space)
        assert adv.served_per_worker >= best, (where, "advise is not optimal", adv.served_per_worker, best)
    if not adv.fits:
        m = mrr // attn_dp if adv.flags else 0
        more = max(best_of(at(dt, (m + 1) * attn_dp)) for dt in dtypes)
        assert more < m + 1, (where, f"a split serves {m + 1} requests, advise says at most {m}", more)


WORKLOADS = {
    "long": {"concurrent_requests": 64, "tokens_per_request": 131072},
    "short-many": {"concurrent_requests": 200, "tokens_per_request": 2048},
    "percentiles+prefix": {"concurrent_requests": 24, "tokens_per_request": {"p50": 3000, "p99": 40000},
                           "prefix_cache_tokens": 300000},
    "impossible": {"concurrent_requests": 4096, "tokens_per_request": 1000000},
}


def with_capacity() -> list[str]:
    return [n for n in shipped_profiles() if load_plan(n).capacity is not None]


@pytest.mark.parametrize("workload", sorted(WORKLOADS))
@pytest.mark.parametrize("profile", with_capacity())
def test_every_shipped_profile_with_a_few_workloads(profile, workload, capsys):
    check(profile, make_workload(WORKLOADS[workload]), capsys)


@pytest.mark.parametrize("workload", shipped_workloads())
def test_shipped_workloads_on_the_default_profile(workload, capsys):
    check("worked-example-0.5.23", load_workload(workload), capsys)


def random_case(rng: random.Random, i: int, tmp_path) -> tuple[str, object]:
    gpu = rng.choice(["H100", "H200", "B200", "B300"])
    tp = rng.choice([1, 2, 4, 8])
    dp = rng.choice([d for d in (1, 2, 4, 8) if d <= tp and tp % d == 0])
    prof = {"sglang_layout": rng.choice(["0.5.23", "article"]), "gpu": gpu, "tp_size": tp,
            "dp_size": dp, "enable_dp_attention": dp > 1, "kv_cache_dtype": rng.choice(["auto", "bfloat16", "fp8_e4m3"]),
            "mamba_ssm_dtype": rng.choice(["float32", "bfloat16"]),
            "disable_overlap_schedule": rng.random() < 0.2, "max_running_requests": 64,
            "available_bytes": rng.randrange(8 << 30, 160 << 30)}
    if rng.random() < 0.15:
        prof["max_mamba_cache_size"] = rng.randrange(16, 800) * (dp if dp > 1 else 1)
    if rng.random() < 0.15:
        prof.update(speculative_algorithm="EAGLE", speculative_num_steps=3, speculative_eagle_topk=1,
                    speculative_num_draft_tokens=4, sglang_layout="0.5.23")
        if rng.random() < 0.5:   # a replay ring per state slot instead of the verify scratch
            prof["enable_linear_replayssm_spec"] = True
    if rng.random() < 0.1:
        prof["disable_radix_cache"] = True
    path = tmp_path / f"random-{i}.yaml"
    path.write_text(yaml.safe_dump(prof))
    p50 = rng.choice([512, 2048, 8192, 32768])
    tokens = rng.choice([p50, {"p50": p50, "p99": p50 * rng.choice([2, 4, 8])}])
    work = make_workload({"concurrent_requests": rng.randrange(1, 600), "tokens_per_request": tokens,
                          "prefix_cache_tokens": rng.choice([0, 0, 65536, 1 << 20])})
    return str(path), work


def test_random_profiles_and_workloads(tmp_path, capsys):
    rng = random.Random(SEED)
    n = 0
    for i in range(25):
        profile, work = random_case(rng, i, tmp_path)
        try:
            load_plan(profile)
        except ProfileError:
            continue  # a combination SGLang refuses: nothing to advise
        check(profile, work, capsys)
        n += 1
    assert n >= 10, f"seed {SEED}: too few valid random profiles ({n})"


OTHER_MODELS = {   # model -> (tp_size, available_bytes per rank): without state layers, and hybrids of each family
    "deepseek-v3.2": (8, 40 << 30), "glm-5.1": (8, 30 << 30), "qwen3.5-35b-a3b": (4, 50 << 30),
    "nemotron-3-nano-30b-a3b-bf16": (2, 60 << 30), "kimi-k3": (8, 45 << 30),
}


@pytest.mark.parametrize("workload", sorted(WORKLOADS))
@pytest.mark.parametrize("model", sorted(OTHER_MODELS))
def test_other_models(model, workload, tmp_path, capsys):
    """Issue 31: advise for every model, judged as GLM-5.3-Flash's advice is. DeepSeek-V3.2 and GLM-5.1 have
    no state layer: no split to choose (the advice used to divide by their 0-byte state slot)."""
    tp, avail = OTHER_MODELS[model]
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump({"sglang_layout": "0.5.23", "model": model, "gpu": "H200", "tp_size": tp,
                                    "available_bytes": avail, "max_running_requests": 64}))
    check(str(path), make_workload(WORKLOADS[workload]), capsys)
    adv = advise(load_profile(str(path)), make_workload(WORKLOADS[workload]))
    if adv.plan.request.slots_per_request == 0:
        assert adv.knob == "none" and not any("mamba" in f for f in adv.flags), adv.flags
        assert adv.slots_reserved == adv.slots_resident == adv.slot_headroom == 0
        assert main(["advise", "--profile", str(path), "--workload", "chat"]) == 0
        out = capsys.readouterr().out
        assert "per worker:" in out and "state slots" not in out and "mamba" not in out, out


# -- known answers, derived by hand -----------------------------------------------------------------

def test_worked_example_long_context_by_hand():
    """Rest 100 GiB, fp8 scaled (cell 6,171 B), fp32 slot 147,619,840 B, 5 slots per request.

    One 131,072-token request costs 5 x 147,619,840 + 131,072 x 6,171 = 1,546,954,112 B, and the pool
    keeps one padding slot: (107,374,182,400 - 147,619,840) / 1,546,954,112 = 69.3 -> 69 requests at
    the best split. SGLang's default 0.9 gives min(343 // 5, 9,170,688 // 131,072) = 68.
    """
    adv = advise(load_profile("worked-example-0.5.23"), make_workload(WORKLOADS["long"]))
    assert adv.fits and adv.served_per_worker == 69 and adv.served_per_worker_default == 68
    assert adv.flags[1] == "--max-running-requests 64"


REPLAYSSM = {"speculative_algorithm": "EAGLE", "speculative_num_steps": 3, "speculative_eagle_topk": 1,
             "speculative_num_draft_tokens": 4, "enable_linear_replayssm_spec": True}


def test_a_pin_the_count_refuses_is_not_a_limit(tmp_path, capsys):
    """CI's seed 1873192043: the profile pins --max-mamba-cache-size 781 under EAGLE; at 80 requests its
    slots leave no token (SGLang refuses the pin), so advise stopped at 79, where a smaller pin serves
    111 at 80 (the brute force's split space). The pin is advise's knob: a smaller one stands in."""
    path = tmp_path / "pinned.yaml"
    path.write_text(yaml.safe_dump({
        "sglang_layout": "0.5.23", "gpu": "H100", "tp_size": 1, "kv_cache_dtype": "fp8_e4m3",
        "disable_overlap_schedule": True, "available_bytes": 163202202089, "max_mamba_cache_size": 781,
        "max_running_requests": 64, "speculative_algorithm": "EAGLE", "speculative_num_steps": 3,
        "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4}))
    work = make_workload({"concurrent_requests": 411, "tokens_per_request": {"p50": 8192, "p99": 65536}})
    check(str(path), work, capsys)
    adv = advise(load_profile(str(path)), work)
    assert not adv.fits and adv.largest_fitting.concurrent_requests > 80, adv.flags


def test_replayssm_ring_is_part_of_every_slot_by_hand(capsys):
    """The brute force's find: under --enable-linear-replayssm-spec a state slot costs the mamba
    budget 147,619,840 B + its replay ring 53,616,640 B = 201,236,480 B; advise sized the ring-less
    slot, so it believed ratio 2.55 gives K = 521 where SGLang gives 382, and advised 76 requests.

    Rest 100 GiB = 107,374,182,400 B, cell 6,732 B (fp8 KV + indexer + the MTP draft layer), page
    256, 5 slots per request, no verify scratch (the ring replaces it). 24 requests of p99 40,000
    tokens (157 pages = 40,192) beside 300,000 prefix tokens; tokens(K) = (rest - (K + 1) x
    201,236,480) // 6,732 // 256 x 256. K = 410: 3,663,872 tokens, min(410 // 5, 3,363,872 //
    40,192) = min(82, 83) = 82; K = 413: min(82, 81) = 81; K = 409: min(81, 84) = 81. The best is
    82 (K 410..412); at K = 382 (the old pick): min(76, 104) = 76.
    """
    prof = load_profile("worked-example-0.5.23", REPLAYSSM)
    assert load_plan(prof).request.budget_slot_bytes == 201_236_480
    work = make_workload(WORKLOADS["percentiles+prefix"])
    adv = advise(prof, work)
    assert adv.fits and adv.served_per_worker == 82
    assert 410 <= adv.plan.capacity.max_mamba_cache_size <= 412
    # what the report says the state needs: 24 requests x 5 slots x 201,236,480 B, ring included
    assert adv.state_bytes_needed == 24 * 5 * 201_236_480 == 24_148_377_600
    # and the long workload no longer trips advise's own re-plan check (it raised before)
    long = advise(prof, make_workload(WORKLOADS["long"]))
    assert not long.fits and long.served_per_worker >= 1


def test_the_ratio_bound_is_a_split_of_its_own_by_hand(tmp_path):
    """Issue 19's case (seed 424242 of the earlier random generator), written out.

    H200 TP 2, DP-attention 2, bf16 KV (cell 12,684 B, page 256), fp32 state slot 147,619,840 B,
    5 slots per request, MTP verify scratch of 4 draft tokens; rest 80,536,542,847 B. SGLang:
    K = (rest x r / (1 + r) - 5 slot) // (1.8 slot) = (budget - 738,099,200) // 265,715,712, so
    K = 300 needs a budget of 80,452,812,800 B: r >= 966.9. At r = 1,000, K = 300, scratch
    147,619,840 x (min(12, 60) + 1) x 4 = 7,676,231,680 B, tokens (rest - scratch - 301 slot) //
    12,684 // 256 x 256 = 2,241,024, and 12 requests per worker of 32,768 tokens beside 65,536
    cached are served min(300 // 5, 2,175,488 // 32,768) = min(60, 66) = 60. A grid uniform in
    the share that stops at its last point below the bound (r = 747, K = 299) serves 59.
    """
    prof = {"sglang_layout": "0.5.23", "gpu": "H200", "tp_size": 2, "dp_size": 2, "enable_dp_attention": True,
            "kv_cache_dtype": "auto", "mamba_ssm_dtype": "float32", "max_running_requests": 64,
            "available_bytes": 80_536_542_847, "speculative_algorithm": "EAGLE", "speculative_num_steps": 3,
            "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4}
    path = tmp_path / "issue19.yaml"
    path.write_text(yaml.safe_dump(prof))
    adv = advise(load_profile(str(path)),
                 make_workload({"concurrent_requests": 23, "tokens_per_request": 32768, "prefix_cache_tokens": 65536}))
    assert adv.fits and adv.served_per_worker == 60 and adv.plan.capacity.max_mamba_cache_size == 300
    assert 966.9 <= float(flag_value(adv.flags, "--mamba-full-memory-ratio")) <= RATIO_MAX
    assert adv.plan.capacity.max_total_num_tokens == 2_241_024


def test_not_fitting_walks_every_kv_dtype_by_hand(tmp_path, capsys):
    """Seed 1829838217's random-11: advise said 44 requests (bf16) where fp8 KV serves 68.

    H100 TP 4, DP-attention 2, KV auto (bf16, cell 12,684 B; fp8 6,732 B; page 256), fp32 slot
    73,809,920 B, 4 slots per request (extra_buffer, overlap off), EAGLE verify scratch of 4 draft
    tokens holding min(m, K // 4) + 1 slots, --max-mamba-cache-size 472 pinned (K = 236 per
    worker); rest 31,285,088,662 B. 504 requests of p99 16,384 tokens beside 1,048,576 cached.
    At the workload's 252 per worker both dtypes are refused: scratch 60 x 4 slot + pool 237 slot
    = 35,207,331,840 B > rest. With K = 4m (the least that holds m; more K only takes tokens):
    scratch + pool = (4 (m + 1) + 4m + 1) slot = (8m + 5) slot, tokens = (rest - that) // cell
    // 256 x 256, served = min(K // 4, (tokens - 1,048,576) // 16,384).
    bf16: m = 22: 17,925,493,142 B, 1,413,120 tokens, 364,544 // 16,384 = 22, served 22;
          m = 23: 17,335,013,782 B, 1,366,528 tokens, 317,952 // 16,384 = 19 < 23.
    fp8:  m = 34: 277 slot = 20,445,347,840 B, 10,839,740,822 B left, 1,609,984 tokens,
          561,408 // 16,384 = 34, served 34 (K 137 already serves 33: 1,598,976 tokens);
          m = 35: 285 slot, 10,249,261,462 B, 1,522,432 tokens, 473,856 // 16,384 = 28 < 35.
    So the largest fitting is 34 per worker = 68 global, in fp8, at K = 136 (flag 272); the
    old advise kept bf16 (both dtypes tied at "refused" at 252) and walked it to 22 (44 global).
    """
    prof = {"available_bytes": 31_285_088_662, "disable_overlap_schedule": True, "dp_size": 2,
            "enable_dp_attention": True, "gpu": "H100", "kv_cache_dtype": "auto", "mamba_ssm_dtype": "float32",
            "max_mamba_cache_size": 472, "max_running_requests": 64, "sglang_layout": "0.5.23",
            "speculative_algorithm": "EAGLE", "speculative_num_steps": 3, "speculative_eagle_topk": 1,
            "speculative_num_draft_tokens": 4, "tp_size": 4}
    path = tmp_path / "random-11.yaml"
    path.write_text(yaml.safe_dump(prof))
    work = make_workload({"concurrent_requests": 504, "tokens_per_request": {"p50": 8192, "p99": 16384},
                          "prefix_cache_tokens": 1 << 20})
    p = load_profile(str(path))
    # the plan at the hand's points (the engine's pools, not advise's choice)
    for over, tokens in (({"max_running_requests": 44, "max_mamba_cache_size": 176}, 1_413_120),
                         ({"max_running_requests": 46, "max_mamba_cache_size": 184}, 1_366_528),
                         ({"kv_cache_dtype": "fp8_e4m3", "max_running_requests": 70, "max_mamba_cache_size": 280},
                          1_522_432)):
        assert load_plan(p, over).capacity.max_total_num_tokens == tokens, over
    for dtype in ("bfloat16", "fp8_e4m3"):
        with pytest.raises(ProfileError):
            load_plan(p, {"kv_cache_dtype": dtype, "max_running_requests": 504})
    adv = advise(p, work)
    assert not adv.fits
    assert adv.flags == ("--max-mamba-cache-size 272", "--max-running-requests 68", "--kv-cache-dtype fp8_e4m3")
    assert adv.largest_fitting.concurrent_requests == 68 and adv.served_per_worker == 34
    # the JSON and the note say the same (252 per worker x 16,384 paged tokens + 1,048,576 cached = 5,177,344)
    d = adv.to_dict()
    assert (d["served_per_worker"], d["tokens_needed_per_worker"]) == (34, 5_177_344)
    assert any(n.startswith("does not fit: at most 68 requests of 16384 tokens, or 504 requests of")
               for n in adv.notes), adv.notes
    cap = adv.plan.capacity
    assert (cap.max_mamba_cache_size, cap.spec_scratch_bytes, cap.token_pool_budget_bytes,
            cap.max_total_num_tokens) == (136, 10_333_388_800, 10_839_740_822, 1_609_984)
    check(str(path), work, capsys)


def test_state_pool_cap_of_the_issue_is_lifted():
    """--max-mamba-cache-size 64 at 5 slots per request serves 12 requests, not 16 (issue 14)."""
    prof = load_profile("worked-example-0.5.23", {"max_mamba_cache_size": 64})
    adv = advise(prof, make_workload({"concurrent_requests": 16, "tokens_per_request": 4096}))
    assert adv.served_per_worker_default == 12
    assert adv.fits and adv.knob == "max_mamba_cache_size"
    assert int(flag_value(adv.flags, "--max-mamba-cache-size")) >= 16 * 5


def test_radix_cache_off_leaves_only_the_request_count(capsys):
    """Without the radix cache the mamba pool holds exactly the requests: no split to choose."""
    prof_arg = "worked-example-0.5.23"
    prof = load_profile(prof_arg, {"disable_radix_cache": True})
    adv = advise(prof, make_workload({"concurrent_requests": 100, "tokens_per_request": 32768}))
    assert adv.knob == "none" and adv.flags == ("--max-running-requests 100",)
    assert adv.fits and adv.plan.capacity.max_mamba_cache_size == 100


def test_dp_attention_divides_the_global_counts(capsys):
    """h200-0.5.23 runs 8 DP-attention workers: 100 requests need 13 per worker, flag 104."""
    adv = advise(load_profile("h200-0.5.23"), make_workload({"concurrent_requests": 100, "tokens_per_request": 8192}))
    assert adv.requests_per_worker == 13 and "--max-running-requests 104" in adv.flags
    assert adv.plan.capacity.max_running_requests_per_worker == 13


def test_bf16_that_cannot_fit_gets_fp8(capsys):
    prof = load_profile("worked-example-0.5.23", {"kv_cache_dtype": "bfloat16"})
    assert load_plan(prof).token.kv_cache_dtype == "bfloat16"
    work = make_workload({"concurrent_requests": 64, "tokens_per_request": 131072})
    adv = advise(prof, work)
    assert adv.fits and "--kv-cache-dtype fp8_e4m3" in adv.flags
    # and bf16 really does not: no split of bf16 holds 64 such requests
    space = split_space(prof, {"max_running_requests": 64}, 131072, 0)
    assert len(space) > 300 and best_of(space) < 64


def test_host_tier_fits_the_budget(capsys):
    adv = advise(load_profile("h200-0.5.23"), load_workload("agent-hicache"))
    h = adv.host
    assert h is not None and h.hicache_ratio and "--enable-hierarchical-cache" in adv.flags
    plan = plan_json("h200-0.5.23", adv.flags, capsys)
    host = plan["host"]
    total = host.get("total_bytes") or host["total_host_bytes"]
    budget = (2_000_000_000_000 - (10 << 30)) // 8 * 0.8   # RAM - SGLang's reserve, 8 ranks, fraction 0.8
    assert total <= budget
    # a hundredth more ratio would not fit: the advice uses the budget
    more = load_plan(load_profile("h200-0.5.23"), {"enable_hierarchical_cache": True, "hicache_ratio": h.hicache_ratio + 0.02,
                                                   "mamba_full_memory_ratio": float(flag_value(adv.flags, "--mamba-full-memory-ratio")),
                                                   "max_running_requests": 32}).host
    assert (more.total_bytes or more.total_host_bytes) > budget
    assert (h.prefixes_by_kv, h.prefixes_by_mamba) == (host["kv_host_tokens"] // 65536, host["mamba_host_slots"])


# -- answers when nothing fits, and refusals --------------------------------------------------------

def test_impossible_workload_gets_a_clear_answer(capsys):
    assert main(["advise", "--profile", "worked-example-0.5.23", "--workload", "batch-1m"]) == 0
    out = capsys.readouterr().out
    assert "does NOT fit" in out and "binding: tokens" in out and "Largest that fits" in out
    assert main(["advise", "--profile", "worked-example-0.5.23", "--workload", "batch-1m", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["fits"] is False and d["binding_limit"] == "tokens"
    assert d["largest_fitting"]["concurrent_requests"] >= 1
    assert d["largest_fitting"]["tokens_per_request"] == 0   # 1,024 x 5 state slots alone exceed 100 GiB


def test_state_bound_impossible_workload():
    adv = advise(load_profile("worked-example-0.5.23"),
                 make_workload({"concurrent_requests": 2000, "tokens_per_request": 256}))
    assert not adv.fits and adv.largest_fitting.binding_resource == "mamba"


def test_not_one_request_fits():
    adv = advise(load_profile("worked-example-0.5.23", {"available_bytes": 2 << 30}),
                 make_workload({"concurrent_requests": 1, "tokens_per_request": 10_000_000}))
    assert not adv.fits and adv.flags == () and adv.largest_fitting.concurrent_requests == 0


def test_profile_without_capacity_is_refused_naming_the_field(capsys):
    # weights estimated by default (issue 29): only a profile that turns the estimate off has no capacity
    assert main(["advise", "--profile", "tp8", "--workload", "chat", "--set", "weights_estimate=false"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("glm-kv: error: available_bytes:")


def test_profile_without_weights_is_advised_on_the_estimate(capsys):
    """tp8 states no weights: advise sizes it on the engine's estimate, the same one `plan` uses."""
    from glm_kv.ledgers.plan import compute_plan

    assert main(["advise", "--profile", "tp8", "--workload", "chat", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    plan = compute_plan(load_profile("tp8"))
    assert d["plan"]["capacity"]["weights_bytes_source"] == "estimate"
    assert d["plan"]["capacity"]["weights_bytes"] == plan.memory.weights_bytes > 0


def test_set_reaches_both_workload_and_profile(capsys):
    assert main(["advise", "--profile", "worked-example-0.5.23", "--set", "concurrent_requests=8",
                 "--set", "tokens_per_request=4096", "--set", "mamba_ssm_dtype=bfloat16", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["workload"]["concurrent_requests"] == 8 and d["plan"]["request"]["temporal_dtype"] == "bfloat16"


# -- the check can fail ------------------------------------------------------------------------------

def test_a_corrupted_kernel_is_caught(monkeypatch):
    """An advise that believes in 3% more tokens than SGLang sizes is caught by its own re-plan."""
    real = advise_module.pool_sizes

    def generous(*a, **k):
        out = dict(real(*a, **k))
        out["max_total_num_tokens"] = (np.asarray(out["max_total_num_tokens"]) * 103) // 100
        return out

    monkeypatch.setattr(advise_module, "pool_sizes", generous)
    # just beyond the true limit: 70 requests of 131,072 tokens do not fit (69 do, by hand above)
    with pytest.raises(AssertionError, match="serve"):
        advise(load_profile("worked-example-0.5.23"),
               make_workload({"concurrent_requests": 70, "tokens_per_request": 131072}))


# -- hybrid SWA (issue 32): the SWA pool counts too, and --swa-full-tokens-ratio is the split -----------------
SWA_EVICTION = 128   # envs.SGLANG_SWA_EVICTION_INTERVAL's default in the 0.5.23 wheel (environ.py)
SWA_CHUNK = 8192     # the profiles below state --chunked-prefill-size, so no GPU default is read here


def served_swa(plan: dict, tokens_per_request: int, prefix: int) -> int:
    """``served``, and what the SWA pool holds at once, as SGLang's compute_swa_request_cap accounts for it
    (pool_configurator.py, written out): a running request holds at most window + eviction interval + a padding
    page + one decode page (its own paged tokens when fewer); beside them two prefill chunks (overlap on) and a
    page."""
    tok, cap = plan["token"], plan["capacity"]
    page = tok["page_size"]
    t = ceil_pages(tokens_per_request, page)
    per = min(tok["sliding_window_size"] + SWA_EVICTION + 2 * page, t)
    by_swa = max(cap["swa_max_total_num_tokens"] - (2 * SWA_CHUNK + page), 0) // per
    return min(served(plan, tokens_per_request, prefix), by_swa)


SWA_CASES = [   # (available bytes per rank, concurrent requests, tokens per request)
    (50 << 30, 64, 32768), (50 << 30, 4000, 512), (20 << 30, 3000, 2048), (5 << 30, 300, 8192),
    (50 << 30, 20000, 300),
]


@pytest.mark.parametrize("avail, n, t", SWA_CASES, ids=[f"{a >> 30}GiB-{n}x{t}" for a, n, t in SWA_CASES])
def test_gpt_oss_advice_counts_the_swa_pool_and_picks_the_best_ratio(tmp_path, capsys, avail, n, t):
    """The advice re-planned through `glm-kv plan --sglang-args` serves what it says (full and SWA pool), and
    no --swa-full-tokens-ratio on the flag's hundredths serves more of the workload (bfloat16 KV, the
    profile's own dtype: every case here fits in it or is judged by the largest count it serves)."""
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump({"sglang_layout": "0.5.23", "model": "gpt-oss-120b", "gpu": "H200", "tp_size": 8,
                                    "available_bytes": avail, "chunked_prefill_size": SWA_CHUNK,
                                    "kv_cache_dtype": "bfloat16"}))
    work = make_workload({"concurrent_requests": n, "tokens_per_request": t})
    adv = advise(load_profile(str(path)), work)
    plan = plan_json(str(path), adv.flags, capsys)
    assert adv.served_per_worker == served_swa(plan, t, 0), adv.flags
    best = 0
    for i in range(1, 101):
        p = try_plan(str(path), {"swa_full_tokens_ratio": i / 100, "max_running_requests": n})
        if p is not None:
            best = max(best, served_swa(p.to_dict(), t, 0))
    if adv.fits:
        assert adv.knob == "swa_full_tokens_ratio" and served_swa(plan, t, 0) >= n, adv.flags
    else:
        assert best <= adv.largest_fitting.concurrent_requests or any(f.startswith("--kv-cache-dtype") for f in adv.flags)
    assert adv.served_per_worker >= min(best, n), (best, adv.flags)


def test_gpt_oss_request_cap_pool_is_one_point():
    """--max-running-requests with the radix cache off: SGLang sizes the SWA pool from the cap (no ratio to
    choose); the advice keeps it and the SWA pool holds the requests by construction."""
    prof = load_profile("h200-0.5.23", {"model": "gpt-oss-120b", "tp_size": 8, "available_bytes": 50 << 30,
                                        "max_running_requests": 64, "disable_radix_cache": True,
                                        "dp_size": 1, "enable_dp_attention": False})
    adv = advise(prof, make_workload({"concurrent_requests": 64, "tokens_per_request": 32768}))
    assert adv.fits and adv.knob == "none" and not any("swa" in f for f in adv.flags), adv.flags


def test_a_planted_advice_blind_to_the_swa_pool_is_caught(tmp_path, capsys, monkeypatch):
    """Planted: the requests served counted on the full pool only (the SWA pool's term dropped, as before issue
    32): the ratio grid's best is then its smallest ratio, whose SWA pool holds ~400 of the 4,000 short
    requests, and the judge's count of the re-planned flags differs from the advice's."""
    real = advise_module.served_requests
    monkeypatch.setattr(advise_module, "served_requests", lambda *a, **k: real(
        *a, **{x: v for x, v in k.items() if not x.startswith("swa_")}))
    with pytest.raises(AssertionError, match="served_per_worker"):
        test_gpt_oss_advice_counts_the_swa_pool_and_picks_the_best_ratio(tmp_path, capsys, 50 << 30, 4000, 512)
