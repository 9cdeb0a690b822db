#!/usr/bin/env bash
# a2c launcher for Codex CLI (`codex`, cli agent, version 0.171.0), compiled by a2c 0.1.0.
# Generated from specs/agents/codex.yaml: edit the spec, then run `a2c build`.
#
# The runtime runs this inside the sandbox with the workspace as cwd and sets A2C_WORKSPACE,
# A2C_PROMPT_FILE (the rendered prompt.md), A2C_DRIVER_MODEL and the other A2C_* variables.
# Driver: openai-responses wire, through the run's gateway (A2C_DRIVER_SOCKET, key A2C_DRIVER_KEY);
# HOME is the run's agent home, where the scaffold keeps its configuration and session logs.
# Transcript: jsonl on stdout -> logs/transcript.jsonl; native log: $HOME/.codex/sessions/*/*/*/rollout-*.jsonl
# The recorder hook (BASH_ENV) logs the agent's commands, not this launcher's.
trap - DEBUG
unset A2C_HOOK_ACTIVE
set -euo pipefail
cd "${A2C_WORKSPACE:?A2C_WORKSPACE is not set}"
A2C_PROMPT="$(cat "${A2C_PROMPT_FILE:?A2C_PROMPT_FILE is not set}")"
export A2C_PROMPT
A2C_DRIVER_MODEL="${A2C_DRIVER_MODEL:-gpt-5-codex}"
: "${A2C_DRIVER_MODEL:?codex needs a driver model (--driver)}"
export A2C_DRIVER_MODEL="${A2C_DRIVER_MODEL:-}"
# The gateway is a Unix socket; the scaffold wants a base URL: a forwarder on the sandbox's own
# loopback leads to it (it forks into the background and ends with this process).
: "${HOME:?HOME is not set}"
: "${A2C_DRIVER_KEY:?A2C_DRIVER_KEY is not set: codex reaches its driver only through the run gateway}"
if [ -z "${A2C_DRIVER_URL:-}" ]; then
  : "${A2C_DRIVER_SOCKET:?A2C_DRIVER_SOCKET is not set: no driver gateway for codex}"
  A2C_DRIVER_URL="$(python -m a2c.runtime.sandbox.loopback_forwarder --socket "$A2C_DRIVER_SOCKET" --daemon --parent "$$")"
fi
export A2C_DRIVER_URL A2C_DRIVER_KEY
export CODEX_HOME="${HOME}/.codex"

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
a2c_write '.codex/config.toml' <<'A2C_END_OF_FILE'
model = "${A2C_DRIVER_MODEL}"
model_provider = "a2c"
approval_policy = "never"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false
web_search = "disabled"
# Commands run in `bash -c`, not a login shell: /etc/profile would reset PATH and drop
# the sandbox's Python environment (`python` not found).
allow_login_shell = false

[model_providers.a2c]
name = "a2c driver gateway"
base_url = "${A2C_DRIVER_URL}/v1"
env_key = "A2C_DRIVER_KEY"
wire_api = "responses"

[features]
apps = false
plugins = false
goals = false
in_app_updates = false

[agents]
enabled = false

[analytics]
enabled = false
A2C_END_OF_FILE
exec codex exec --json --dangerously-bypass-approvals-and-sandbox --skip-git-repo-check ${A2C_DRIVER_CONTEXT:+-c model_context_window=$A2C_DRIVER_CONTEXT} --model "$A2C_DRIVER_MODEL" "$A2C_PROMPT" </dev/null
