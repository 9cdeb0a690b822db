#!/usr/bin/env bash
# a2c launcher for Reference agent: submits the base model unchanged (`ref-copy`, reference agent), compiled by a2c 0.1.0.
# Generated from specs/agents/ref-copy.yaml: edit the spec, then run `a2c build`.
#
# The runtime runs this inside the sandbox with the workspace as cwd and sets A2C_WORKSPACE,
# A2C_PROMPT_FILE (the rendered prompt.md), A2C_DRIVER_MODEL and the other A2C_* variables.
# Transcript: text on stdout -> logs/transcript.log
# The recorder hook (BASH_ENV) logs the agent's commands, not this launcher's.
trap - DEBUG
unset A2C_HOOK_ACTIVE
set -euo pipefail
cd "${A2C_WORKSPACE:?A2C_WORKSPACE is not set}"
A2C_PROMPT="$(cat "${A2C_PROMPT_FILE:?A2C_PROMPT_FILE is not set}")"
export A2C_PROMPT
export A2C_DRIVER_MODEL="${A2C_DRIVER_MODEL:-}"
exec python -m a2c.agents.reference.copy
