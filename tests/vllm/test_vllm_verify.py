"""glm-kv's vLLM verify (glm_kv/ledgers/vllm_verify.py) on the lines vLLM 0.33.0 itself printed.

The oracle (oracle.py ``_vllm_log``) collects what vLLM's loggers emit while it sizes a launch, through
vLLM's own formatter: ``update_kv_cache_capacity``'s ``GPU KV cache size: ... tokens, Maximum concurrency
for ... tokens per request: ...x`` (the line the engine core prints at boot), and
``get_kv_cache_configs``'s own lines when a launch triggers them. Those lines are fed to glm-kv's verify
with glm-kv's own plan (never the oracle's numbers), over the launches this suite already runs
(anchors, this run's random launches, the pinned B200, found, MTP, no-hybrid-manager and DCP launches,
the memory pair):

* with the launch's --kv-cache-memory-bytes every checked quantity must agree, tokens exactly;
* with the memory read off the log instead (an ``Available KV cache memory: %s GiB`` line composed from
  the 0.33.0 format string, v1/worker/gpu_worker.py:772-775, with vLLM's ``format_gib`` rounding of the
  launch's memory: the profile run that prints it cannot run here), the logged counts must lie in the
  range the plan gives over that 0.01 GiB;
* a planted error, the plan one block short (the memory less one block's bytes), must DISAGREE on
  ``GPU KV cache size`` (and the verdict must be not ok).
"""
from __future__ import annotations

from dataclasses import replace

import pytest

from glm_kv.inputs.vllm_boot_log import parse_vllm_boot_log
from glm_kv.ledgers.vllm import NotModelled, VllmArgs, vllm_plan as glm_kv_vllm_plan
from glm_kv.ledgers.vllm_verify import format_gib, verify_vllm_boot_log
from tests.vllm.test_glm_kv_plan import B200, DCP, FOUND, HARNESS_ONLY, MTP, NO_HMA, config_of
from tests.vllm.test_oracle import ANCHORS, MODELS, RANDOM_PER_MODEL, anchor_launch, memory_pair, seeded_launch

def _answered(launch: dict) -> bool:
    """glm-kv plans it (not a refusal, not NotModelled): test_glm_kv_plan.py checks vLLM answers the same."""
    try:
        return glm_kv_vllm_plan(config_of(launch), VllmArgs.from_launch(launch)).refused is None
    except NotModelled:
        return False


LAUNCHES = ([("anchor", anchor_launch(m, o)) for m, o, _, _ in ANCHORS]
            + [(f"random-{m}-{i}", None) for m in MODELS for i in range(RANDOM_PER_MODEL)]
            + [(f"found-{i}", FOUND[i]) for i in range(len(FOUND))]
            + [(f"b200-{i}", B200[i]) for i in range(len(B200))]
            # those vLLM answers (its refusals print no boot line): not Kimi-K3's MTP without MTP layers, nor
            # the hybrids without the hybrid manager
            + [(f"mtp-{i}", MTP[i]) for i in range(len(MTP))
               if MTP[i]["model"] != "kimi-k3" or "config_overrides" in MTP[i]]
            + [(f"no-hma-{i}", NO_HMA[i]) for i in range(len(NO_HMA)) if NO_HMA[i]["model"] in ("deepseek-v3.2", "glm-5.1")]
            # the DCP launches vLLM answers (test_glm_kv_plan.py checks that glm-kv refuses exactly where vLLM does)
            + [(f"dcp-{i}", DCP[i]) for i in range(len(DCP)) if _answered(DCP[i])]
            + [(f"memory-{i}", None) for i in range(2)])


def _launch(which: str, fixed: dict | None) -> dict:
    if fixed is not None:
        return fixed
    if which.startswith("random-"):
        model, i = which[len("random-"):].rsplit("-", 1)
        return seeded_launch(model, int(i))
    return memory_pair()[int(which.rsplit("-", 1)[1])]


def _ids() -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for which, launch in LAUNCHES:
        name = which if launch is None else f"{which}-{launch['model']}-{launch['gpu']}-tp{launch['tp']}"
        seen[name] = seen.get(name, 0) + 1
        out.append(name if seen[name] == 1 else f"{name}-{seen[name]}")
    return out


def vllm_lines_and_args(vllm_plan, which: str, fixed: dict | None) -> tuple[dict, list[str], VllmArgs]:
    launch = _launch(which, fixed)
    theirs = vllm_plan(launch)
    if "refused" in theirs:
        if HARNESS_ONLY.fullmatch(theirs["refused"]["message"]):
            pytest.xfail(f"the oracle cannot size {launch} (one-process world)")
        pytest.skip(f"vLLM refuses {launch}: no boot line to verify ({theirs['refused']['message'][:120]})")
    args = VllmArgs.from_launch(launch)
    try:
        glm_kv_vllm_plan(config_of(launch), args)
    except NotModelled as e:
        pytest.xfail(f"glm-kv does not model {e} (launch {launch})")
    return launch, theirs["vllm_log"], args


@pytest.mark.parametrize("which,fixed", LAUNCHES, ids=_ids())
def test_glm_kv_verify_agrees_with_the_lines_vllm_printed(vllm_plan, which, fixed):
    launch, lines, args = vllm_lines_and_args(vllm_plan, which, fixed)
    log = parse_vllm_boot_log("\n".join(lines), "<vLLM 0.33.0's own log>")
    assert log.of("kv_capacity"), f"vLLM printed no capacity line for {launch}: {lines}"
    assert all(ln.process == "EngineCore" and ln.source_file.startswith("kv_cache_utils.py:")
               for ln in log.of("kv_capacity")), lines
    cfg = config_of(launch)

    # 1. the launch's memory: every quantity exact
    res = verify_vllm_boot_log(cfg, args, log)
    checked = [r for r in res.rows if r.ok is not None]
    bad = [r for r in checked if not r.ok]
    assert res.ok and not bad and len(checked) >= 4, (launch, lines, bad)
    assert {r.quantity for r in checked} >= {"GPU KV cache size", "Maximum concurrency",
                                             "max_model_len (tokens per request)"}
    if args.num_gpu_blocks_override is None:
        assert all(r.predicted_range is None for r in checked), "exact memory, exact prediction"

    # 2. the memory read off the log (as vLLM prints it after a profile run), the same vLLM lines
    mem_line = (f"(Worker_TP0 pid=1) INFO 01-01 00:00:00 [gpu_worker.py:772] Available KV cache memory: "
                f"{format_gib(args.kv_cache_memory_bytes)} GiB")
    from_log = verify_vllm_boot_log(cfg, replace(args, kv_cache_memory_bytes=0),
                                    parse_vllm_boot_log("\n".join([mem_line, *lines])))
    bad = [r for r in from_log.rows if r.ok is False]
    assert from_log.ok and not bad, (launch, lines, bad)
    assert from_log.inputs_from_log["kv_cache_memory_gib"] == format_gib(args.kv_cache_memory_bytes)
    lo, hi = from_log.inputs_from_log["kv_cache_memory_bytes_range"]
    assert lo <= args.kv_cache_memory_bytes <= hi

    # 3. planted error: a plan one block short must disagree on the token count
    if args.num_gpu_blocks_override is None:
        short = replace(args, kv_cache_memory_bytes=args.kv_cache_memory_bytes - res.plan.bytes_per_block)
        wrong = verify_vllm_boot_log(cfg, short, log)
        assert not wrong.ok, (launch, wrong.rows)
        rows = {r.quantity: r for r in wrong.rows}
        assert rows["GPU KV cache size"].ok is False, rows["GPU KV cache size"]
        assert "blocks" in rows["GPU KV cache size"].note, rows["GPU KV cache size"].note


def launches_of(item) -> list[dict]:
    """The launches these tests ask for (conftest.py queues them; the other modules ask for the same ones,
    so each runs once per session)."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    if "which" in params:
        return [_launch(params["which"], params["fixed"])]
    return []
