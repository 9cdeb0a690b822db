#!/usr/bin/env bash
# a2c launcher for OpenHands (`openhands`, cli agent), compiled by a2c 0.1.0.
# Generated from specs/agents/openhands.yaml: edit the spec, then run `a2c build`.
#
# The runtime runs this inside the sandbox with the workspace as cwd and sets A2C_WORKSPACE,
# A2C_PROMPT_FILE (the rendered prompt.md), A2C_DRIVER_MODEL and the other A2C_* variables.
# Transcript: jsonl on stdout -> logs/transcript.jsonl
# The recorder hook (BASH_ENV) logs the agent's commands, not this launcher's.
trap - DEBUG
unset A2C_HOOK_ACTIVE
set -euo pipefail
cd "${A2C_WORKSPACE:?A2C_WORKSPACE is not set}"
A2C_PROMPT="$(cat "${A2C_PROMPT_FILE:?A2C_PROMPT_FILE is not set}")"
export A2C_PROMPT
A2C_DRIVER_MODEL="${A2C_DRIVER_MODEL:-anthropic/claude-sonnet-4-5-20250929}"
: "${A2C_DRIVER_MODEL:?openhands needs a driver model (--driver)}"
export A2C_DRIVER_MODEL="${A2C_DRIVER_MODEL:-}"
export LLM_MODEL="${A2C_DRIVER_MODEL}"
# Passed through from the host by the runtime (never stored in the bundle): LLM_API_KEY, LLM_BASE_URL
exec openhands --headless --json --override-with-envs -t "$A2C_PROMPT"
