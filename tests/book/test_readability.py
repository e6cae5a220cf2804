"""The book reads well: tables without index or truncation, one parameters cell, one THEBE script,
source links that point at the right lines, pitfall 3 checked on real tensors, and a screenshot
check that fails on a page made to overflow, truncate, repeat its parameters and log errors."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
nbformat = pytest.importorskip("nbformat")
pd = pytest.importorskip("pandas")


def test_show_has_no_index_and_never_truncates():
    from glm_kv.book.tables import show

    long = "an explanation " * 12
    html = show(pd.DataFrame({"n": [1234567, 2], "why": [long, "short"]}))._repr_html_()
    assert "1,234,567" in html and long.strip() in html and "..." not in html
    assert "<th>n</th>" in html and not re.search(r"<t[dh][^>]*>0</t[dh]>", html), "no 0..n index"
    assert html.startswith('<div class="glm-kv-table wrap sticky-first">'), "wide tables scroll in their own box"
    named = show(pd.DataFrame({"v": [1]}, index=pd.Index(["bf16"], name="variant")))._repr_html_()
    assert "<th>variant</th>" in named and ">bf16<" in named
    # a filtered table keeps pandas' row numbers (5, 9): still row numbers, not labels (the flags page)
    df = pd.DataFrame({"field": [f"f{i}" for i in range(10)], "n": range(100, 110)})
    filtered = show(df[df.n.isin([105, 106, 109])])._repr_html_()   # rows 5, 6, 9: not a range
    assert not re.search(r"<t[dh][^>]*>[569]</t[dh]>", filtered) and "<td class=\"text\">f5</td>" in filtered


def test_definitions_escape_and_wrap():
    from glm_kv.book.tables import definitions

    html = definitions([("compress tail", "no <host> copy")])._repr_html_()
    assert html == '<dl class="glm-kv-dl"><dt>compress tail</dt><dd>no &lt;host&gt; copy</dd></dl>'


def test_papermill_duplicate_parameters_cell_is_hidden(tmp_path):
    from glm_kv.book.runner import hide_duplicate_parameters

    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell('profile = "article"', metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell('profile = "b200-0.5.23"', metadata={"tags": ["injected-parameters"]})])
    path = tmp_path / "x.ipynb"
    nbformat.write(nb, path)
    hide_duplicate_parameters(path)
    tags = [c.metadata.get("tags") for c in nbformat.read(path, as_version=4).cells]
    assert tags == [["parameters", "remove-cell"], ["injected-parameters"]]


def test_repeated_inline_scripts_are_removed():
    from glm_kv.book.charts import dedupe_inline_scripts

    line = '    <script>const THEBE_JS_URL = "x"; const thebe_selector = ".cell"</script>'
    page = f"<head>\n{line}\n<script src=a.js></script>\n{line}\n</head>"
    out = dedupe_inline_scripts(page)
    assert out.count("THEBE_JS_URL") == 1 and "a.js" in out


def test_source_links_point_at_the_named_line():
    from glm_kv.book.sources import SOURCES, source_url

    wheel = ROOT / ".venv-sglang" / "lib"
    roots = sorted(wheel.glob("python3*/site-packages/sglang")) if wheel.is_dir() else []
    assert source_url("IndexKeyCache").endswith("/blob/v0.5.23/python/sglang/srt/mem_cache/index_key_cache.py#L21")
    if not roots:
        pytest.skip("no .venv-sglang: the line numbers are not re-read")
    for name, (path, line, start) in SOURCES.items():
        text = (roots[0] / path).read_text().splitlines()
        assert text[line - 1].startswith(start), f"{name}: {path}:{line} is now {text[line - 1]!r}"


@pytest.mark.parametrize("profile", ["article", "b200-0.5.23"])
def test_pitfall_three_is_checked_on_the_allocated_row(profile, monkeypatch):
    """Fed the real IndexKeyCache row, pitfall 3 passes; with the other layout's row it fails."""
    pytest.importorskip("torch")
    from glm_kv import load_plan
    from glm_kv.book.pitfalls import PitfallError, check
    from glm_kv.tensors.memory_pool import DevicePools, pool_geometry

    plan = load_plan(profile)
    pools = DevicePools(pool_geometry(plan.args, max_running_requests_per_worker=plan.requests_per_worker), device="cpu")
    row = pools.full_kv_pool.index_key_cache.buffer[0].shape[-1]
    keys = row // plan.token.indexer_unpooled_bytes_per_token_per_layer
    check(3, profile, (pools.full_kv_pool.page_size, keys))
    # an engine that kept the other layout's row (one key per token / pooled keys) is caught
    other = plan.token.page_size if keys != plan.token.page_size else plan.token.page_size // plan.token.index_kpool
    with pytest.raises(PitfallError, match="pitfall 3"):
        check(3, profile, (pools.full_kv_pool.page_size, other))


def test_pitfalls_read_as_prose_with_the_0523_verdict():
    from glm_kv.book.pitfalls import PITFALLS, across_layouts, pitfall_sections

    html = pitfall_sections("article").html
    assert html.count("<dt>What goes wrong</dt>") == html.count("<dt>In SGLang 0.5.23</dt>") == len(PITFALLS)
    # issue 29: consequences with numbers, not check() calls or error messages
    assert html.count("<dt>What it costs here</dt>") == len(PITFALLS)
    assert "check(" not in html and "PitfallError" not in html
    assert all(p.goes_wrong and p.why and p.in_0523 for p in PITFALLS)
    page3 = across_layouts(3, "article")
    assert page3 == {"article": (64, 64), "0.5.23": (256, 64)}, "0.5.23: 256-token page, pooled row"


def test_comparison_index_lists_every_shipped_profile(tmp_path):
    from glm_kv.book.runner import write_index
    from glm_kv.inputs.profile import shipped_profiles

    (tmp_path / "article" / "html").mkdir(parents=True)
    (tmp_path / "article" / "html" / "index.html").write_text("<html></html>")
    page = write_index(tmp_path, ["article"]).read_text()
    for p in shipped_profiles():
        assert f'<td class="text">{p}</td>' in page, p    # the detail table's sticky first column
    assert '<a href="article/html/index.html">article</a>' in page and "(no book built)" in page
    assert "requests of 128K tokens per rank" in page and "binding limit at 128K" in page


@pytest.mark.skipif(not (shutil.which("chromium") or shutil.which("chromium-browser")), reason="no chromium")
def test_screenshot_check_fails_on_a_page_made_to_fail(tmp_path):
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "screenshot_check.py"), "--self-test",
                           "--out", str(tmp_path)], capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for what in ("console error", "overflows the content column", "truncated cell", "index column",
                 "visible parameters cells", "figure text clipped", "prose cut off"):
        assert what in proc.stdout, what


def test_figures_are_drawn_from_the_plan():
    from glm_kv import load_plan
    from glm_kv.book import figures

    art, rel = load_plan("article"), load_plan("b200-0.5.23")
    page = figures.indexer_page_figure(art).html
    assert "64 tokens" in page and "16 index_kpool" in page and "64 keys x 132 B" in page and "8,448 B row" in page
    page = figures.indexer_page_figure(rel).html
    assert "256 tokens" in page and "64 index_kpool" in page and "64 keys x 132 B" in page, "0.5.23 pools the row"
    cov_a, cov_r = figures.hicache_coverage_figure(art).html, figures.hicache_coverage_figure(rel).html
    assert cov_a.count("no host copy") == 2 and "PoolName.INDEXER" not in cov_a  # indexer and tail
    assert cov_r.count("no host copy") == 1 and "PoolName.INDEXER" in cov_r      # the tail only
    path = figures.backup_path_figure(rel).html
    assert "DSAIndexerPoolHost" in path and path.count("<line") == 2 + 2 * 3 + 1


def test_radix_tree_figure_joins_each_node_to_its_parent():
    from glm_kv.book.figures import radix_tree_figure

    table = pd.DataFrame([
        {"node": 1, "parent": "root", "first token": 0, "end token": 64, "where": "HBM + DRAM",
         "FULL.value (HBM token slots)": "64-127", "FULL.host_value (DRAM host slots)": "0-63",
         "MAMBA.value (HBM state slot)": "2", "MAMBA.host_value (DRAM state slot)": "-"},
        {"node": 2, "parent": 1, "first token": 64, "end token": 128, "where": "HBM only",
         "FULL.value (HBM token slots)": "128-191", "FULL.host_value (DRAM host slots)": "-",
         "MAMBA.value (HBM state slot)": "1", "MAMBA.host_value (DRAM state slot)": "-"},
        {"node": 3, "parent": 1, "first token": 64, "end token": 96, "where": "HBM only",
         "FULL.value (HBM token slots)": "192-223", "FULL.host_value (DRAM host slots)": "-",
         "MAMBA.value (HBM state slot)": "-", "MAMBA.host_value (DRAM state slot)": "-"}])
    svg = radix_tree_figure(table).html
    assert svg.count("<line") == 3, "one edge per node"
    assert "node 2: tokens 64-127" in svg and "FULL.value: 192-223" in svg and "MAMBA.value: 2" in svg


@pytest.mark.parametrize("profile", ["article", "b200-0.5.23", "h200-0.5.23"])
def test_the_pitfalls_said_to_change_in_0523_are_those_whose_value_moves_structurally(profile):
    """Pitfalls 3 and 6 change in 0.5.23 (page and pooled row; INDEXER host entry): their plan
    values differ between the layouts for every profile; the others keep their point."""
    from glm_kv.book.pitfalls import PITFALLS, across_layouts

    changing = {p.number for p in PITFALLS if p.changes_in_0523}
    assert changing == {3, 6}
    for n in changing:
        both = across_layouts(n, profile)
        assert both["article"] != both["0.5.23"], n
    for n in (1, 5, 7):  # rows, pool class, per-slot state: the same value in both layouts
        both = across_layouts(n, profile)
        assert both["article"] == both["0.5.23"], n


@pytest.mark.parametrize("profile", __import__("glm_kv").shipped_profiles())
def test_chapter_six_answers_and_its_takeaway_follows_the_numbers(profile):
    from glm_kv.book.tables import capacity_plan, capacity_summary

    plan, how = capacity_plan(profile)
    s = capacity_summary(plan, how)
    c, ctx, ratio = plan.capacity, plan.profile.context_length, plan.request.slots_per_request
    limits = {"requested": c.requested_max_running_requests_per_worker, "tokens": c.max_total_num_tokens // ctx,
              "mamba": c.max_mamba_cache_size // ratio}
    assert s["cap_fit"] == min(limits.values()) == limits[s["cap_binding"]]
    assert s["cap_tokens"] == c.max_total_num_tokens and s["cap_mamba_slots"] == c.max_mamba_cache_size
    words = {"tokens": "the KV pool binds first", "mamba": "the state pool binds first",
             "requested": "neither pool binds"}
    assert s["cap_verdict"].startswith(words[s["cap_binding"]])
    assert f"{s['cap_fit']:,}" in s["cap_verdict"]
    given = __import__("glm_kv").load_profile(profile)
    assert (given.available_bytes is None and given.weights_bytes is None) == how.startswith("ESTIMATED")


def test_show_separates_whole_floats_and_leaves_fractions():
    """A byte column with a gap (None) turns float in pandas; it still shows 10,027,008, not 10027008.0."""
    import pandas as pd

    from glm_kv.book.tables import show

    df = pd.DataFrame({"ledger B": [10_027_008, None], "ratio": [0.8379, 2.0]})
    html = show(df)._repr_html_()
    assert ">10,027,008<" in html and "10027008.0" not in html and ">-<" in html
    assert ">0.8379<" in html and ">2.0<" in html


@pytest.mark.parametrize("profile", ["h200-0.5.23", "article"])
def test_pitfall_consequences_are_the_plans_numbers(profile):
    """Each consequence quotes numbers of this profile's plan; pitfall 9's mistaken cell_size is the
    one an independently built plan with the MTP draft layer on has."""
    from glm_kv import build_plan
    from glm_kv.book.pitfalls import pitfall_consequences
    from glm_kv.inputs.profile import load_profile, make_profile

    plan = build_plan(profile)
    found = pitfall_consequences(profile)
    tokens = plan["capacity"]["max_total_num_tokens"]
    for n in (1, 2, 9):
        assert f"instead of {tokens:,}" in found[n], (n, found[n])
    # pitfall 9 against an independently built plan with the draft layer on: its own token count
    base = load_profile(profile)
    toggled = build_plan(make_profile({**base.model_dump(), "speculative_algorithm": "EAGLE",
                                       "max_running_requests": base.max_running_requests or 64}))
    assert f"{toggled['token']['cell_size_bytes']:,} B per token" in found[9]
    # the same token budget over a larger cell holds fewer tokens (the mistake alone, nothing else moved)
    shown = int(found[9].split("would hold ")[1].split(" ")[0].replace(",", ""))
    assert toggled["token"]["cell_size_bytes"] > plan["token"]["cell_size_bytes"] and shown < tokens
    assert f"{plan['capacity']['max_mamba_cache_size']:,} slots" in found[7] and \
        f"{plan['capacity']['max_mamba_cache_size'] // plan['request']['slots_per_request']:,} requests" in found[7]
