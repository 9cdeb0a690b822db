"""A reference agent's hyperparameters: its spec's `params:`, as the run gives them.

The runtime hands an agent the effective values of every param it declares, one JSON object in
`$A2C_AGENT_PARAMS` (the runtime → agent interface; `a2c.contracts.agent_params`); an agent
started by hand or by a test falls back to the declared defaults of its bundle. Read through
`params(AGENT_ID)`, so no agent parses a variable of its own; an agent reads them once as its own
frozen record (`typed(AGENT_ID, Params)`: the record names each declared param, the spec keeps
every default), so a name the code and the spec spell differently fails at the start, not when
the loop first reaches it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TypeVar

P = TypeVar("P")


def _declared(agent_id: str) -> dict:
    """The agent's param declarations: its bundle's manifest — the run's copy
    (`$A2C_AGENT_DIR`) when it is this agent's, else the checkout's `generated/agents/<id>/` (an
    agent started by hand, a test) — or {} when neither is there."""
    from a2c.contracts.bundle import read_manifest
    folders = []
    if os.environ.get("A2C_AGENT_DIR"):
        folders.append(Path(os.environ["A2C_AGENT_DIR"]))
    try:
        from a2c.paths import project_root
        folders.append(project_root() / "generated" / "agents" / agent_id)
    except Exception:  # noqa: BLE001 - no checkout inside a sandbox: the run gives every value
        pass
    for folder in folders:
        try:
            manifest = read_manifest(folder, "Agent")
        except (OSError, ValueError):
            continue
        if manifest.get("id") == agent_id:
            return (manifest.get("agent") or {}).get("params") or {}
    return {}


def params(agent_id: str) -> dict:
    """This agent's hyperparameters: the declared defaults of `agent_id`'s spec (`params:`),
    overlaid by the run's values (`$A2C_AGENT_PARAMS`, a JSON object: the runtime gives every
    declared param, each already checked), typed by the declarations. A name that is neither
    declared nor given is a KeyError: the agent's code and its spec disagree."""
    from a2c.contracts.agent_params import ENV_VAR, check_value, from_env
    decls = _declared(agent_id)
    values = {name: decl.get("default") for name, decl in decls.items()}
    for name, value in from_env(os.environ.get(ENV_VAR)).items():
        values[name] = check_value(name, decls[name], value) if name in decls else value
    return values


def typed(agent_id: str, cls: type[P]) -> P:
    """`params(agent_id)` as the agent's params record `cls` (a frozen dataclass with one field
    a declared param and no defaults of its own: the spec's are the defaults). A declared param
    the record lacks, or a field nothing declares, is a TypeError: code and spec disagree."""
    return cls(**params(agent_id))


def sub_agent_env(values: dict) -> dict[str, str]:
    """The environment for a sub-agent this agent starts as its own command (a warm-up): this
    process's, with `values` as the sub-agent's params."""
    from a2c.contracts.agent_params import ENV_VAR, to_env
    return dict(os.environ, **{ENV_VAR: to_env(values)})
