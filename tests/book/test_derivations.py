"""Derivations (glm_kv.ledgers.derivations): the value shown beside each formula is the plan's value.

The formula, its rendering and its value come from one expression; here every value is compared
with the plan key it names, for every shipped profile under both SGLang layouts, and a derivation
with a term dropped is shown to be caught.
"""
from __future__ import annotations

import xml.dom.minidom

import numpy as np
import pytest

from glm_kv import load_plan, shipped_profiles
from glm_kv.ledgers import derivations as dv
from glm_kv.units import dotted

CASES = [(p, layout) for p in shipped_profiles() for layout in ("article", "0.5.23")]


def mismatches(plan) -> list[str]:
    d = plan.to_dict()
    out = []
    for x in dv.derivations(plan):
        if x.key and dotted(d, x.key) != x.value:
            out.append(f"{x.name}: derivation {x.value!r} != plan {x.key} {dotted(d, x.key)!r}")
    return out


@pytest.mark.parametrize("profile,layout", CASES)
def test_every_derivation_equals_the_plan(profile, layout):
    plan = load_plan(profile, {"sglang_layout": layout})
    ds = dv.derivations(plan)
    assert len([x for x in ds if x.key]) >= 12
    assert mismatches(plan) == []


def test_a_derivation_with_a_term_dropped_is_caught(monkeypatch):
    """Corrupt the kv_cache_dim formula (forget the fp8 scales): the check must name it."""
    original = dv._token

    def broken(plan):
        out = original(plan)
        return [dv.Derivation(x.name, dv.Var("kv_lora_rank", plan.model.kv_lora_rank), x.unit, x.key, x.what)
                if x.name == "kv_cache_dim" else x for x in out]

    monkeypatch.setitem(dv.GROUPS, "token", broken)
    bad = mismatches(load_plan("article"))
    assert bad and bad[0].startswith("kv_cache_dim:")


def test_rendering_shows_the_article_numbers():
    plan = load_plan("article")
    kv = dv.derivation(plan, "kv_bytes_per_token")
    assert r"528 \times 1 \times 11" in kv.latex() and r"5{,}808" in kv.latex()
    assert kv.text() == "kv_bytes_per_token = 528 x 1 x 11 = 5,808 B"
    slot = dv.derivation(plan, "mamba_cache_per_req")
    assert "34 x (147,456 + 4,194,304) = 147,619,840 B" in slot.text()
    xml.dom.minidom.parseString(kv.mathml().replace("&#", "&amp;#"))  # well-formed MathML


def test_brackets_where_precedence_needs_them():
    a, b, c = dv.Var("a", 10), dv.Var("b", 3), dv.Var("c", 2)
    e = a - (b + c)
    assert e.value() == 5 and dv._plain(e) == "10 - (3 + 2)"
    f = (a + b) * c
    assert f.value() == 26 and dv._plain(f) == "(10 + 3) x 2"
    assert dv.Floor(a / b).value() == 3 and dv.Ceil(a / b).value() == 4


def test_requests_fit_is_the_smallest_of_three():
    plan = load_plan("article")
    c = plan.capacity
    want = min(c.requested_max_running_requests_per_worker,
               c.max_total_num_tokens // plan.profile.context_length,
               c.max_mamba_cache_size // plan.request.slots_per_request)
    assert dv.requests_fit(plan).value == want
    # the article's deployment on its GPU: SGLang serves every request asked for, yet at 128K
    # the token pool runs out first
    assert c.max_running_requests_per_worker == 64 > want
    assert dv.binding_at_context(plan) == "tokens"
    # no memory given (weights estimated by default; the estimate turned off): no answer invented
    assert dv.requests_fit(load_plan("tp8", {"weights_estimate": False})) is None


def test_requests_fit_over_arrays_agrees_with_scalars():
    req, tok, ctx, mamba = (np.array([64, 64, 8, 100]), np.array([6_000_000, 1_000_000, 9_000_000, 9_000_000]),
                            np.array([131072] * 4), np.array([280, 400, 300, 100]))
    e = dv.requests_fit_expr(req, tok, ctx, mamba, 5)
    for i in range(4):
        s = dv.requests_fit_expr(int(req[i]), int(tok[i]), int(ctx[i]), int(mamba[i]), 5)
        assert e.value()[i] == s.value() and dv.fit_binding(e)[i] == dv.fit_binding(s)


def test_a_wide_formula_wraps_between_terms_for_a_phone():
    """A symbolic line wider than WIDE_LINE characters (the indexer row: 66) is split between the terms of its top
    sum or product, each row within the width, the terms in order; a narrow one stays one row."""
    import re

    plan = load_plan("h200-0.5.23")
    row = dv.derivation(plan, "indexer_row_bytes")
    rows = dv._mathml_rows(row.expr, False)
    text = [re.sub("<[^>]+>", "", r) for r in rows]
    assert text == ["=index_head_dim", "+&#8970;index_head_dim/scale_group&#8971;&#215;scale_bytes"], text
    tail = dv._mathml_rows(dv.derivation(plan, "compress_tail_bytes").expr, False)
    assert len(tail) == 2 and all(len(re.sub("&#[0-9]+;", "x", re.sub("<[^>]+>", "", r))) <= dv.WIDE_LINE for r in tail), tail
    assert len(dv._mathml_rows(dv.derivation(plan, "kv_bytes_per_token").expr, True)) == 1
    xml.dom.minidom.parseString(row.mathml().replace("&#", "&amp;#"))


def test_a_wide_minimum_shows_one_argument_per_row():
    """requests_fit = min(requested, tokens / context, slots / slots per request): wider than a phone at 400 px
    (and than the column at 1,400 px) as one line, so one argument per row, in order, brackets closed once."""
    import re

    fit = dv.requests_fit(load_plan("h200-0.5.23"))
    rows = [re.sub("<[^>]+>", "", r) for r in dv._mathml_rows(fit.expr, False)]
    assert len(rows) == len(fit.expr.args) == 3 and rows[0].startswith("=min(") and rows[-1].endswith(")"), rows
    assert all(r.endswith(",") for r in rows[:-1]) and "".join(rows).count("(") == "".join(rows).count(")")
    xml.dom.minidom.parseString(fit.mathml().replace("&#", "&amp;#"))


def test_a_wrapped_difference_keeps_the_brackets_of_its_right_operand():
    """a - (b + c), too wide for one row: the bracketed sum moves to its own row whole, still bracketed."""
    import re

    a, b, c = (dv.Var(n * 20, v) for n, v in (("a", 10), ("b", 3), ("c", 2)))
    rows = [re.sub("<[^>]+>", "", r) for r in dv._mathml_rows(a - (b + c), False)]
    assert rows == ["=" + "a" * 20, "&#8722;(" + "b" * 20 + "+" + "c" * 20 + ")"], rows
