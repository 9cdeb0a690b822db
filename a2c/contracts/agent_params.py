"""An agent's hyperparameters: typed declarations in its spec, values a run or a suite gives.

Why here: the reference agents were tuned by some thirty-five environment variables
that were in no digest, no trial id and no CLI flag, so two runs that differed only by a knob
looked alike in every record. Now an agent spec declares its `params:` (name → type, default,
bounds, description; `compiler/schemas/agent.schema.json`); the declarations are in the agent
bundle (`agent.json`, hence its digest). A run gives overrides (`a2c run --agent-param K=V`, a
suite's `agent_params:`), checked here against the declarations; the runtime records the
effective values (`run.json` options `agent_params`) and hands them to the agent as one JSON
object in `A2C_AGENT_PARAMS` (the runtime → agent interface). One module, so the compiler (a
default must fit its own declaration), the CLI, the runtime and the agents all read a value the
same way.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from a2c.contracts.records import Record
from a2c.errors import A2CError

ENV_VAR = "A2C_AGENT_PARAMS"        # the runtime → agent interface: the effective values, JSON
TYPES = ("integer", "number", "string", "boolean")
NAME = re.compile(r"^[a-z][a-z0-9_]*$")
TRUE, FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


class AgentParamError(A2CError):
    """A param the agent does not declare, or a value its declaration refuses (nothing started)."""

    exit_code = 2


@dataclass
class ParamDeclaration(Record):
    """One declared param, typed (what `a2c agents params` shows): its type, default, bounds
    and what it does. The checks here read the declaration's mapping as the spec holds it."""

    type: str | None = None
    default: Any = None
    description: str | None = None
    minimum: float | None = None
    maximum: float | None = None
    enum: list[Any] | None = None


def declared(params: Mapping[str, Any] | None) -> dict[str, ParamDeclaration]:
    """A resolved agent's `params` (name -> declaration), typed; none declared: {}."""
    return {name: ParamDeclaration.from_dict(decl) for name, decl in (params or {}).items()
            if isinstance(decl, Mapping)}


def declarations(agent: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The resolved agent's `params` (an agent that declares none: {})."""
    params = agent.get("params")
    return dict(params) if isinstance(params, Mapping) else {}


def _typed(decl: Mapping[str, Any], value: Any) -> Any:
    """`value` as the declared type (a CLI string is parsed); ValueError when it is not one."""
    kind = decl.get("type")
    if kind == "boolean":
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in TRUE + FALSE:
            return value.strip().lower() in TRUE
        raise ValueError("expected true or false")
    if kind == "integer":
        if isinstance(value, bool):
            raise ValueError("expected an integer")
        if isinstance(value, int):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str):
            return int(value.strip())
        raise ValueError("expected an integer")
    if kind == "number":
        if isinstance(value, bool):
            raise ValueError("expected a number")
        if isinstance(value, (int, float)):
            return float(value)
        if isinstance(value, str):
            return float(value.strip())
        raise ValueError("expected a number")
    if kind == "string":
        if isinstance(value, str):
            return value
        raise ValueError("expected a string")
    raise ValueError(f"unknown type {kind!r} (one of {', '.join(TYPES)})")


def check_value(name: str, decl: Mapping[str, Any], value: Any) -> Any:
    """The value, typed; ValueError with what is wrong (type, enum, bounds)."""
    try:
        typed = _typed(decl, value)
    except ValueError as exc:
        raise ValueError(f"{name}={value!r}: not a valid {decl.get('type')} ({exc})") from None
    if "enum" in decl and typed not in decl["enum"]:
        raise ValueError(f"{name}={typed!r}: one of {', '.join(map(str, decl['enum']))}")
    if decl.get("type") not in ("integer", "number"):
        return typed
    if decl.get("minimum") is not None and typed < decl["minimum"]:
        raise ValueError(f"{name}={typed!r}: at least {decl['minimum']}")
    if decl.get("maximum") is not None and typed > decl["maximum"]:
        raise ValueError(f"{name}={typed!r}: at most {decl['maximum']}")
    return typed


def declaration_problems(name: str, decl: Mapping[str, Any]) -> list[str]:
    """What is wrong with one declaration (the compiler's semantic check): the name, the
    default against its own type, enum and bounds."""
    problems = []
    if not NAME.match(name):
        problems.append(f"param name {name!r}: snake_case (lowercase letters, digits, '_')")
    if decl.get("type") in ("integer", "number"):
        low, high = decl.get("minimum"), decl.get("maximum")
        if low is not None and high is not None and low > high:
            problems.append(f"param {name}: minimum {low} is above maximum {high}")
    elif "minimum" in decl or "maximum" in decl:
        problems.append(f"param {name}: minimum/maximum apply to integer and number params")
    for option in decl.get("enum") or []:
        try:
            if _typed(decl, option) != option or isinstance(option, bool) != (
                    decl.get("type") == "boolean"):
                raise ValueError
        except ValueError:
            problems.append(f"param {name}: enum value {option!r} is not a {decl.get('type')}")
    if "default" not in decl:
        problems.append(f"param {name}: no default")
    else:
        try:
            default = decl["default"]
            if isinstance(default, str) and decl.get("type") != "string":
                raise ValueError(f"{name}={default!r}: not a valid {decl.get('type')}")
            check_value(name, decl, default)
        except ValueError as exc:
            problems.append(f"param {name}: default {exc}")
    return problems


def parse_assignments(items: Iterable[str]) -> dict[str, str]:
    """`["steps=10", "lr=1e-4"]` → {"steps": "10", "lr": "1e-4"} (values typed later, against
    the agent's declarations); a later assignment of a name wins."""
    out: dict[str, str] = {}
    for item in items:
        name, sep, value = str(item).partition("=")
        if not sep or not name.strip():
            raise AgentParamError(f"--agent-param {item!r}: write NAME=VALUE")
        out[name.strip()] = value.strip()
    return out


def effective(agent: Mapping[str, Any], overrides: Mapping[str, Any] | None) -> dict[str, Any]:
    """The values a run uses: every declared default, with `overrides` (strings from the CLI or
    typed values from a suite) checked and typed; an undeclared name or a refused value is an
    AgentParamError naming the agent and what it declares."""
    decls = declarations(agent)
    agent_id = agent.get("id", "?")
    unknown = sorted(set(overrides or {}) - set(decls))
    if unknown:
        offered = ", ".join(sorted(decls)) or "none"
        raise AgentParamError(f"agent {agent_id} has no param {', '.join(unknown)} "
                              f"(its params: {offered}; see its spec, specs/agents/{agent_id}.yaml)")
    values = {name: decl.get("default") for name, decl in decls.items()}
    for name, value in (overrides or {}).items():
        try:
            values[name] = check_value(name, decls[name], value)
        except ValueError as exc:
            raise AgentParamError(f"agent {agent_id}: {exc}") from None
    return dict(sorted(values.items()))


def to_env(values: Mapping[str, Any]) -> str:
    """The `A2C_AGENT_PARAMS` value: canonical JSON."""
    return json.dumps(dict(values), sort_keys=True, separators=(",", ":"))


def from_env(text: str | None) -> dict[str, Any]:
    """An `A2C_AGENT_PARAMS` value back (empty or unset: {})."""
    if not text or not text.strip():
        return {}
    value = json.loads(text)
    if not isinstance(value, dict):
        raise AgentParamError(f"{ENV_VAR} is not a JSON object")
    return value
