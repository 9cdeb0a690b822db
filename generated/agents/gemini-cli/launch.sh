#!/usr/bin/env bash
# a2c launcher for Gemini CLI (`gemini-cli`, cli agent), compiled by a2c 0.1.0.
# Generated from specs/agents/gemini-cli.yaml: edit the spec, then run `a2c build`.
#
# The runtime runs this inside the sandbox with the workspace as cwd and sets A2C_WORKSPACE,
# A2C_PROMPT_FILE (the rendered prompt.md), A2C_DRIVER_MODEL and the other A2C_* variables.
# Transcript: stream-json on stdout -> logs/transcript.jsonl
# The recorder hook (BASH_ENV) logs the agent's commands, not this launcher's.
trap - DEBUG
unset A2C_HOOK_ACTIVE
set -euo pipefail
cd "${A2C_WORKSPACE:?A2C_WORKSPACE is not set}"
A2C_PROMPT="$(cat "${A2C_PROMPT_FILE:?A2C_PROMPT_FILE is not set}")"
export A2C_PROMPT
A2C_DRIVER_MODEL="${A2C_DRIVER_MODEL:-gemini-2.5-pro}"
: "${A2C_DRIVER_MODEL:?gemini-cli needs a driver model (--driver)}"
export A2C_DRIVER_MODEL="${A2C_DRIVER_MODEL:-}"
# Passed through from the host by the runtime (never stored in the bundle): GEMINI_API_KEY, GOOGLE_API_KEY, GOOGLE_CLOUD_PROJECT
exec gemini -p "$A2C_PROMPT" --output-format stream-json --approval-mode=yolo --model "$A2C_DRIVER_MODEL"
