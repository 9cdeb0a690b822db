#!/usr/bin/env bash
# a2c launcher for Claude Code (`claude-code`, cli agent, version 2.1.332), compiled by a2c 0.1.0.
# Generated from specs/agents/claude-code.yaml: edit the spec, then run `a2c build`.
#
# The runtime runs this inside the sandbox with the workspace as cwd and sets A2C_WORKSPACE,
# A2C_PROMPT_FILE (the rendered prompt.md), A2C_DRIVER_MODEL and the other A2C_* variables.
# Driver: anthropic wire, through the run's gateway (A2C_DRIVER_SOCKET, key A2C_DRIVER_KEY);
# HOME is the run's agent home, where the scaffold keeps its configuration and session logs.
# Transcript: stream-json on stdout -> logs/transcript.jsonl; native log: $HOME/.claude/projects/*/*.jsonl
# The recorder hook (BASH_ENV) logs the agent's commands, not this launcher's.
trap - DEBUG
unset A2C_HOOK_ACTIVE
set -euo pipefail
cd "${A2C_WORKSPACE:?A2C_WORKSPACE is not set}"
A2C_PROMPT="$(cat "${A2C_PROMPT_FILE:?A2C_PROMPT_FILE is not set}")"
export A2C_PROMPT
A2C_DRIVER_MODEL="${A2C_DRIVER_MODEL:-claude-sonnet-4-5}"
: "${A2C_DRIVER_MODEL:?claude-code needs a driver model (--driver)}"
export A2C_DRIVER_MODEL="${A2C_DRIVER_MODEL:-}"
# The gateway is a Unix socket; the scaffold wants a base URL: a forwarder on the sandbox's own
# loopback leads to it (it forks into the background and ends with this process).
: "${HOME:?HOME is not set}"
: "${A2C_DRIVER_KEY:?A2C_DRIVER_KEY is not set: claude-code reaches its driver only through the run gateway}"
if [ -z "${A2C_DRIVER_URL:-}" ]; then
  : "${A2C_DRIVER_SOCKET:?A2C_DRIVER_SOCKET is not set: no driver gateway for claude-code}"
  A2C_DRIVER_URL="$(python -m a2c.runtime.sandbox.loopback_forwarder --socket "$A2C_DRIVER_SOCKET" --daemon --parent "$$")"
fi
export A2C_DRIVER_URL A2C_DRIVER_KEY
export ANTHROPIC_API_KEY="${A2C_DRIVER_KEY}"
export ANTHROPIC_BASE_URL="${A2C_DRIVER_URL}"
export ANTHROPIC_DEFAULT_HAIKU_MODEL="${A2C_DRIVER_MODEL}"
export ANTHROPIC_SMALL_FAST_MODEL="${A2C_DRIVER_MODEL}"
export BASH_DEFAULT_TIMEOUT_MS="1800000"
export BASH_MAX_TIMEOUT_MS="43200000"
export CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1"
export CLAUDE_CODE_MAX_CONTEXT_TOKENS="${A2C_DRIVER_CONTEXT:-0}"
export CLAUDE_CONFIG_DIR="${HOME}/.claude"
export DISABLE_AUTOUPDATER="1"
export DISABLE_ERROR_REPORTING="1"
export DISABLE_TELEMETRY="1"
exec claude -p "$A2C_PROMPT" --output-format stream-json --verbose --dangerously-skip-permissions --model "$A2C_DRIVER_MODEL"
