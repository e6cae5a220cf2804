#!/usr/bin/env bash
# .venv-vllm: vLLM 0.33.0's own KV-cache sizing driven on a CPU (tests/vllm). Idempotent: a marker named
# after a hash of this script, tests/vllm/requirements.txt, constraints.txt and stub_libcuda.c says the venv is
# complete; with it present nothing is done. Recipe: ../shared/reference/vllm-0.33.md (appendix A).
# Cost: 8.2 GB in the venv (torch's CUDA-13 wheel and its nvidia libraries; the downloads take seconds);
# from scratch 211-236 s wall, 133 s CPU (unpacking and writing, not the network: tests/vllm/README.md).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${VLLM_VENV:-.venv-vllm}"
PYTHON="${PYTHON311:-python3.11}"
REQ=tests/vllm/requirements.txt
CONSTRAINTS=tests/vllm/constraints.txt
STUB_SRC=tests/vllm/stub_libcuda.c
HASH=$(cat scripts/vllm-env.sh "$REQ" "$CONSTRAINTS" "$STUB_SRC" | sha256sum | cut -c1-16)
MARKER="$VENV/.vllm-env-$HASH"
if [ -f "$MARKER" ]; then
  echo "vllm-env: $VENV is up to date ($MARKER)"
  exit 0
fi
START=$(date +%s)
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
rm -f "$VENV"/.vllm-env-*
# every package pinned (constraints.txt: the freeze of a venv that passed tests/vllm)
# --no-cache-dir: torch 2.14.0 and its CUDA libraries come from PyPI (about 4 GB); a copy in pip's cache
# beside the 8.2 GB venv can fill a CI machine's disk.
PIP="$VENV/bin/python -m pip install --quiet --progress-bar off --disable-pip-version-check --no-cache-dir -c $CONSTRAINTS"
disk() { df -h --output=avail "$VENV" | tail -1 | tr -d ' '; }
echo "vllm-env: building $VENV ($(disk) free on its disk)"
# one retry for a download that broke off; the second failure stops the script with pip's message
pip_install() { $PIP "$@" || { echo "vllm-env: pip install $* failed ($(disk) free); retrying once"; $PIP "$@"; }; }
# vLLM 0.33.0 pins torch 2.14.0; this machine's pip constraints cap torch at what lies on its disk.
pip_install torch==2.14.0 torchvision==0.29.0
pip_install --no-deps vllm==0.33.0
pip_install -r "$REQ" torch==2.14.0 torchvision==0.29.0
# Stub driver: vLLM's .so files need libcuda.so.1; every cu* symbol they leave undefined gets a stub.
SITE=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
BUILD=$(mktemp -d)
trap 'rm -rf "$BUILD"' EXIT
for f in "$SITE"/vllm/*.so; do nm -D --undefined-only "$f" | awk '{print $2}'; done \
  | sed 's/@.*//' | grep -E '^cu[A-Z]' | sort -u \
  | grep -v -x -E 'cuInit|cuDeviceGet|cuDeviceGetCount|cuGetErrorString|cuGetErrorName' \
  | sed 's/.*/STUB(&)/' > "$BUILD/stub_syms.h" || true
mkdir -p "$VENV/stubcuda"
gcc -shared -fPIC -O1 -I"$BUILD" -Wl,-soname,libcuda.so.1 -o "$VENV/stubcuda/libcuda.so.1" "$STUB_SRC"
echo "vllm-env: stub libcuda.so.1 with $(wc -l < "$BUILD/stub_syms.h") linked symbols + 5 fixed"
"$VENV/bin/python" -m pip freeze > "$VENV/freeze.txt"
touch "$MARKER"
echo "vllm-env: built in $(( $(date +%s) - START )) s; venv size $(du -sh "$VENV" | cut -f1)"
