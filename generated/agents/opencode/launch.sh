#!/usr/bin/env bash
# a2c launcher for OpenCode (`opencode`, cli agent, version 1.18.33), compiled by a2c 0.1.0.
# Generated from specs/agents/opencode.yaml: edit the spec, then run `a2c build`.
#
# The runtime runs this inside the sandbox with the workspace as cwd and sets A2C_WORKSPACE,
# A2C_PROMPT_FILE (the rendered prompt.md), A2C_DRIVER_MODEL and the other A2C_* variables.
# Driver: anthropic wire, through the run's gateway (A2C_DRIVER_SOCKET, key A2C_DRIVER_KEY);
# HOME is the run's agent home, where the scaffold keeps its configuration and session logs.
# Transcript: jsonl on stdout -> logs/transcript.jsonl; native log: $HOME/.local/share/opencode/opencode.db
# The recorder hook (BASH_ENV) logs the agent's commands, not this launcher's.
trap - DEBUG
unset A2C_HOOK_ACTIVE
set -euo pipefail
cd "${A2C_WORKSPACE:?A2C_WORKSPACE is not set}"
A2C_PROMPT="$(cat "${A2C_PROMPT_FILE:?A2C_PROMPT_FILE is not set}")"
export A2C_PROMPT
A2C_DRIVER_MODEL="${A2C_DRIVER_MODEL:-claude-sonnet-4-5}"
: "${A2C_DRIVER_MODEL:?opencode needs a driver model (--driver)}"
export A2C_DRIVER_MODEL="${A2C_DRIVER_MODEL:-}"
# The gateway is a Unix socket; the scaffold wants a base URL: a forwarder on the sandbox's own
# loopback leads to it (it forks into the background and ends with this process).
: "${HOME:?HOME is not set}"
: "${A2C_DRIVER_KEY:?A2C_DRIVER_KEY is not set: opencode reaches its driver only through the run gateway}"
if [ -z "${A2C_DRIVER_URL:-}" ]; then
  : "${A2C_DRIVER_SOCKET:?A2C_DRIVER_SOCKET is not set: no driver gateway for opencode}"
  A2C_DRIVER_URL="$(python -m a2c.runtime.sandbox.loopback_forwarder --socket "$A2C_DRIVER_SOCKET" --daemon --parent "$$")"
fi
export A2C_DRIVER_URL A2C_DRIVER_KEY
export OPENCODE_DISABLE_AUTOUPDATE="1"
export OPENCODE_DISABLE_CLAUDE_CODE="1"
export OPENCODE_DISABLE_DEFAULT_PLUGINS="1"
export OPENCODE_DISABLE_LSP_DOWNLOAD="1"
export OPENCODE_DISABLE_MODELS_FETCH="1"
export OPENCODE_DISABLE_SHARE="1"
export OPENCODE_EXPERIMENTAL_BASH_DEFAULT_TIMEOUT_MS="1800000"

# a2c_write PATH: stdin into $HOME/PATH (mode 0600), each ${VAR} replaced by its value and
# nothing else expanded; an unset variable stops the launch.
a2c_write() {
  local text out="" name match dest="$HOME/$1"
  local re='\$\{([A-Za-z_][A-Za-z0-9_]*)\}'
  text="$(cat; printf x)"
  text="${text%x}"
  while [[ $text =~ $re ]]; do
    match="${BASH_REMATCH[0]}"
    name="${BASH_REMATCH[1]}"
    if [ -z "${!name+set}" ]; then
      echo "launch.sh: \${$name} in $1 is not set" >&2
      return 1
    fi
    out+="${text%%"$match"*}${!name}"
    text="${text#*"$match"}"
  done
  mkdir -p "$(dirname "$dest")"
  (umask 077 && printf '%s' "$out$text" > "$dest")
}
a2c_write '.config/opencode/opencode.json' <<'A2C_END_OF_FILE'
{
  "$schema": "https://opencode.ai/config.json",
  "autoupdate": false,
  "share": "disabled",
  "permission": {"edit": "allow", "bash": "allow", "webfetch": "allow"},
  "model": "a2c-${A2C_DRIVER_WIRE}/${A2C_DRIVER_MODEL}",
  "small_model": "a2c-${A2C_DRIVER_WIRE}/${A2C_DRIVER_MODEL}",
  "provider": {
    "a2c-anthropic": {
      "npm": "@ai-sdk/anthropic",
      "name": "a2c driver gateway (Anthropic Messages)",
      "options": {"baseURL": "${A2C_DRIVER_URL}/v1", "apiKey": "{env:A2C_DRIVER_KEY}"},
      "models": {"${A2C_DRIVER_MODEL}": {"name": "${A2C_DRIVER_MODEL}"}}
    },
    "a2c-openai-chat": {
      "npm": "@ai-sdk/openai-compatible",
      "name": "a2c driver gateway (OpenAI Chat Completions)",
      "options": {"baseURL": "${A2C_DRIVER_URL}/v1", "apiKey": "{env:A2C_DRIVER_KEY}"},
      "models": {"${A2C_DRIVER_MODEL}": {"name": "${A2C_DRIVER_MODEL}"}}
    },
    "a2c-gemini": {
      "npm": "@ai-sdk/google",
      "name": "a2c driver gateway (Gemini)",
      "options": {"baseURL": "${A2C_DRIVER_URL}/v1beta", "apiKey": "{env:A2C_DRIVER_KEY}"},
      "models": {"${A2C_DRIVER_MODEL}": {"name": "${A2C_DRIVER_MODEL}"}}
    }
  }
}
A2C_END_OF_FILE
exec opencode run --format json --model "a2c-$A2C_DRIVER_WIRE/$A2C_DRIVER_MODEL" "$A2C_PROMPT"
