# a2c recorder hook (task `humaneval`): append every bash command to $A2C_COMMAND_LOG.
#
# Sourced by interactive shells (from /etc/bash.bashrc: PROMPT_COMMAND) and by non-interactive
# ones (BASH_ENV: trap DEBUG). One line per command: UTC time, working directory, command,
# separated by tabs; newlines inside a command become spaces. Never fails the shell it runs in.
if [ -n "${A2C_COMMAND_LOG:-}" ] && [ -z "${__A2C_HOOKED:-}" ]; then
    __A2C_HOOKED=1
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
