# a2c recorder hook (task `textquest-short`): append every bash command the agent runs to
# $A2C_COMMAND_LOG.
#
# Loaded through BASH_ENV by non-interactive shells (`bash -c CMD`, scripts) and from
# /etc/bash.bashrc by interactive ones. One line per command: UTC time, working directory,
# command, separated by tabs (newlines inside a command become spaces).
#   interactive shells:      PROMPT_COMMAND logs each command line after it ran
#   non-interactive shells:  trap DEBUG logs each simple command before it runs
# Only the outermost hooked shell logs: it exports A2C_HOOK_ACTIVE, so scripts and shells it
# starts (pyenv shims, wrapper scripts) do not flood the log. The agent launcher unsets it before
# starting the agent. The hook never makes a command fail.
if [ -n "${A2C_COMMAND_LOG:-}" ] && [ -z "${A2C_HOOK_ACTIVE:-}" ] && [ -z "${__A2C_HOOKED:-}" ]; then
    __A2C_HOOKED=1
    export A2C_HOOK_ACTIVE=1
    __a2c_write() {
        local cmd="${1//$'\n'/ }"
        printf '%(%Y-%m-%dT%H:%M:%SZ)T\t%s\t%s\n' -1 "$PWD" "$cmd" \
            >> "$A2C_COMMAND_LOG" 2>/dev/null || true
    }
    case "$-" in
        *i*)
            __a2c_prompt() {
                local last
                last="$(HISTTIMEFORMAT='' history 1 2>/dev/null | sed 's/^ *[0-9]* *//')"
                if [ -n "$last" ] && [ "$last" != "${__A2C_LAST:-}" ]; then
                    __A2C_LAST="$last"
                    __a2c_write "$last"
                fi
            }
            PROMPT_COMMAND="__a2c_prompt${PROMPT_COMMAND:+; $PROMPT_COMMAND}"
            ;;
        *)
            __a2c_debug() {
                case "$BASH_COMMAND" in
                    __a2c_*) return 0 ;;
                esac
                __a2c_write "$BASH_COMMAND"
            }
            trap '__a2c_debug' DEBUG
            ;;
    esac
fi
