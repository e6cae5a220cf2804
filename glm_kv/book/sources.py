"""Links from the book to the SGLang code it describes, at the release tag and the article's commit.

Line numbers were read from the ``sglang==0.5.23`` wheel (``tests/book/test_sources.py`` re-reads
them from ``.venv-sglang`` when it exists, so a stale line fails). The article's own citations
(file:line at upstream ``f4de6abee6``) are named by commit; the book's ``article`` layout is that
commit.

Every SGLang class or function the book names links here (issue 21, item 8), in three ways:

* prose writes ``{sglang}`IndexKeyCache``` (a Sphinx role, this module's ``setup``; in
  ``_config.yml`` ``sphinx.extra_extensions``): the name in code type, linked to its line;
* a glued name (a class the plan picks) is glued with ``source_md(name)``, a Markdown link;
* HTML the package writes (the pitfall sections) goes through ``link_names``;
* a chapter section ends with ``source_links([...])``, the list of what it read.

``tests/book/test_sources.py`` fails a chapter whose prose names one of ``SOURCES`` in plain
backticks, and ``scripts/reader_check.py`` fails a built page that shows one unlinked.
"""
from __future__ import annotations

import html
import re

from .literal import Html

SGLANG_REPO = "https://github.com/sgl-project/sglang"
RELEASE_TAG = "v0.5.23"
ARTICLE_COMMIT = "f4de6abee6"

# name -> (path inside the sglang package, line at v0.5.23, the text that line starts with)
SOURCES: dict[str, tuple[str, int, str]] = {
    "calculate_mla_kv_cache_dim": ("srt/mem_cache/kv_cache_configurator.py", 3412, "def calculate_mla_kv_cache_dim("),
    "IndexKeyCache": ("srt/mem_cache/index_key_cache.py", 21, "class IndexKeyCache:"),
    "IndexKeyCache._buffer_shape": ("srt/mem_cache/index_key_cache.py", 40, "    def _buffer_shape("),
    "HybridLinearKVPool": ("srt/mem_cache/memory_pool.py", 4228, "class HybridLinearKVPool("),
    "DSATokenToKVPool": ("srt/mem_cache/memory_pool.py", 5279, "class DSATokenToKVPool("),
    "_compress_tail_k": ("srt/mem_cache/memory_pool.py", 5440, "            self._compress_tail_k: "),
    "_compress_tail_score": ("srt/mem_cache/memory_pool.py", 5450, "            self._compress_tail_score: "),
    "MambaPool": ("srt/mem_cache/memory_pool.py", 505, "class MambaPool:"),
    "mamba_cache_per_req": ("srt/configs/mamba_utils.py", 116, "    def mamba_cache_per_req("),
    "_calculate_mamba_ratio": ("srt/mem_cache/kv_cache_configurator.py", 3062, "    def _calculate_mamba_ratio("),
    "_handle_max_mamba_cache": ("srt/mem_cache/kv_cache_configurator.py", 3229, "    def _handle_max_mamba_cache("),
    "resolve_max_num_reqs": ("srt/mem_cache/kv_cache_configurator.py", 3119, "    def resolve_max_num_reqs("),
    "calculate_pool_sizes": ("srt/model_executor/pool_configurator.py", 180, "    def calculate_pool_sizes("),
    "_compute_dsa_indexer_cell_size": ("srt/model_executor/pool_configurator.py", 560,
                                       "    def _compute_dsa_indexer_cell_size("),
    "_deepseek_family_overrides": ("srt/arg_groups/model_overrides/deepseek_v2.py", 51,
                                   "def _deepseek_family_overrides("),
    "HostPoolGroup": ("srt/mem_cache/pool_host/group.py", 31, "class HostPoolGroup"),
    "MLATokenToKVPoolHost": ("srt/mem_cache/pool_host/mla.py", 92, "class MLATokenToKVPoolHost("),
    "MambaPoolHost": ("srt/mem_cache/pool_host/mamba.py", 75, "class MambaPoolHost("),
    "DSAIndexerPoolHost": ("srt/mem_cache/pool_host/dsa.py", 143, "class DSAIndexerPoolHost("),
    "ComponentData": ("srt/mem_cache/unified_cache/components/base.py", 69, "class ComponentData"),
    "UnifiedRadixCache": ("srt/mem_cache/unified_radix_cache.py", 199, "class UnifiedRadixCache("),
    "match_prefix": ("srt/mem_cache/unified_radix_cache.py", 613, "    def match_prefix("),
    "evict_host": ("srt/mem_cache/unified_radix_cache.py", 1433, "    def evict_host("),
    "ReqToTokenPool": ("srt/mem_cache/memory_pool.py", 376, "class ReqToTokenPool:"),
    "MLATokenToKVPool": ("srt/mem_cache/memory_pool.py", 4754, "class MLATokenToKVPool("),
    "KimiLinearStateShape": ("srt/configs/mamba_utils.py", 299, "class KimiLinearStateShape:"),
    "ServerArgs": ("srt/server_args.py", 231, "class ServerArgs:"),
    "_profile_available_bytes": ("srt/mem_cache/kv_cache_configurator.py", 2990, "    def _profile_available_bytes("),
    "_split_hicache_size": ("srt/mem_cache/hybrid_cache/hybrid_pool_assembler.py", 239, "def _split_hicache_size("),
    "handle_gpu_memory_settings": ("srt/arg_groups/memory_hook.py", 47, "def handle_gpu_memory_settings("),
    "_mamba_radix_cache_resolution": ("srt/arg_groups/overrides.py", 454, "def _mamba_radix_cache_resolution("),
}


def source_url(name: str) -> str:
    path, line, _ = SOURCES[name]
    return f"{SGLANG_REPO}/blob/{RELEASE_TAG}/python/sglang/{path}#L{line}"


class SourceList(Html):
    """Links to SGLang's code at the release tag, as literal HTML for the page."""


def source_links(names, *, article_note: bool = True) -> SourceList:
    """A short list of links to SGLang's code at the release tag (HTML for the page)."""

    items = "".join(f'<li><a href="{html.escape(source_url(n))}"><code>{html.escape(n)}</code></a> '
                    f'<span class="where">python/sglang/{html.escape(SOURCES[n][0])}:{SOURCES[n][1]}</span></li>'
                    for n in names)
    note = (f'<p class="glm-kv-src-note">At SGLang <code>{RELEASE_TAG}</code>. The article cites the same '
            f'objects at upstream commit <a href="{SGLANG_REPO}/tree/{ARTICLE_COMMIT}"><code>{ARTICLE_COMMIT}</code></a>'
            f' (the book\'s <code>article</code> layout).</p>') if article_note else ""
    text = "\n".join(source_url(n) for n in names)
    return SourceList(f'<div class="glm-kv-sources"><p><strong>SGLang source</strong></p><ul>{items}</ul>{note}</div>', text)


def source_md(name: str) -> str:
    """``name`` as a Markdown link to its line (for ``{glue:md}``); a name not in SOURCES in code type."""
    return f"[`{name}`]({source_url(name)})" if name in SOURCES else f"`{name}`"


_NAMES = re.compile(r"(?<![\w.])(" + "|".join(sorted(map(re.escape, SOURCES), key=len, reverse=True))
                    + r")(?![\w])")


def link_names(text: str) -> str:
    """Escaped HTML of ``text`` with every SOURCES name linked (in code type), for HTML glm_kv writes."""
    out, last = [], 0
    for m in _NAMES.finditer(text):
        out += [html.escape(text[last:m.start()]),
                f'<a href="{html.escape(source_url(m.group(1)))}"><code>{html.escape(m.group(1))}</code></a>']
        last = m.end()
    return "".join(out) + html.escape(text[last:])


def sglang_role(name, rawtext, text, lineno, inliner, options=None, content=None):
    """``{sglang}`IndexKeyCache``` (or ``{sglang}`label <IndexKeyCache>```): the name linked to its line."""
    from docutils import nodes

    m = re.fullmatch(r"\s*(.*?)\s*<([^<>]+)>\s*", text)
    label, key = (m.group(1), m.group(2)) if m else (text.strip(), text.strip())
    if key not in SOURCES:
        msg = inliner.reporter.error(f"{{sglang}}: {key!r} is not in glm_kv.book.sources.SOURCES", line=lineno)
        return [inliner.problematic(rawtext, rawtext, msg)], [msg]
    ref = nodes.reference(rawtext, "", refuri=source_url(key), classes=["glm-kv-sglang"])
    ref += nodes.literal(label, label)
    return [ref], []


def setup(app):  # Sphinx extension hook: `sphinx.extra_extensions: [glm_kv.book.sources]`
    app.add_role("sglang", sglang_role)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}


def glue_source_names(names: dict[str, str]) -> None:
    """Glue each key as its SGLang name linked to its line (``{glue:md}``): for a class the plan picks."""
    from IPython.display import Markdown
    from myst_nb import glue

    for key, name in names.items():
        glue(key, Markdown(source_md(name)), display=False)


_MD_NAMES = re.compile(r"(?<![\[\w])`(" + "|".join(sorted(map(re.escape, SOURCES), key=len, reverse=True))
                       + r")`(?!\])")


def link_md(markdown: str) -> str:
    """Markdown with every SOURCES name in plain backticks made a link to its line (glued prose)."""
    return _MD_NAMES.sub(lambda m: source_md(m.group(1)), markdown)
