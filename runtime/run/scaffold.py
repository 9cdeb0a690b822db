"""What the runtime knows of an LLM scaffold (an agent of type `cli`): that it reaches its driver
through the run's gateway, which driver model it is told, which host variables it must never
get, how it is installed (`a2c agents install` prints and runs the same steps), and the
pre-flight check that its command exists where it runs.

Reference agents (type `reference`) get none of this: no gateway, no agent home, no check.
"""

from __future__ import annotations

import re
import shlex
from typing import Any

from a2c.contracts.spec import AgentSpec, DriverSpec, InstallSpec, LaunchSpec
from a2c.errors import RunError
from a2c.runtime.driver_gateway.gateway_config import GatewayConfig

# Provider key variables a scaffold's pass_env may never carry into the sandbox (the gateway
# holds the key on the host). The drivers' own `key_env` names are added per run.
PROVIDER_KEY = re.compile(r"(_API_KEY|_AUTH_TOKEN)$")
BUILTIN_KEY_ENVS = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY")
SCRIPTED = "scripted:"


class PreflightError(RunError):
    """The scaffold cannot start (its command is missing, the gateway does not answer): one
    line, exit code 2, nothing left of the run."""

    exit_code = 2


def typed(agent: dict | AgentSpec) -> AgentSpec:
    """The resolved agent spec, typed (a2c.contracts.spec); the functions here take either."""
    return agent if isinstance(agent, AgentSpec) else AgentSpec.from_dict(agent)


def launch_of(agent: dict | AgentSpec) -> LaunchSpec:
    """The agent's launch section (an empty one when it has none, or a null)."""
    launch = typed(agent).launch
    return launch if isinstance(launch, LaunchSpec) else LaunchSpec()


def uses_gateway(agent: dict | AgentSpec) -> bool:
    """Agents of type `cli` (an LLM scaffold) reach their driver through the run's gateway."""
    return typed(agent).type == "cli"


def strip_provider(model: str | None) -> str:
    """`anthropic/claude-sonnet-4-5` -> `claude-sonnet-4-5` (the first part only: a local
    upstream's model may hold a slash, `local/Qwen/Qwen3-8B` -> `Qwen/Qwen3-8B`)."""
    model = str(model or "")
    return model.split("/", 1)[1] if "/" in model else model


def driver_model(driver: str | None, agent: dict | AgentSpec) -> str:
    """The model part the scaffold is told (A2C_DRIVER_MODEL): of `provider/model`, the model;
    of `scripted:NAME`, the model the agent spec's `driver.default` names (the scripted driver
    impersonates it)."""
    driver = str(driver or "")
    if driver.startswith(SCRIPTED):
        spec = typed(agent).driver   # an old agent's driver may be a plain string
        return strip_provider(spec.default if isinstance(spec, DriverSpec) else None)
    return strip_provider(driver)


def key_env_names(config: GatewayConfig | None, environ: dict[str, str]) -> set[str]:
    """Every variable name a driver's provider key is read from (built-ins, the run's upstream,
    A2C_DRIVER_<PROVIDER>_KEY_ENV overrides)."""
    names = set(BUILTIN_KEY_ENVS)
    if config is not None and config.upstream.key_env:
        names.add(config.upstream.key_env)
    for key, value in environ.items():
        if key.startswith("A2C_DRIVER_") and key.endswith("_KEY_ENV") and value:
            names.add(value)
    return names


def refuse_provider_keys(agent: dict | AgentSpec, names: list[str], key_envs: set[str]) -> None:
    """A cli agent with a gateway never gets a provider key: a pass_env (or agent_env) entry
    naming one is refused before anything is written."""
    bad = sorted({str(n) for n in names
                  if str(n) in key_envs or PROVIDER_KEY.search(str(n))})
    if bad:
        raise RunError(
            f"{typed(agent).id}: launch.pass_env names {', '.join(bad)}, a provider key: a "
            "scaffold reaches its driver model only through the run's gateway, which keeps the "
            "key on the host; remove it from the agent spec's pass_env (the gateway reads it "
            "from the host environment)")


# ----------------------------------------------------------------------------- install steps
def _install(spec: AgentSpec) -> InstallSpec:
    """The agent's install section (none when it names none, or names it as something else)."""
    return spec.install if isinstance(spec.install, InstallSpec) else InstallSpec()


def _pinned(entry: Any, sep: str) -> str:
    """An install entry as one package argument: `pkg@1.2.3` (npm) / `pkg==1.2.3` (pip); a
    mapping {package|name, version} is joined with `sep`."""
    if isinstance(entry, dict):
        name = entry.get("package") or entry.get("name") or ""
        version = entry.get("version")
        return f"{name}{sep}{version}" if version else str(name)
    return str(entry)


def install_steps(agent: dict | AgentSpec) -> list[dict[str, Any]]:
    """The agent's install entries as steps: {kind: npm|pip|command, packages|command, shell}.
    `shell` is the line printed to the user: the pinned packages and where they come from
    (`a2c agents install` puts them into a2c's tool prefix, runtime/scaffold_tools.py), or the
    command as it runs."""
    install = _install(typed(agent))
    steps: list[dict[str, Any]] = []
    npm = [_pinned(e, "@") for e in install.npm or []]
    if npm:
        steps.append({"kind": "npm", "packages": npm,
                      "shell": "npm " + " ".join(shlex.quote(p) for p in npm)})
    pip = [_pinned(e, "==") for e in install.pip or []]
    if pip:
        steps.append({"kind": "pip", "packages": pip,
                      "shell": "pip " + " ".join(shlex.quote(p) for p in pip)})
    for command in install.commands or []:
        command = command.get("run") if isinstance(command, dict) else command
        if command:
            steps.append({"kind": "command", "command": str(command), "shell": str(command)})
    return steps


def install_hint(agent: dict | AgentSpec) -> str:
    """`a2c agents install ID (npm PKG@VERSION)`."""
    steps = "; ".join(s["shell"] for s in install_steps(agent))
    hint = f"a2c agents install {typed(agent).id}"
    return f"{hint} ({steps})" if steps else hint


def check_command(agent: dict | AgentSpec) -> str | None:
    """The command the pre-flight looks for: install.check, else the launch command's first
    word (skipping VAR=value assignments and `exec`/`env`)."""
    spec = typed(agent)
    check = _install(spec).check
    if check:
        return str(check)
    try:
        words = shlex.split(str(launch_of(spec).command or ""))
    except ValueError:
        words = str(launch_of(spec).command or "").split()
    for word in words:
        if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", word) or word in ("exec", "env"):
            continue
        return word
    return None


def check_script(agent: dict | AgentSpec, command: str) -> str:
    """The shell the pre-flight runs in the sandbox: the launcher's own variables (launch.env,
    e.g. a PATH addition), then `command -v`."""
    lines = [f'export {k}="{v}"' for k, v in sorted((launch_of(agent).env or {}).items())]
    lines.append(f"command -v {shlex.quote(command)}")
    return "\n".join(lines) + "\n"
