"""Agent params in the compiler: an agent's declarations resolved into its bundle, checked, and a
suite's `agent_params:` overrides checked against them.

The schema says the shape (name → type, default, description, bounds, enum); what it cannot say
is checked here with the same rule the runtime applies to a run's values
(`a2c.contracts.agent_params`): a default fits its own type, enum and bounds, a name is
snake_case, and a suite overrides only params its agent declares, with values they accept — so a
suite that `a2c validate` passes never fails at `a2c sweep` on a param.
"""

from __future__ import annotations

from typing import Any

# checks.py's checks register before these, so a document's general problems are listed first
from a2c.compiler import checks as _checks  # noqa: F401
from a2c.compiler.checking import _referenced_data, check_for
from a2c.contracts.agent_params import check_value, declaration_problems

DECLARATION_KEYS = ("type", "default", "description", "minimum", "maximum", "enum")


def agent_params(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The spec's `params:` as the bundle carries them: sorted by name, keys in one order,
    numbers' defaults as floats, so the digest does not depend on how the YAML spelled them."""
    out = {}
    for name in sorted(data.get("params") or {}):
        decl = data["params"][name]
        entry = {key: decl[key] for key in DECLARATION_KEYS if key in decl}
        if entry.get("type") == "number" and isinstance(entry.get("default"), int) \
                and not isinstance(entry.get("default"), bool):
            entry["default"] = float(entry["default"])
        out[name] = entry
    return out


@check_for("Agent")
def params_are_coherent(doc):
    for name, decl in (doc.data.get("params") or {}).items():
        for problem in declaration_problems(name, decl):
            yield ("params", name), problem


def suite_param_problems(root, data: dict[str, Any]):
    """(path, what) for each suite or group `agent_params` entry its agent does not accept."""
    from a2c.compiler.suite_matrix import groups_of
    declared: dict[str, dict | None] = {}
    for name, (prefix, g) in groups_of(data).items():
        given = g.get("agent_params") or {}
        origin = (*prefix, "agent_params") if prefix and "agent_params" in \
            (data.get("groups") or {}).get(name, {}) else ("agent_params",)
        runs = {*(g.get("agents") or []), *(x.get("agent") for x in g.get("include") or [])}
        for agent, values in given.items():
            if agent not in runs:
                yield (*origin, agent), (f"agent_params for agent '{agent}', which group "
                                         f"'{name}' does not run", True)
                continue
            if agent not in declared:
                spec = _referenced_data(root, "agents", agent)
                declared[agent] = None if spec is None else (spec.get("params") or {})
            decls = declared[agent]
            if decls is None:
                continue        # a missing agent spec is reported by the references check
            for param, value in (values or {}).items():
                if param not in decls:
                    offered = ", ".join(sorted(decls)) or "none"
                    yield (*origin, agent, param), (f"agent '{agent}' has no param '{param}' "
                                                    f"(its params: {offered})", True)
                    continue
                try:
                    check_value(param, decls[param], value)
                except ValueError as exc:
                    yield (*origin, agent, param), str(exc)


@check_for("Suite")
def suite_params_are_declared(doc):
    yield from suite_param_problems(doc.path.resolve().parent.parent, doc.data)
