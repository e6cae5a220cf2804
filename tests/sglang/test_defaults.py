"""Issue 19.3 and 19.7: a profile field the user omits takes SGLang 0.5.23's value; every choice
field accepts exactly SGLang 0.5.23's argparse choices.

Both sides are read here, independently: SGLang's from the wheel (``ServerArgs.add_cli_args``'s
argparse actions, and ``ServerArgs(model_path=...)`` resolved by ``resolve_once`` on a fake H200,
the way ``oracle.resolve_for_sizing`` does for the agreement suite); glm-kv's from an empty
profile (``make_profile({})``) and its one resolution step (``glm_kv.inputs.resolve.resolve``)
and memory ledger. Every field of glm-kv's table is classified: an SGLang flag (compared), an
SGLang environment variable (compared with ``envs``' default), or glm-kv's own (with why).
Runs only in ``.venv-sglang`` (tests/sglang/conftest.py).
"""
from __future__ import annotations

import argparse

import pytest

from glm_kv.inputs import profile as profile_module
from glm_kv.inputs.profile import FIELDS, NOT_MODELLED, make_profile

# glm-kv field -> SGLang's ServerArgs name (the same unless listed)
SGLANG_NAME = {"mamba_scheduler_strategy": "mamba_radix_cache_strategy"}
# glm-kv field -> the SGLang environment variable it stands for
ENV_FIELDS = {"mamba_skip_decode_lock": "SGLANG_OPT_MAMBA_SKIP_DECODE_LOCK",
              "allow_overwrite_longer_context_len": "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN"}
# glm-kv's own fields: not server arguments, so SGLang has no default for them
GLM_KV_ONLY = {
    "name": "the profile's label", "description": "the profile's prose", "model": "which config.json",
    "sglang_layout": "which SGLang glm-kv models (0.5.23 by default: the release)",
    "gpu": "SGLang measures the GPU; glm-kv needs it named",
    "memory_bytes": "a GPU not in glm-kv's table", "sm": "a GPU not in glm-kv's table",
    "available_bytes": "SGLang measures it", "weights_bytes": "SGLang measures it after loading",
    "pre_model_load_bytes": "SGLang measures it", "host_memory_bytes": "SGLang reads psutil",
    "ranks_per_host": "SGLang counts its processes",
    "weights_estimate": "glm-kv estimates weights from the model; SGLang loads and measures them",
    "draft_weights_bytes": "SGLang measures the draft after loading it",
}


def glm_kv_resolved() -> dict:
    """What glm-kv runs with when every field is omitted: the profile default, or where the
    profile leaves a field to SGLang (None), the value glm-kv's resolution gives it."""
    from glm_kv.inputs.resolve import resolve
    from glm_kv.ledgers.memory import gpu_defaults
    from glm_kv.ledgers.plan import compute_plan

    p = make_profile({})
    args = resolve(p)
    # the ledgers and the fraction only: one H200 at tp 1 cannot hold the model's estimated weights
    plan = compute_plan(make_profile({"weights_estimate": False}))
    out = p.model_dump()
    chunk, _ = gpu_defaults(args.gpu.memory_bytes / (1 << 20), p.tp_size)
    out.update(kv_cache_dtype=args.kv_cache_dtype, dsa_prefill_backend=args.dsa_prefill_backend,
               dsa_decode_backend=args.dsa_decode_backend, mamba_scheduler_strategy=args.mamba_strategy,
               page_size=args.page_size, context_length=args.context_length,
               max_running_requests=args.max_running_requests_global,
               mem_fraction_static=plan.memory.mem_fraction_static,
               chunked_prefill_size=p.chunked_prefill_size if p.chunked_prefill_size is not None else chunk)
    return out


def sglang_resolved(fields) -> dict:
    """SGLang 0.5.23's value for each field when no flag is given (model path only, fake H200)."""
    from cpu_workarounds import cpu_as_gpu
    from oracle import fake_gpu, resolve_for_sizing, shipped_config
    from sglang.srt.configs.mamba_utils import mamba2_state_dtype
    from sglang.srt.runtime_context import get_schedule

    with cpu_as_gpu(fake_gpu({"gpu": "H200"})):   # glm-kv's default GPU, named for SGLang's fake device
        r = resolve_for_sizing(shipped_config(), {})
        schedule = get_schedule()
        out = {}
        for f in fields:
            out[f] = getattr(r.v, SGLANG_NAME.get(f, f))
        # resolved later than ServerArgs, by the code that uses them
        out["mamba_full_memory_ratio"] = schedule.mamba_full_memory_ratio   # Arg fallback 0.9
        out["swa_full_tokens_ratio"] = schedule.swa_full_tokens_ratio       # Arg fallback 0.8 (issue 32)
        out["context_length"] = r.mc.context_len                              # ModelConfig
        ssm = mamba2_state_dtype(r.mc.hf_config).temporal                      # config, else float32
        out["mamba_ssm_dtype"] = str(ssm).removeprefix("torch.")
    return out


def sglang_argparse() -> dict:
    from sglang.srt.server_args import ServerArgs

    parser = argparse.ArgumentParser()
    ServerArgs.add_cli_args(parser)
    return {a.dest: a for a in parser._actions}


def sglang_fields() -> list[str]:
    return [f for f in FIELDS if f not in GLM_KV_ONLY and f not in ENV_FIELDS]


def default_mismatches(ours: dict, theirs: dict) -> list[str]:
    return [f"{f}: glm-kv {ours[f]!r}, SGLang 0.5.23 {theirs[f]!r}"
            for f in sglang_fields() if ours[f] != theirs[f]]


def test_every_field_is_classified(sglang_ready):
    actions = sglang_argparse()
    for f in sglang_fields():
        assert SGLANG_NAME.get(f, f) in actions, f"{f}: not an SGLang 0.5.23 flag; classify it here"
    for f in GLM_KV_ONLY:
        assert f not in actions, f"{f} is an SGLang flag: compare its default"


def test_omitted_fields_take_sglang_0523_values(sglang_ready):
    bad = default_mismatches(glm_kv_resolved(), sglang_resolved(sglang_fields()))
    assert not bad, "defaults that are not SGLang 0.5.23's:\n" + "\n".join(bad)


def test_environment_defaults(sglang_ready, monkeypatch):
    from sglang.srt.environ import envs

    p = make_profile({})
    for f, var in ENV_FIELDS.items():
        monkeypatch.delenv(var, raising=False)
        assert bool(getattr(envs, var).get()) is getattr(p, f), (f, var)


def test_a_planted_article_default_is_caught(sglang_ready, monkeypatch):
    """Put the article's 64 back as max_running_requests' default: the comparison names it."""
    import dataclasses

    spec = FIELDS["max_running_requests"]
    monkeypatch.setitem(profile_module.FIELDS, "max_running_requests", dataclasses.replace(spec, default=64))
    bad = default_mismatches(glm_kv_resolved(), sglang_resolved(sglang_fields()))
    assert any(b.startswith("max_running_requests:") for b in bad), bad


# --- choices (19.7): exactly SGLang's, modelled or refused as "not modelled" ----------------------

def glm_kv_choices(field: str) -> set:
    """Every spelling the profile takes (its choices and aliases) or refuses as not modelled."""
    spec = FIELDS[field]
    return set(spec.choices) | {a for a, _ in spec.aliases} | set(NOT_MODELLED.get(field, ()))


def sglang_choices(field: str, actions: dict) -> set | None:
    if field == "speculative_algorithm":   # no argparse choices: SpeculativeAlgorithm.from_string
        from sglang.srt.speculative.spec_info import SpeculativeAlgorithm
        from sglang.srt.speculative.spec_registry import _RESERVED_ALIASES

        return {m.name for m in SpeculativeAlgorithm if m.name != "NONE"} | set(_RESERVED_ALIASES)
    choices = actions[SGLANG_NAME.get(field, field)].choices
    return None if choices is None else set(choices)


def choice_mismatches(actions: dict) -> list[str]:
    bad = []
    for f, spec in FIELDS.items():
        if spec.kind != "choice" or f in GLM_KV_ONLY:
            continue
        theirs = sglang_choices(f, actions)
        if theirs is None:
            bad.append(f"{f}: SGLang 0.5.23 gives no choices; glm-kv has {sorted(glm_kv_choices(f))}")
        elif glm_kv_choices(f) != theirs:
            bad.append(f"{f}: glm-kv only {sorted(glm_kv_choices(f) - theirs)}, "
                       f"SGLang only {sorted(theirs - glm_kv_choices(f))}")
    return bad


def test_choice_fields_take_exactly_sglang_0523_choices(sglang_ready):
    bad = choice_mismatches(sglang_argparse())
    assert not bad, "\n".join(bad)


def test_a_planted_extra_choice_is_caught(sglang_ready, monkeypatch):
    """An extra choice, and the old ``fp8`` alias (SGLang's argparse refuses ``fp8``): both named."""
    import dataclasses

    spec = FIELDS["linear_attn_backend"]
    monkeypatch.setitem(profile_module.FIELDS, "linear_attn_backend",
                        dataclasses.replace(spec, choices=spec.choices + ("fla",)))
    spec = FIELDS["kv_cache_dtype"]
    monkeypatch.setitem(profile_module.FIELDS, "kv_cache_dtype",
                        dataclasses.replace(spec, aliases=spec.aliases + (("fp8", "fp8_e4m3"),)))
    bad = choice_mismatches(sglang_argparse())
    assert any(b.startswith("linear_attn_backend:") and "fla" in b for b in bad), bad
    assert any(b.startswith("kv_cache_dtype:") and "fp8'" in b for b in bad), bad


CHOICE_FIELDS = [f for f, s in FIELDS.items() if s.kind == "choice" and f not in GLM_KV_ONLY]
# one case per refused value (a field with none has no case, rather than a case that loops over nothing)
NOT_MODELLED_CASES = [(f, v) for f in CHOICE_FIELDS for v in NOT_MODELLED.get(f, ())]


def test_every_not_modelled_entry_names_a_choice_field():
    assert NOT_MODELLED_CASES, "no refused choices: the test below would check nothing"
    assert set(NOT_MODELLED) <= set(CHOICE_FIELDS), sorted(set(NOT_MODELLED) - set(CHOICE_FIELDS))


@pytest.mark.parametrize("field,value", NOT_MODELLED_CASES, ids=[f"{f}={v}" for f, v in NOT_MODELLED_CASES])
def test_not_modelled_choices_are_refused_by_name(field, value):
    """SGLang takes them; glm-kv says it does not model them (exit 2 naming the field)."""
    from glm_kv.errors import ProfileError

    with pytest.raises(ProfileError, match=f"^{field}: .*does not model"):
        make_profile({field: value})
