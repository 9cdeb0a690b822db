#!/usr/bin/env bash
# a2c launcher for mini-swe-agent (`mini-swe-agent`, cli agent, version 2.4.6), compiled by a2c 0.1.0.
# Generated from specs/agents/mini-swe-agent.yaml: edit the spec, then run `a2c build`.
#
# The runtime runs this inside the sandbox with the workspace as cwd and sets A2C_WORKSPACE,
# A2C_PROMPT_FILE (the rendered prompt.md), A2C_DRIVER_MODEL and the other A2C_* variables.
# Driver: openai-chat wire, through the run's gateway (A2C_DRIVER_SOCKET, key A2C_DRIVER_KEY);
# HOME is the run's agent home, where the scaffold keeps its configuration and session logs.
# Transcript: text on stdout -> logs/transcript.log; native log: $HOME/mini-trajectory.json
# The recorder hook (BASH_ENV) logs the agent's commands, not this launcher's.
trap - DEBUG
unset A2C_HOOK_ACTIVE
set -euo pipefail
cd "${A2C_WORKSPACE:?A2C_WORKSPACE is not set}"
A2C_PROMPT="$(cat "${A2C_PROMPT_FILE:?A2C_PROMPT_FILE is not set}")"
export A2C_PROMPT
A2C_DRIVER_MODEL="${A2C_DRIVER_MODEL:-gpt-5-mini}"
: "${A2C_DRIVER_MODEL:?mini-swe-agent needs a driver model (--driver)}"
export A2C_DRIVER_MODEL="${A2C_DRIVER_MODEL:-}"
# The gateway is a Unix socket; the scaffold wants a base URL: a forwarder on the sandbox's own
# loopback leads to it (it forks into the background and ends with this process).
: "${HOME:?HOME is not set}"
: "${A2C_DRIVER_KEY:?A2C_DRIVER_KEY is not set: mini-swe-agent reaches its driver only through the run gateway}"
if [ -z "${A2C_DRIVER_URL:-}" ]; then
  : "${A2C_DRIVER_SOCKET:?A2C_DRIVER_SOCKET is not set: no driver gateway for mini-swe-agent}"
  A2C_DRIVER_URL="$(python -m a2c.runtime.sandbox.loopback_forwarder --socket "$A2C_DRIVER_SOCKET" --daemon --parent "$$")"
fi
export A2C_DRIVER_URL A2C_DRIVER_KEY
export LITELLM_LOCAL_MODEL_COST_MAP="True"
export MSWEA_CONFIGURED="true"
export MSWEA_COST_TRACKING="ignore_errors"
export MSWEA_GLOBAL_CONFIG_DIR="${HOME}/.config/mini-swe-agent"
export MSWEA_SILENT_STARTUP="1"

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
a2c_write '.config/mini-swe-agent/a2c.yaml' <<'A2C_END_OF_FILE'
agent:
  mode: yolo
  confirm_exit: false
  cost_limit: 0
  step_limit: 0
  instance_template: |
    {{task}}

    ## How you work here

    You act only through the bash tool: each response explains briefly what you are
    doing and makes at least one bash tool call. Every command runs in a new subshell
    in the workspace (cd and variables do not persist: prefix them, or use files).
    A command may run for at most one hour; start long jobs in the background
    (`nohup ... > log 2>&1 &`) and check on them.

    When you are done, run exactly `echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT` on its
    own; after it you cannot continue.

    <system_information>
    {{system}} {{release}} {{version}} {{machine}}
    </system_information>
environment:
  timeout: 3600
model:
  model_name: "openai/${A2C_DRIVER_MODEL}"
  cost_tracking: ignore_errors
  model_kwargs:
    api_base: "${A2C_DRIVER_URL}/v1"
    api_key: "${A2C_DRIVER_KEY}"
    drop_params: true
A2C_END_OF_FILE
exec mini -y --exit-immediately -c mini.yaml -c "$HOME/.config/mini-swe-agent/a2c.yaml" -o "$HOME/mini-trajectory.json" -t "$A2C_PROMPT"
