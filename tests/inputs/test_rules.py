"""Issue 22 deliverable 2: one rules object per SGLang version, and no layout branch outside it.

Every place that behaved differently per ``sglang_layout`` asks ``glm_kv.inputs.rules`` instead.
The guard below parses every module of glm_kv (AST, so comments and strings do not count) and
fails naming file and line when a comparison against a layout name ("article", "0.5.23") or any
comparison of an ``sglang_layout`` value appears outside the rules module. Comparisons of other
things called layout (the MLA row format ``kv_layout``, HiCache's ``hicache_mem_layout`` /
``page_first``) are not SGLang-version branches and are not flagged.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from glm_kv import ProfileError
from glm_kv.inputs.profile import LAYOUTS, make_profile
from glm_kv.inputs.rules import ARTICLE, RULES, SGLANG_0_5_23, rules_for

PACKAGE = Path(__file__).resolve().parents[2] / "glm_kv"
RULES_MODULE = PACKAGE / "inputs" / "rules.py"


def layout_comparisons(source: str, filename: str = "<planted>") -> list[str]:
    """``file:line`` of every comparison that branches on an SGLang layout."""
    hits = []
    for node in ast.walk(ast.parse(source, filename=filename)):
        if not isinstance(node, ast.Compare):
            continue
        operands = [node.left, *node.comparators]
        names = {o.id if isinstance(o, ast.Name) else o.attr for o in operands
                 if isinstance(o, (ast.Name, ast.Attribute))}
        constants = set()
        for o in operands:
            elts = o.elts if isinstance(o, (ast.Tuple, ast.List, ast.Set)) else [o]
            constants |= {e.value for e in elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
        if "sglang_layout" in names or constants & set(RULES):
            hits.append(f"{filename}:{node.lineno}")
    return hits


def test_no_layout_comparison_outside_the_rules_module():
    hits = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path != RULES_MODULE:
            hits += layout_comparisons(path.read_text(), str(path.relative_to(PACKAGE.parent)))
    assert hits == [], "SGLang-version branches outside glm_kv/inputs/rules.py (ask rules_for(...) instead): " \
                       + ", ".join(hits)


@pytest.mark.parametrize("planted", [
    'if p.sglang_layout == "article":\n    pass\n',
    'strict = layout == "0.5.23"\n',
    'x = 1 if g.layout != "article" else 2\n',
    'ok = "0.5.23" in (layout,)\n',
    'ok = layout in ("article",)\n',
    'same = plan.profile.sglang_layout == other\n',
])
def test_the_guard_catches_a_planted_layout_branch(planted):
    assert layout_comparisons(planted) == ["<planted>:1"], planted


def test_the_guard_catches_a_branch_planted_in_a_real_module():
    src = (PACKAGE / "ledgers" / "layers.py").read_text()
    # the first occurrence only: under `make mutants` layers.py is mutmut's copy, which repeats the
    # function once per mutant
    planted = src.replace("if not r.indexer_pooled_rows:", 'if r.version == "article":', 1)
    assert planted != src
    assert len(layout_comparisons(planted, "layers.py")) == 1


@pytest.mark.parametrize("legit", [
    't.kv_layout == "fp8_scaled"\n',           # the MLA row format, not the SGLang version
    'layout != "page_first"\n',                # HiCache's host memory layout
    'rules_for(plan.profile) is rules_for(layout)\n',
])
def test_the_guard_leaves_other_layouts_alone(legit):
    assert layout_comparisons(legit) == []


def test_one_rules_value_per_layout_the_profile_accepts():
    assert set(RULES) == set(LAYOUTS)
    assert RULES["article"] is ARTICLE and RULES["0.5.23"] is SGLANG_0_5_23
    assert all(RULES[k].version == k for k in RULES)


def test_rules_for_a_profile_and_a_name():
    assert rules_for(make_profile({"sglang_layout": "article"})) is ARTICLE
    assert rules_for(make_profile({"sglang_layout": "0.5.23"})) is SGLANG_0_5_23
    assert rules_for("article") is ARTICLE
    with pytest.raises(ProfileError) as e:
        rules_for("0.6")
    assert e.value.field == "sglang_layout" and "article" in str(e.value)


def test_the_two_versions_differ_where_the_article_says_they_do():
    """The article (upstream f4de6abee6): 64-token pages, unpooled 132 B indexer rows, a host group
    of KV + MAMBA only with 512-wide rows, no start-up refusals for this model; 0.5.23 the opposite."""
    facts = ("page_times_kpool", "indexer_pooled_rows", "strict_launch_flags", "startup_refusals", "eagle_steps_need_topk",
             "host_indexer_pool", "host_row_is_device_row", "host_packs_draft", "split_hicache_size",
             "auto_hicache_ratio", "other_models")
    assert all(getattr(SGLANG_0_5_23, f) for f in facts)
    assert not any(getattr(ARTICLE, f) for f in facts)
    assert ARTICLE.capacity_note and SGLANG_0_5_23.capacity_note is None


@pytest.mark.parametrize("algo", ["EAGLE", "NEXTN"])
def test_steps_without_topk_is_a_0523_refusal_only(algo):
    """0.5.23 dies at start-up on EAGLE/NEXTN steps without topk (tests/sglang/test_flags_refusals.py shows it
    through SGLang's own resolution); the article layout takes topk as 1. topk 1 plans on both."""
    from glm_kv import compute_plan, load_profile

    spec = {"speculative_algorithm": algo, "speculative_num_steps": 3}
    with pytest.raises(ProfileError) as e:
        compute_plan(load_profile("h200-0.5.23", spec))
    assert e.value.field == "speculative_eagle_topk" and "SGLang 0.5.23" in e.value.rule
    assert compute_plan(load_profile("h200-0.5.23", {**spec, "speculative_eagle_topk": 1})).draft_tokens == 4
    assert compute_plan(load_profile("article", spec)).draft_tokens == 4
