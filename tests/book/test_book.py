"""The book's infrastructure: table of contents, notebooks, glue, offline charts, per-profile runs.

Fast checks read the committed notebooks. Slower ones (marked in their names) build the HTML into
a temporary folder, execute a chapter for another profile with papermill, or run the per-profile
builder on a tiny book; they need the ``book`` extra and skip without it.
"""
from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from glm_kv.book.default_profile import BOOK_DEFAULT_PROFILE

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = ["01_token", "02_request", "03_hbm_pool", "04_radix_tree", "05_dram", "06_capacity",
            "06b_choosing_flags", "07_pitfalls", "08_what_changed"]

nbformat = pytest.importorskip("nbformat")


def toc_notebooks() -> list[Path]:
    from glm_kv.book.runner import toc_notebooks as tn

    return [ROOT / p for p in tn(ROOT)]


def read(path: Path):
    return nbformat.read(path, as_version=4)


def markdown_of(path: Path) -> list[str]:
    if path.suffix == ".md":
        return [path.read_text()]
    return [c.source for c in read(path).cells if c.cell_type == "markdown"]


def glued(nb) -> dict[str, str]:
    """key -> text/plain of every myst-nb glue output in an executed notebook."""
    out = {}
    for cell in nb.cells:
        for o in cell.get("outputs", []):
            meta = o.get("metadata", {}).get("scrapbook", {})
            if meta.get("name"):
                out[meta["name"]] = o.get("data", {}).get(meta.get("mime_prefix", "") + "text/plain", "")
    return out


# ------------------------------------------------------------------------------------------------
# Table of contents and structure
# ------------------------------------------------------------------------------------------------

def test_toc_lists_every_notebook_and_page_in_article_order():
    from glm_kv.book.runner import toc_documents

    docs = toc_documents(ROOT)
    for doc in docs:
        assert any((ROOT / (doc + ext)).is_file() for ext in ("", ".md", ".ipynb")), doc
    on_disk = {f"notebooks/{p.stem}" for p in (ROOT / "notebooks").glob("*.ipynb")}
    on_disk |= {f"book/{p.stem}" for p in (ROOT / "book").iterdir() if p.suffix in (".md", ".ipynb")}
    assert on_disk <= set(docs), f"not in _toc.yml: {sorted(on_disk - set(docs))}"
    chapters = [d.split("/")[1] for d in docs if d.startswith("notebooks/")]
    assert chapters == CHAPTERS
    for page in ("book/intro", "book/notation", "book/references", "book/profiles", "book/plan",
                 "book/sglang_agreement"):
        assert page in docs


def test_config_builds_from_stored_outputs_with_offline_charts():
    cfg = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert cfg["execute"]["execute_notebooks"] == "off"
    assert "glm_kv.book.charts" in cfg["sphinx"]["extra_extensions"]
    assert cfg.get("only_build_toc_files") is True


# book/sglang_agreement.ipynb belongs to the SGLang-agreement work; it switches when its owner re-executes it
NOT_YET_SWITCHED: set[str] = set()


def test_one_default_profile_everywhere():
    """make book, _config.yml, README and the parameters cells name the same 0.5.23 profile."""
    from glm_kv.inputs.profile import load_profile

    assert load_profile(BOOK_DEFAULT_PROFILE).sglang_layout == "0.5.23"
    make = (ROOT / "Makefile").read_text()
    assert re.search(rf"^PROFILE \?= {re.escape(BOOK_DEFAULT_PROFILE)}$", make, re.M), "Makefile PROFILE"
    assert f"`{BOOK_DEFAULT_PROFILE}`" in (ROOT / "_config.yml").read_text(), "_config.yml names the default"
    readme = (ROOT / "README.md").read_text()
    assert f"_build/profiles/{BOOK_DEFAULT_PROFILE}/html/index.html" in readme, "README's book path"
    assert 'profile = "article"' not in readme, "README tells a reader the chapters default to the article"


def test_the_cli_plans_the_books_default_without_profile(capsys):
    """`glm-kv plan` with no --profile answers for the profile the book's first page answers for."""
    from glm_kv.cli import build_parser, main

    assert main(["plan", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["profile"]["name"] == BOOK_DEFAULT_PROFILE
    helps = [a.help for a in build_parser()._subparsers._group_actions[0].choices["plan"]._actions
             if "--profile" in a.option_strings]
    assert helps == [f"shipped profile name or YAML file (default: {BOOK_DEFAULT_PROFILE})"]


@pytest.mark.parametrize("path", toc_notebooks(), ids=lambda p: p.stem)
def test_parameters_cell_with_profile(path):
    nb = read(path)
    tagged = [c for c in nb.cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(tagged) == 1, "exactly one cell tagged 'parameters'"
    wanted = BOOK_DEFAULT_PROFILE if path.relative_to(ROOT).as_posix() not in NOT_YET_SWITCHED else "article"
    assert re.search(rf"^profile\s*=\s*['\"]{re.escape(wanted)}['\"]\s*$", tagged[0].source, re.M), path
    assert not any("injected-parameters" in c.get("metadata", {}).get("tags", []) for c in nb.cells), \
        "committed notebooks are executed for the default profile, without injected parameters"


@pytest.mark.parametrize("path", toc_notebooks(), ids=lambda p: p.stem)
def test_opens_with_a_question_and_closes_with_a_takeaway(path):
    nb = read(path)
    first, last = nb.cells[0], nb.cells[-1]
    assert first.cell_type == "markdown" and first.source.startswith("# ")
    assert "question" in first.source.lower() and "?" in first.source
    assert last.cell_type == "markdown" and "{admonition} Takeaway" in last.source


@pytest.mark.parametrize("path", toc_notebooks(), ids=lambda p: p.stem)
def test_stored_executed_without_errors(path):
    nb = read(path)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(c.execution_count is not None for c in code), "store the notebook executed"
    checked = [c for c in code if c.source.startswith("# NBVAL_CHECK_OUTPUT")]
    assert all(c.outputs for c in checked), "the key-figure cell has no stored output"
    errors = [o for c in code for o in c.outputs if o.get("output_type") == "error"]
    assert not errors, errors[:1]
    streams = [o.get("name") for c in code for o in c.outputs if o.get("output_type") == "stream"]
    assert "stderr" not in streams, "a notebook writes to stderr (warnings fail the strict build)"


@pytest.mark.parametrize("path", [p for p in toc_notebooks() if p.parent.name == "notebooks"],
                         ids=lambda p: p.stem)
def test_chapter_measures_and_marks_key_figures(path):
    nb = read(path)
    checked = [c for c in nb.cells if c.cell_type == "code" and c.source.startswith("# NBVAL_CHECK_OUTPUT")]
    assert checked, "mark the key-figure cell with # NBVAL_CHECK_OUTPUT"
    assert any("assert" in c.source for c in checked), "the key-figure cell asserts measured == ledger"
    assert any(c.outputs for c in checked)
    source = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert re.search(r"measure_profile|check_tree|DevicePools", source), "the chapter measures real tensors"


# ------------------------------------------------------------------------------------------------
# Numbers: glued, never typed; no formulas in notebooks
# ------------------------------------------------------------------------------------------------

GLUE_ROLE = re.compile(r"\{glue(?::\w+)?\}`[^`]*`")
INLINE_CODE = re.compile(r"`[^`\n]*`")
FENCE = re.compile(r"```.*?```", re.S)
VERSION = re.compile(r"\b\d+(?:\.\d+){2,}\b")
FIGURE = re.compile(r"(?<![\w.\-])(\d{1,3}(?:,\d{3})+|\d+\.\d+|\d{3,})(?![\w.])")
ARTICLE_FIGURES = ["5808", "5632", "11264", "1452", "7260", "7084", "12716", "8448", "147456",
                   "4194304", "4341760", "147619840", "76316672", "738099200", "381583360",
                   "1486848", "225280", "951582720", "363", "528", "576", "132"]


def prose_figures(text: str) -> list[str]:
    text = FENCE.sub(lambda m: m.group(0) if m.group(0).startswith("```{admonition") else "", text)
    text = GLUE_ROLE.sub("", text)
    text = INLINE_CODE.sub("", text)
    text = VERSION.sub("", text)
    return FIGURE.findall(text)


def test_prose_figure_detector():
    assert prose_figures("KV is 5,808 B") == ["5,808"]
    assert prose_figures("about 7.26 KB") == ["7.26"]
    assert prose_figures("a 528 B row") == ["528"]
    assert prose_figures("KV is {glue:text}`kv:,` B in SGLang 0.5.23 at `f4de6abee6`") == []
    assert prose_figures("GLM-5.3-Flash") == []


@pytest.mark.parametrize("path", toc_notebooks() + sorted((ROOT / "book").glob("*.md")),
                         ids=lambda p: p.stem)
def test_no_typed_figures_in_prose(path):
    typed = [f for md in markdown_of(path) for f in prose_figures(md)]
    assert not typed, f"glue these figures instead of typing them: {typed}"
    for md in markdown_of(path):
        bare = md.replace(",", "")
        for fig in ARTICLE_FIGURES:
            assert not re.search(rf"(?<![\w.`]){fig}(?![\w.`])", GLUE_ROLE.sub("", bare)), fig


@pytest.mark.parametrize("path", toc_notebooks(), ids=lambda p: p.stem)
def test_every_glue_reference_is_glued(path):
    nb = read(path)
    have = glued(nb)
    wanted = {m.group(1).split(":")[0] for md in markdown_of(path)
              for m in re.finditer(r"\{glue(?::\w+)?\}`([^`]*)`", md)}
    assert wanted <= set(have), f"referenced but not glued: {sorted(wanted - set(have))}"


@pytest.mark.parametrize("path", toc_notebooks(), ids=lambda p: p.stem)
def test_no_formulas_in_notebooks(path):
    """Arithmetic on ledger values belongs in glm_kv; a notebook only calls it."""
    for cell in read(path).cells:
        if cell.cell_type != "code":
            continue
        for line in cell.source.splitlines():
            code = line.split("#", 1)[0]
            assert not re.search(r"\d+\s*[*/]\s*\d+", code.replace("**", "^")), line
            assert not re.search(r"\[[\"'][^\]]+[\"']\]\s*[-+*/%]", code), line
            assert not re.search(r"[-+*/%]\s*[\w.]+\[[\"']", code), line


# ------------------------------------------------------------------------------------------------
# Charts render offline
# ------------------------------------------------------------------------------------------------

def test_offline_renderer_has_no_remote_script():
    alt = pytest.importorskip("altair")
    import pandas as pd

    from glm_kv.book import charts

    charts.enable_offline()
    chart = alt.Chart(pd.DataFrame({"x": ["a"], "y": [1]})).mark_bar().encode(x="x", y="y", tooltip=["y"])
    bundle = alt.renderers.get()(chart.to_dict())
    html = bundle["text/html"]
    assert "vegaEmbed" in html and "<script src" not in html
    assert not re.search(r"(src|href)=[\"']?https?://", html) and "import(" not in html and "cdn" not in html
    assert html == alt.renderers.get()(chart.to_dict())["text/html"], "chart ids are deterministic"
    assert any(k.startswith("application/vnd.vegalite") for k in bundle)


def test_javascript_bundle_defines_vega_embed(tmp_path):
    pytest.importorskip("vl_convert")
    from glm_kv.book import charts

    path = charts.write_javascript_bundle(tmp_path)
    text = path.read_text()
    assert "window.vegaEmbed" in text and len(text) > 100_000


REMOTE = [
    re.compile(r"<script[^>]+src=[\"'](?:https?:)?//", re.I),
    re.compile(r"<link[^>]+href=[\"'](?:https?:)?//[^\"']+[\"'][^>]*stylesheet", re.I),
    re.compile(r"<link[^>]+stylesheet[^>]+href=[\"'](?:https?:)?//", re.I),
    re.compile(r"import\(\s*[\"']https?://", re.I),
    re.compile(r"requirejs\.config|require\.config", re.I),
]


def test_built_html_has_no_remote_script_slow(tmp_path):
    pytest.importorskip("jupyter_book")
    from glm_kv.book.runner import build_html

    src = tmp_path / "src"
    src.mkdir()
    for name in ("_config.yml", "_toc.yml", "book", "notebooks"):
        s = ROOT / name
        (shutil.copytree if s.is_dir() else shutil.copy2)(s, src / name)
    html = build_html(src, tmp_path, strict=True, profile_label="article")
    pages = [p for p in html.rglob("*.html")]
    assert (html / "_static" / "glm-kv-vega.js").is_file()
    charts_seen = 0
    for page in pages:
        text = page.read_text(errors="ignore")
        for pattern in REMOTE:
            assert not pattern.search(text), f"{page.relative_to(html)}: {pattern.pattern}"
        if 'class="glm-kv-chart"' in text:
            charts_seen += 1
            assert "glm-kv-vega.js" in text
    with_charts = sum(1 for nb in toc_notebooks() if "glm-kv-chart" in nb.read_text())
    assert charts_seen == with_charts >= 6
    # issue 29: MathJax ships with the book and is loaded, locally, by every page with TeX math
    from glm_kv.book.static_assets import CJK_FONT_FILE, MATHJAX_DIR, MATHJAX_FILE

    assert (html / "_static" / MATHJAX_DIR / MATHJAX_FILE).stat().st_size > 1_000_000
    assert (html / "_static" / MATHJAX_DIR / "LICENSE").is_file()
    with_math = [p for p in pages if 'class="math notranslate' in p.read_text(errors="ignore")]
    assert with_math, "no page with TeX math: chapter 3's rest formula is one"
    for page in with_math:
        assert re.search(rf'<script[^>]+src="{"../" * (len(page.relative_to(html).parts) - 1)}_static/'
                         rf'{MATHJAX_DIR}/{re.escape(MATHJAX_FILE)}(\?v=\w+)?"', page.read_text()), \
            f"{page.relative_to(html)} has math but does not load the shipped MathJax"
    # issue 29: the CJK subset ships, and the book's CSS loads it
    assert (html / "_static" / CJK_FONT_FILE).is_file()
    assert f'url("{CJK_FONT_FILE}")' in (html / "_static" / "glm-kv.css").read_text()
    if importlib.util.find_spec("fontTools") and importlib.util.find_spec("brotli"):
        from fontTools.ttLib import TTFont

        from glm_kv.book.static_assets import cjk_characters

        with TTFont(html / "_static" / CJK_FONT_FILE) as font:
            have = {chr(c) for c in font.getBestCmap()}
        shown = set().union(*(cjk_characters(p.read_text(errors="ignore")) for p in pages))
        assert shown and not shown - have, f"built pages show {''.join(sorted(shown - have))}: make cjk-font"
    from glm_kv import load_plan

    tok = load_plan(BOOK_DEFAULT_PROFILE).token
    chapter = (html / "notebooks" / "01_token.html").read_text()
    assert f"{tok.kv_bytes_per_token:,}" in chapter and f"{tok.cell_size_bytes:,}" in chapter, \
        "the default book shows the default profile's figures"
    if shutil.which("chromium") or shutil.which("chromium-browser"):
        proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "screenshot_check.py"),
                               "--out", str(tmp_path / "shots"),
                               str(html / "notebooks" / "01_token.html"),
                               str(html / "notebooks" / "06_capacity.html")],
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert (tmp_path / "shots" / "01_token-chart.png").stat().st_size > 2000


# ------------------------------------------------------------------------------------------------
# Profiles: the b200 book shows other figures; failures name profile, notebook and cell
# ------------------------------------------------------------------------------------------------

def test_default_chapter_one_figures():
    # the default (h200-0.5.23: bf16 KV on SM90): 512-element bf16 rows x 2 B x 11 full layers, and
    # 0.5.23's indexer reservation of 363 B/token (reference/sglang-0.5.23.md)
    g = glued(read(ROOT / "notebooks" / "01_token.ipynb"))
    assert (g["kv_bytes"], g["indexer_bytes"]) == (str(512 * 2 * 11), "363")


def test_chapter_one_for_b200_profile_slow(tmp_path):
    pytest.importorskip("papermill")
    from glm_kv.book.runner import _kernel_env, execute_notebook

    _kernel_env(ROOT)
    nb = tmp_path / "01_token.ipynb"
    shutil.copy2(ROOT / "notebooks" / "01_token.ipynb", nb)
    execute_notebook(nb, {"profile": "b200-0.5.23"}, profile_label="b200-0.5.23")
    g = glued(read(nb))
    assert (g["kv_bytes"], g["indexer_bytes"]) == ("5632", "363")
    assert any("injected-parameters" in c.get("metadata", {}).get("tags", []) for c in read(nb).cells)


def _tiny_book(root: Path, broken: bool) -> None:
    (root / "notebooks").mkdir(parents=True)
    (root / "book").mkdir()
    (root / "_config.yml").write_text("title: tiny\nexecute:\n  execute_notebooks: 'off'\n")
    (root / "_toc.yml").write_text("format: jb-book\nroot: book/intro\nchapters:\n"
                                   "  - file: notebooks/01_ok\n  - file: notebooks/02_second\n")
    (root / "book" / "intro.md").write_text("# Tiny\n")
    for name, body in (("01_ok", "x = 1"), ("02_second", "raise ValueError('boom')" if broken else "y = 2")):
        nb = nbformat.v4.new_notebook(cells=[
            nbformat.v4.new_markdown_cell("# A chapter\nWhat?"),
            nbformat.v4.new_code_cell('profile = "article"', metadata={"tags": ["parameters"]}),
            nbformat.v4.new_code_cell("import os"),
            nbformat.v4.new_code_cell(body)])
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        nbformat.write(nb, root / "notebooks" / f"{name}.ipynb")


def test_run_book_failure_names_profile_notebook_cell_and_keeps_results_slow(tmp_path):
    pytest.importorskip("papermill")
    from glm_kv.book.runner import BookError, run_book

    good, bad, out = tmp_path / "good", tmp_path / "bad", tmp_path / "out"
    _tiny_book(good, broken=False)
    _tiny_book(bad, broken=True)
    res = run_book(["article"], out, root=good, html=False, progress=False, jobs=1)
    kept = out / "article" / "src" / "notebooks" / "02_second.ipynb"
    assert kept.is_file() and res.books[0].slug == "article"
    before = kept.read_text()
    assert (out / "index.html").is_file()
    with pytest.raises(BookError) as err:
        run_book(["article"], out, root=bad, html=False, progress=False, jobs=2)
    msg = str(err.value)
    assert "profile article" in msg and "notebooks/02_second.ipynb" in msg and "cell 3" in msg
    assert "ValueError: boom" in msg
    assert kept.read_text() == before, "the earlier result is left as it was"
    failed = out / ".staging" / "article" / "src" / "notebooks" / "02_second.ipynb"
    assert failed.is_file(), "the failed notebook is kept for inspection"


def test_profiles_and_comparison_table():
    from glm_kv.book.tables import comparison_table
    from glm_kv.book.runner import resolve_profiles
    from glm_kv.inputs.profile import shipped_profiles

    assert resolve_profiles(None) == shipped_profiles()
    t = comparison_table(["article", "b200-0.5.23"])
    assert t.loc["MLA latent KV, B/token", "article"] == "5,808"
    assert t.loc["MLA latent KV, B/token", "b200-0.5.23"] == "5,632"
    assert t.loc["indexer K, B/token", "b200-0.5.23"] == "363"
    with pytest.raises(Exception):
        resolve_profiles(["no-such-profile"])


def test_cli_book_is_wired():
    from glm_kv.cli import build_parser

    args = build_parser().parse_args(["book", "--profile", "article", "--profile", "b200-0.5.23"])
    assert args.profile == ["article", "b200-0.5.23"]


# ------------------------------------------------------------------------------------------------
# Pitfalls: each of the nine checks fails when fed the mistaken assumption
# ------------------------------------------------------------------------------------------------

def _shipped():
    from glm_kv.inputs.profile import shipped_profiles

    return shipped_profiles()


@pytest.mark.parametrize("profile", _shipped())
@pytest.mark.parametrize("number", range(1, 10))
def test_pitfall_check_fails_on_the_mistake(profile, number):
    from glm_kv.book.pitfalls import PitfallError, check, mistaken, truth

    right, wrong = truth(number, profile), mistaken(number, profile)
    assert check(number, profile, right) == right
    assert wrong != right
    with pytest.raises(PitfallError, match=f"pitfall {number}"):
        check(number, profile, wrong)


def test_nine_pitfalls():
    from glm_kv.book.pitfalls import PITFALLS

    assert [p.number for p in PITFALLS] == list(range(1, 10))


def test_pitfall_article_values():
    from glm_kv.book.pitfalls import mistaken, truth

    assert (truth(1, "article"), mistaken(1, "article")) == (528, 576)
    assert (truth(2, "article"), mistaken(2, "article")) == (7260, 5808)
    # (tokens per IndexKeyCache page, token keys its row holds): the article's 64-token page keeps
    # every key; 0.5.23's 256-token page keeps 256 / 4 pooled keys, so the article's reading fails
    assert (truth(3, "article"), mistaken(3, "article")) == ((64, 64), (16, 16))
    assert (truth(3, "b200-0.5.23"), mistaken(3, "b200-0.5.23")) == ((256, 64), (256, 256))
    assert truth(6, "article") == ["kv", "mamba"] and truth(6, "b200-0.5.23") == ["indexer", "kv", "mamba"]


# ------------------------------------------------------------------------------------------------
# Set-up files
# ------------------------------------------------------------------------------------------------

def _names(reqs) -> set[str]:
    return {re.split(r"[<>=!~\[ ;]", r.strip(), maxsplit=1)[0].lower().replace("_", "-") for r in reqs if r.strip()}


def test_environment_yml_matches_the_package():
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        tomllib = pytest.importorskip("tomli")
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = _names(meta["dependencies"])
    for extra in ("book", "test", "tensors"):
        wanted |= _names(meta.get("optional-dependencies", {}).get(extra, []))
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    listed = set()
    for dep in env["dependencies"]:
        if isinstance(dep, dict):
            listed |= _names(d for d in dep.get("pip", []) if not d.startswith("-"))
        else:
            listed |= _names([dep])
    missing = wanted - listed
    assert not missing, f"environment.yml lacks {sorted(missing)}"


def test_gpu_workflow_runs_the_ci_command_on_a_gpu_runner():
    wf = yaml.safe_load((ROOT / ".github" / "workflows" / "gpu.yml").read_text())
    job = next(iter(wf["jobs"].values()))
    assert "gpu" in job["runs-on"] and "self-hosted" in job["runs-on"]
    assert any(".ci/run" in (step.get("run") or "") for step in job["steps"])


def test_every_project_venv_is_outside_the_book():
    """Each virtual environment the project's own files make (Makefile, scripts/*.sh) is excluded from the
    Jupyter Book build: a fresh `make test` builds .venv-vllm before the book group, and Sphinx read its
    packages' README.md files as pages (112 warnings, the book group failed). Planted: drop .venv-vllm."""
    import re

    import yaml

    root = Path(__file__).resolve().parents[2]
    made = set()
    for f in [root / "Makefile", *sorted((root / "scripts").glob("*.sh"))]:
        made |= set(re.findall(r"(?<![\w/-])(\.venv(?:-[a-z]+)?)\b", f.read_text()))
    excluded = set(yaml.safe_load((root / "_config.yml").read_text())["exclude_patterns"])
    assert {".venv", ".venv-sglang", ".venv-vllm"} <= made
    assert made <= excluded, sorted(made - excluded)
