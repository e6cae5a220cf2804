#!/usr/bin/env bash
# Create (or reuse) .venv-sglang/: SGLang 0.5.23 installed without its GPU dependencies,
# for the agreement suite in tests/sglang (issue 3). Idempotent: a marker file named
# after a hash of this script, tests/sglang/requirements.txt and pyproject.toml says the
# venv already holds the pinned set; then nothing is done.
#
# Why torch 2.14.1 and not the CPU wheel torch 2.13.0+cpu in /opt/wheels: SGLang imports
# torchvision at import time (sglang.srt.configs -> multimodal/internvl_utils), and the
# only torchvision wheels reachable here are CUDA builds; with a CPU torch they fail with
# "operator torchvision::nms does not exist". torch 2.14.1 (the version sglang 0.5.23
# pins) + torchvision 0.29.1 + triton 3.8.0 import fine on a machine without a GPU.
#
# Usage: scripts/sglang-env.sh            # create or reuse
#        FORCE=1 scripts/sglang-env.sh    # rebuild from scratch
#        PYTHON=python3.11 scripts/sglang-env.sh
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv-sglang"
REQ="$ROOT/tests/sglang/requirements.txt"
PY="${PYTHON:-python3.11}"

KEY="$(cat "${BASH_SOURCE[0]}" "$REQ" "$ROOT/pyproject.toml" | sha256sum | cut -c1-16)"
MARKER="$VENV/.glm-kv-sglang-env-$KEY"

if [[ -f "$MARKER" && -z "${FORCE:-}" ]]; then
    echo "sglang-env: $VENV is up to date (marker ${MARKER##*/})"
    exit 0
fi

start=$(date +%s)
echo "sglang-env: building $VENV with $($PY --version)"
rm -rf "$VENV"
"$PY" -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip install --quiet --disable-pip-version-check)

# 1. torch stack (from local disk where pip is configured so; else PyPI)
"${PIP[@]}" torch==2.14.1 torchvision==0.29.1 triton==3.8.0
# 2. SGLang itself, without its (GPU) dependency list
"${PIP[@]}" --no-deps sglang==0.5.23
# 3. the pure-Python packages its memory-pool / sizing / server-args code imports
"${PIP[@]}" -r "$REQ"
# 4. this repository's package, editable, with its own dependencies
"${PIP[@]}" -e "$ROOT"

"$VENV/bin/python" - <<'EOF'
import importlib.metadata as md
import sglang.srt.mem_cache.memory_pool  # noqa: F401
import sglang.srt.mem_cache.kv_cache_configurator  # noqa: F401
import sglang.srt.server_args  # noqa: F401
import glm_kv.ledgers.plan  # noqa: F401
print("sglang-env: sglang", md.version("sglang"), "torch", md.version("torch"), "import ok")
EOF

rm -f "$VENV"/.glm-kv-sglang-env-*
touch "$MARKER"
echo "sglang-env: done in $(( $(date +%s) - start )) s"
