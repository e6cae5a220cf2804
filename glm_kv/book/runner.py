"""``glm-kv book``: execute every chapter per deployment profile (papermill) and build the HTML books.

For each profile the book's sources (``_config.yml``, ``_toc.yml``, ``book/``, ``notebooks/``) are
copied to a staging folder, every notebook listed in ``_toc.yml`` is executed there with the
papermill parameter ``profile`` (the comparison page also gets ``profiles``: every profile of the
run), and Jupyter Book builds the HTML with warnings as errors. Only when all of that succeeds does
the profile's result replace ``OUT/<profile>/``; a failure names the profile, the notebook and
the cell, keeps the failed notebook in ``OUT/.staging/<profile>/`` for inspection, and leaves every
earlier result as it was. ``OUT/index.html`` links the books and compares the profiles side by side.

The profiles are not built one after another: ``--jobs N`` kernels (default: one per core) take
(profile, notebook) steps from one queue and live for the whole run, and one Sphinx server
builds every book (``parallel``, ``sphinx_server``). What is written does not depend on N.

Layout of ``OUT`` (default ``_build/profiles``)::

    index.html                 the profiles side by side, with links
    <profile>/html/index.html  the book for that profile
    <profile>/src/...          the executed notebooks it was built from

The committed notebooks are stored executed for the default profile, so ``jupyter-book build .``
builds the default book without executing anything; ``glm-kv book --refresh`` re-executes
them in place after a change.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Sequence

import yaml

from .hygiene import KERNEL_NAME, ensure_kernel
from .kernels import BookError, quiet_kernel_manager as _quiet_kernel_manager

SOURCES = ("_config.yml", "_toc.yml", "book", "notebooks")
IGNORE = shutil.ignore_patterns("_build", ".ipynb_checkpoints", "__pycache__", "*.pyc")
PARAMETER = "profile"
PROFILES_PARAMETER = "profiles"


@dataclass
class ProfileBook:
    profile: str             # as given (shipped name or YAML path)
    slug: str                # folder name under OUT
    html: Path | None        # OUT/<slug>/html, None with html=False
    src: Path                # OUT/<slug>/src
    seconds_execute: float = 0.0
    seconds_html: float = 0.0


@dataclass
class BookResult:
    out_dir: Path
    books: list[ProfileBook] = field(default_factory=list)
    index: Path | None = None


# ------------------------------------------------------------------------------------------------
# The book's sources
# ------------------------------------------------------------------------------------------------

def find_root(start: str | Path | None = None) -> Path:
    """The folder holding ``_config.yml`` and ``_toc.yml``: ``start``, the cwd or the repo checkout."""
    candidates = [Path(start)] if start else [Path.cwd(), Path(__file__).resolve().parents[1]]
    for c in candidates:
        c = c.resolve()
        for d in (c, *c.parents):
            if (d / "_config.yml").is_file() and (d / "_toc.yml").is_file():
                return d
    raise BookError("no book found: run from the glm-kv checkout (the folder with _config.yml and _toc.yml)")


def _toc_files(node) -> Iterable[str]:
    if isinstance(node, dict):
        for key in ("root", "file"):
            if isinstance(node.get(key), str):
                yield node[key]
        for key in ("parts", "chapters", "sections"):
            for child in node.get(key, []) or []:
                yield from _toc_files(child)
    elif isinstance(node, list):
        for child in node:
            yield from _toc_files(child)


def toc_documents(root: Path) -> list[str]:
    """Every document of ``_toc.yml`` in reading order, as paths without suffix."""
    toc = yaml.safe_load((root / "_toc.yml").read_text())
    return list(dict.fromkeys(_toc_files(toc)))


def toc_notebooks(root: Path) -> list[Path]:
    """The ``.ipynb`` documents of the table of contents, in reading order (relative to root)."""
    out = []
    for doc in toc_documents(root):
        p = Path(doc)
        if p.suffix == "":
            p = p.with_suffix(".ipynb")
        if p.suffix == ".ipynb" and (root / p).is_file():
            out.append(p)
    return out


def chapter_notebooks(root: Path) -> list[Path]:
    return [p for p in toc_notebooks(root) if p.parts[0] == "notebooks"]


# ------------------------------------------------------------------------------------------------
# Profiles
# ------------------------------------------------------------------------------------------------

def resolve_profiles(profiles: Sequence[str] | None) -> list[str]:
    """Shipped names stay names; files become absolute paths (notebooks run in another folder)."""
    from ..inputs.profile import shipped_profiles

    shipped = shipped_profiles()
    if not profiles:
        return list(shipped)
    out = []
    for p in profiles:
        if p in shipped:
            out.append(p)
        elif Path(p).is_file():
            out.append(str(Path(p).resolve()))
        else:
            raise BookError(f"profile {p!r}: neither a shipped profile ({', '.join(shipped)}) nor a YAML file")
    return list(dict.fromkeys(out))


def profile_slug(profile: str) -> str:
    from ..inputs.profile import load_profile

    label = load_profile(profile).label  # the profile's name, else the file's stem
    return re.sub(r"[^A-Za-z0-9._-]+", "-", label).strip("-") or "profile"


# ------------------------------------------------------------------------------------------------
# Executing and building
# ------------------------------------------------------------------------------------------------

def clean_notebook_metadata(path: Path) -> None:
    """Normalise an executed notebook (``hygiene.normalise``): it then differs only where outputs do."""
    import nbformat

    from .hygiene import normalise

    nb = nbformat.read(path, as_version=4)
    nbformat.write(normalise(nb), path)


INJECTED_TAG = "injected-parameters"


def finish_notebook(path: Path) -> None:
    """After execution, in one read and one write: ``hygiene.normalise``, one parameters cell
    shown (``hide_duplicate_parameters``), and papermill's injected cell given a fixed id.

    nbformat gives a new cell a random id; the injected cell is new on every execution, so
    without a fixed id two runs of the same notebook would differ in that id alone.
    """
    import nbformat

    from .hygiene import normalise

    nb = nbformat.read(path, as_version=4)
    _hide_duplicate_parameters(nb)
    for cell in nb.cells:
        if INJECTED_TAG in cell.get("metadata", {}).get("tags", []) and "id" in cell:
            cell["id"] = INJECTED_TAG
    nbformat.write(normalise(nb), path)


def _hide_duplicate_parameters(nb) -> bool:
    tags = [c.get("metadata", {}).get("tags", []) for c in nb.cells]
    if not any(INJECTED_TAG in t for t in tags):
        return False
    changed = False
    for cell, t in zip(nb.cells, tags):
        if "parameters" in t and "remove-cell" not in t:
            cell.metadata["tags"] = [*t, "remove-cell"]
            changed = True
    return changed


def hide_duplicate_parameters(path: Path) -> None:
    """Show one parameters cell: papermill's injected one hides the notebook's default cell.

    The default stays in the notebook (tagged ``remove-cell``), so the executed notebook still
    runs top to bottom; the page shows only the values it was executed with.
    """
    import nbformat

    nb = nbformat.read(path, as_version=4)
    if _hide_duplicate_parameters(nb):
        nbformat.write(nb, path)


def _kernel_env(root: Path) -> None:
    # The kernel must import this glm_kv even when it is not installed (a plain checkout).
    pkg_root = str(Path(__file__).resolve().parents[1])
    parts = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if pkg_root not in parts:
        os.environ["PYTHONPATH"] = os.pathsep.join([pkg_root, *parts])
    os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    # profile-independent results kept between runs, keyed by glm_kv's own digest (calculator.build_data)
    from .calculator import CACHE_ENV
    from .parallel import bundle_cache_dir
    os.environ.setdefault(CACHE_ENV, str(bundle_cache_dir(root).parent))


SETUP_TAG = "glm-kv-kernel-setup"


def _setup_cell(folder: Path):
    """First cell when a kernel is shared between notebooks: a clean namespace, module counters as
    after import (``kernel_state.fresh``), the notebook's folder as the working directory."""
    import nbformat

    cell = nbformat.v4.new_code_cell(
        "%reset -f\nfrom glm_kv.book.kernel_state import fresh as _fresh\n"
        f"_fresh({str(folder)!r})\ndel _fresh")
    cell.metadata["tags"] = [SETUP_TAG, "remove-cell"]
    return cell


def _strip_setup_cell(path: Path) -> None:
    import nbformat

    if not path.is_file():
        return
    nb = nbformat.read(path, as_version=4)
    keep = [c for c in nb.cells if SETUP_TAG not in c.get("metadata", {}).get("tags", [])]
    if len(keep) != len(nb.cells):
        nb.cells = keep
        nbformat.write(nb, path)


def execute_notebook(nb: Path, parameters: dict, *, kernel_name: str = KERNEL_NAME,
                     timeout: int = 600, profile_label: str = "", rel: str | None = None,
                     km=None) -> None:
    """Execute ``nb`` in place with papermill; a failure becomes a BookError naming the cell.

    With ``km`` (a started or not yet started kernel manager) the kernel is reused: the notebook
    first runs ``%reset -f`` and moves to its own folder, so it sees nothing of the previous one
    but the imported modules.
    """
    import nbformat
    import papermill as pm
    from papermill.exceptions import PapermillExecutionError

    declared = pm.inspect_notebook(str(nb))
    params = {k: v for k, v in parameters.items() if k in declared}
    original = nbformat.read(nb, as_version=4)
    source = original
    if km is not None:
        source = nbformat.from_dict(original)
        source.cells = [_setup_cell(nb.parent.resolve()), *source.cells]
    kwargs = dict(parameters=params or None, kernel_name=kernel_name, progress_bar=False,
                  log_output=False, request_save_on_cell_execute=False, execution_timeout=timeout)
    if km is not None:
        # papermill's client does not own a kernel manager it is given, so it never stops the
        # channels of the kernel client it makes from it: the manager (kernels.quiet_kernel_manager)
        # hands every notebook the same client, whose owner closes it with the kernel.
        kwargs["km"] = km
    else:
        kwargs.update(cwd=str(nb.parent), kernel_manager_class=_quiet_kernel_manager())
    try:
        pm.execute_notebook(source, str(nb), **kwargs)
    except PapermillExecutionError as e:
        first = (e.source or "").strip().splitlines()[:1]
        index = next((i for i, c in enumerate(original.cells) if c.source == e.source), e.cell_index)
        where = f"cell {index} (In [{e.exec_count}]{': ' + first[0][:60] if first else ''})"
        raise BookError(f"profile {profile_label}: notebook {rel or nb.name}: {where}: "
                        f"{e.ename}: {e.evalue}".rstrip()) from None
    except Exception as e:  # kernel died, timeout, ...
        raise BookError(f"profile {profile_label}: notebook {rel or nb.name}: "
                        f"{type(e).__name__}: {e}") from None
    finally:
        if km is not None:
            _strip_setup_cell(nb)


def build_html(src: Path, out: Path, *, strict: bool = True, profile_label: str = "") -> Path:
    """``jupyter-book build`` of the staged sources (no execution); returns the html folder."""
    from .parallel import SphinxBuilder, bundle_cache_dir, html_failure

    try:
        cache = bundle_cache_dir(find_root())
    except BookError:
        cache = None
    with SphinxBuilder(cache) as builder:
        rc = builder.submit(Path(src), Path(out), strict).result()
    html_dir = Path(out) / "_build" / "html"
    if rc != 0 or not (html_dir / "index.html").is_file():
        raise BookError(html_failure(Path(out), profile_label))
    (Path(out) / "sphinx.log").unlink(missing_ok=True)
    return html_dir


def _swap_in(staging: Path, final: Path) -> None:
    """Replace ``final`` by ``staging`` with two renames (the old result survives any failure before)."""
    old = final.with_name(final.name + ".old")
    if old.exists():
        shutil.rmtree(old)
    if final.exists():
        final.rename(old)
    staging.rename(final)
    if old.exists():
        shutil.rmtree(old)


def default_jobs() -> int:
    """Kernels at once by default: one per core."""
    return max(1, os.cpu_count() or 1)


def _progress(total: int, enabled: bool):
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, unit="step", dynamic_ncols=True, file=sys.stderr,
                bar_format="{desc:<46.46} {bar} {n_fmt}/{total_fmt} [{elapsed}<{remaining}]")


def _stage(root: Path, staging: Path) -> Path:
    """A fresh copy of the book's sources in ``staging/src``."""
    if staging.exists():
        shutil.rmtree(staging)
    src = staging / "src"
    src.mkdir(parents=True)
    for name in SOURCES:
        s = root / name
        if s.is_dir():
            shutil.copytree(s, src / name, ignore=IGNORE)
        elif s.is_file():
            shutil.copy2(s, src / name)
    return src


def model_book(profile: str) -> tuple[str, tuple[str, ...]] | None:
    """(model name, the documents of its book, root first) for a profile whose model is not GLM-5.3-Flash
    (``model_page.model_book_documents``); None for GLM-5.3-Flash, whose book is ``_toc.yml``'s. The
    chapters walk GLM-5.3-Flash's ledgers by name, so another model's book keeps the pages that read the same
    for every model, resolved from the same plan ``glm-kv plan`` prints."""
    from ..inputs.profile import load_profile
    from ..ledgers.plan import compute_plan
    from .model_page import is_glm53, model_book_documents

    plan = compute_plan(load_profile(profile))
    return None if is_glm53(plan) else (plan.config.name, model_book_documents(plan))


def stage_model_book(src: Path, documents: Sequence[str], model: str) -> list[Path]:
    """Rewrite the staged ``_toc.yml`` to ``documents`` and remove every other page from the staged copy, so
    the (strict) Sphinx build sees only the model book's pages; the staged ``_config.yml`` takes the model's
    title. Returns its notebooks, relative to ``src``."""
    config = src / "_config.yml"
    config.write_text(re.sub(r"(?m)^title: .*$", lambda _: "title: " + json.dumps(
        f"{model}: its KV cache under SGLang 0.5.23 (glm-kv)"), config.read_text(), count=1))
    toc = {"format": "jb-book", "root": documents[0], "chapters": [{"file": d} for d in documents[1:]]}
    (src / "_toc.yml").write_text("# a model book (glm_kv.book.runner.stage_model_book)\n"
                                  + yaml.safe_dump(toc, sort_keys=False))
    keep = {src / f"{d}.ipynb" for d in documents} | {src / f"{d}.md" for d in documents}
    for folder in ("book", "notebooks"):
        for f in (src / folder).rglob("*"):
            if f.suffix in (".ipynb", ".md") and f not in keep and "_static" not in f.parts:
                f.unlink()
    return [Path(f"{d}.ipynb") for d in documents if (src / f"{d}.ipynb").is_file()]


def run_book(profiles: Sequence[str] | None = None, out_dir: str | Path = "_build/profiles", *,
             root: str | Path | None = None, html: bool = True, strict: bool = True,
             progress: bool = True, kernel_name: str = KERNEL_NAME, timeout: int = 600,
             jobs: int | None = None, log: Callable[[str], None] | None = None) -> BookResult:
    """Execute every chapter per profile with papermill and build one HTML book per profile.

    ``profiles``: shipped names or YAML paths (default: every shipped profile). ``jobs``: kernels
    run at once (default: the number of cores); every profile's notebooks share them, and one
    Sphinx builder builds every book (``parallel``). The files written do not depend on ``jobs``.
    Raises BookError on the first failure (in profile, then notebook order), naming profile,
    notebook and cell; results already in place stay as they were.
    """
    from .import_guard import skip
    from .parallel import (ProfileJob, SphinxBuilder, bundle_cache_dir, load_seconds, longest_first,
                           run_jobs, save_seconds)

    skip()  # before papermill imports jsonschema (import_guard says why)

    root = find_root(root)
    out_dir = Path(out_dir).resolve()
    profiles = resolve_profiles(profiles)
    jobs = jobs if jobs is not None else default_jobs()
    if jobs < 1:
        raise BookError(f"jobs: must be at least 1, got {jobs}")
    notebooks = toc_notebooks(root)
    if not notebooks:
        raise BookError(f"_toc.yml in {root} lists no notebook")
    _kernel_env(root)
    if kernel_name == KERNEL_NAME:
        ensure_kernel()
    out_dir.mkdir(parents=True, exist_ok=True)
    staging_root = out_dir / ".staging"
    result = BookResult(out_dir)
    run: list[ProfileJob] = []
    for i, prof in enumerate(profiles):
        slug = profile_slug(prof)
        label = slug if slug == prof else f"{slug} ({prof})"
        staging = staging_root / slug
        src = _stage(root, staging)
        book = model_book(prof)   # another model than GLM-5.3-Flash: its own, shorter book
        run.append(ProfileJob(i, prof, slug, label, staging,
                              {PARAMETER: prof, PROFILES_PARAMETER: list(profiles)},
                              notebooks if book is None else stage_model_book(src, book[1], book[0]), src=src))
    bar = _progress(sum(len(j.notebooks) + (1 if html else 0) for j in run), progress)
    say = log or (lambda m: (bar.write(m) if bar is not None else print(m, file=sys.stderr)))
    builder = SphinxBuilder(bundle_cache_dir(root)).start() if html else None
    lock = threading.Lock()
    finished: dict[int, ProfileBook] = {}
    timings = bundle_cache_dir(root).parent / "notebook_seconds.json"
    seconds: dict[str, list[float]] = {str(n): [] for j in run for n in j.notebooks}

    def execute(job: ProfileJob, rel: Path, km) -> None:
        t0 = time.perf_counter()
        execute_notebook(job.src / rel, job.parameters, kernel_name=kernel_name, timeout=timeout,
                         profile_label=job.label, rel=str(rel), km=km)
        finish_notebook(job.src / rel)
        with lock:
            seconds[str(rel)].append(time.perf_counter() - t0)

    def finish(job: ProfileJob) -> None:
        _swap_in(job.staging, out_dir / job.slug)
        book = ProfileBook(job.profile, job.slug, out_dir / job.slug / "html" if html else None,
                           out_dir / job.slug / "src", job.seconds_execute, job.seconds_html)
        with lock:
            finished[job.index] = book
            say(f"{job.slug}: executed {len(job.notebooks)} notebooks in {job.seconds_execute:.1f} s"
                + (f", HTML in {job.seconds_html:.1f} s -> {book.html}/index.html" if html else ""))

    try:
        run_jobs(run, workers=jobs, html=html, strict=strict, kernel_name=kernel_name, timeout=timeout,
                 builder=builder, execute=execute, finish=finish, bar=bar,
                 order=lambda job, last=load_seconds(timings): longest_first(job.notebooks, last))
    finally:
        save_seconds(timings, seconds)
        if builder is not None:
            builder.close()
        if bar is not None:
            bar.close()
        if staging_root.exists() and not any(staging_root.iterdir()):
            staging_root.rmdir()
    result.books = [finished[i] for i in sorted(finished)]
    result.index = write_index(out_dir, profiles)
    return result


def write_index(out_dir: Path, profiles: Sequence[str]) -> Path:
    """``OUT/index.html``: every shipped profile (and the run's own) compared by what fits, sorted,
    the best profile per question named, computed from the plans whether or not a book was built;
    each profile links to its book where one is built (``glm_kv.book.comparison.index_page``)."""
    from ..inputs.profile import load_profile, shipped_profiles
    from .comparison import index_page

    names = list(dict.fromkeys([*shipped_profiles(), *profiles]))
    built = {p.name for p in out_dir.iterdir() if p.is_dir() and (p / "html" / "index.html").is_file()}
    books = {load_profile(n).label: f"{profile_slug(n)}/html/index.html" for n in names
             if profile_slug(n) in built}
    path = out_dir / "index.html"
    path.write_text(index_page(names, books), encoding="utf-8")
    _copy_cjk_font(out_dir)
    return path


def _copy_cjk_font(out_dir: Path) -> None:
    """The index's title is Chinese: put the book's CJK subset (and its OFL licence) beside it, from
    a built book's ``_static`` or else from the sources this package was installed from."""
    from .static_assets import CJK_FONT_FILE, CJK_FONT_LICENSE, write_cjk_font

    for book in sorted(out_dir.glob(f"*/html/_static/{CJK_FONT_FILE}")):
        for name in (CJK_FONT_FILE, CJK_FONT_LICENSE):
            if (book.parent / name).is_file():
                shutil.copyfile(book.parent / name, out_dir / name)
        return
    write_cjk_font(out_dir, Path(__file__).resolve().parents[2])


def book_links(profiles: Sequence[str] | None, this_profile: str) -> "Html":
    """Links from this book to the other books of the same ``glm-kv book`` run (OUT/<slug>/html/).

    The committed book (built by ``jupyter-book build .``) belongs to no run: it says how to build
    the others instead of linking to books that do not exist.
    """
    import html as _html

    from .tables import Html

    if not profiles:
        return Html('<p class="glm-kv-books">Built alone (not by <code>glm-kv book</code>): build every '
                    'profile\'s book with <code>glm-kv book</code>; <code>_build/profiles/index.html</code> '
                    'then links them.</p>', "no run: no links")
    items = []
    for p in profiles:
        slug = _html.escape(profile_slug(p))
        here = " (this book)" if p == this_profile else ""
        items.append(f'<li><a href="../../../{slug}/html/index.html">{slug}</a>{here}</li>')
    return Html('<p class="glm-kv-books">The books of this run (and <a href="../../../index.html">the '
                'index of every profile</a>):</p><ul>' + "".join(items) + "</ul>",
                ", ".join(profile_slug(p) for p in profiles))


def refresh_committed(root: str | Path | None = None, *, kernel_name: str = KERNEL_NAME,
                      progress: bool = True, only: Sequence[str] | None = None) -> list[Path]:
    """Re-execute the committed notebooks in place for the default profile (no injected cell).

    ``only``: notebook stems to refresh (default: every notebook of the table of contents).
    """
    root = find_root(root)
    _kernel_env(root)
    if kernel_name == KERNEL_NAME:
        ensure_kernel()
    notebooks = toc_notebooks(root)
    if only is not None:
        notebooks = [n for n in notebooks if n.stem in set(only)]
    bar = _progress(len(notebooks), progress)

    def execute(job, rel: Path, km) -> None:
        execute_notebook(job.src / rel, {}, kernel_name=kernel_name, timeout=600,
                         profile_label=job.label, rel=str(rel), km=km)
        finish_notebook(job.src / rel)

    from .parallel import ProfileJob, run_jobs

    try:
        run_jobs([ProfileJob(0, "default", "default", "default", root, {}, notebooks, src=root)],
                 workers=default_jobs(), html=False, strict=True, kernel_name=kernel_name, timeout=600,
                 builder=None, execute=execute, finish=lambda job: None, bar=bar)
    finally:
        if bar is not None:
            bar.close()
    return [root / r for r in notebooks]
