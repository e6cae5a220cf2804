"""Links from the book to the SGLang code it describes, at the release tag and the article's commit.

Line numbers were read from the ``sglang==0.5.23`` wheel (``tests/book/test_sources.py`` re-reads
them from ``.venv-sglang`` when it exists, so a stale line fails). The article's own citations
(file:line at upstream ``f4de6abee6``) are named by commit; the book's ``article`` layout is that
commit. Chapters call ``source_links([...])``.
"""
from __future__ import annotations

import html

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
}


def source_url(name: str) -> str:
    path, line, _ = SOURCES[name]
    return f"{SGLANG_REPO}/blob/{RELEASE_TAG}/python/sglang/{path}#L{line}"


def source_links(names, *, article_note: bool = True):
    """A short list of links to SGLang's code at the release tag (HTML for the page)."""
    from .tables import Html

    items = "".join(f'<li><a href="{html.escape(source_url(n))}"><code>{html.escape(n)}</code></a> '
                    f'<span class="where">python/sglang/{html.escape(SOURCES[n][0])}:{SOURCES[n][1]}</span></li>'
                    for n in names)
    note = (f'<p class="glm-kv-src-note">At SGLang <code>{RELEASE_TAG}</code>. The article cites the same '
            f'objects at upstream commit <a href="{SGLANG_REPO}/tree/{ARTICLE_COMMIT}"><code>{ARTICLE_COMMIT}</code></a>'
            f' (the book\'s <code>article</code> layout).</p>') if article_note else ""
    text = "\n".join(source_url(n) for n in names)
    return Html(f'<div class="glm-kv-sources"><p><strong>SGLang source</strong></p><ul>{items}</ul>{note}</div>', text)
