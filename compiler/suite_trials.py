"""A suite's expanded cells → trials: content-derived ids and the resources Ray is asked for.

Resources come from the task's budget, with the suite's overrides: the agent gets `cpus` (default
1) and the task's `gpus`; the grader's evaluations get a device of their own — `eval_gpus`
(default 1 when the agent has GPUs, else 0) and `eval_cpus` (default 1) — which `a2c sweep`
reserves as a second bundle of the trial's placement group, so an evaluation never competes with
the agent's training on the same GPU (the reference harness shares them).
"""

from __future__ import annotations

from typing import Any

from a2c.compiler.suite_matrix import expand
from a2c.contracts.agent_params import AgentParamError, check_value, declarations
from a2c.contracts.trial import Trial, trial_content, trial_id

DEFAULT_CPUS = 1
DEFAULT_EVAL_CPUS = 1


def resources(task_budget: dict[str, Any], override: dict[str, Any]) -> dict[str, dict]:
    """{"agent": {"CPU", "GPU"}, "grader": {"CPU", "GPU"}} with zero entries left out."""
    gpus = int(override.get("gpus", task_budget.get("gpus") or 0))
    eval_gpus = int(override.get("eval_gpus", 1 if gpus else 0))
    agent = {"CPU": float(override.get("cpus", DEFAULT_CPUS)), "GPU": float(gpus)}
    grader = {"CPU": float(override.get("eval_cpus", DEFAULT_EVAL_CPUS)), "GPU": float(eval_gpus)}
    return {"agent": {k: v for k, v in agent.items() if v},
            "grader": {k: v for k, v in grader.items() if v}}


def typed_params(agent: dict[str, Any], given: dict[str, Any] | None) -> dict[str, Any]:
    """A group's param overrides for one agent, typed by its declarations (so `steps: 10` and
    `steps: "10"` are one trial); the checks have refused anything else already."""
    decls = declarations(agent)
    try:
        return {k: check_value(k, decls[k], v) for k, v in sorted((given or {}).items())}
    except (KeyError, ValueError) as exc:
        raise AgentParamError(f"agent {agent.get('id')}: param {exc}") from None


def trials_of(data: dict[str, Any], suite: dict[str, Any], tasks: dict[str, dict],
              agents: dict[str, dict]) -> list[dict[str, Any]]:
    """Every trial of the suite, in spec order; a trial two groups list is kept once (first)."""
    types = {a: m["agent"].get("type") for a, m in agents.items()}
    out: dict[str, dict[str, Any]] = {}
    for cell in expand(data, types):
        g = suite["groups"][cell.group]
        overrides = {"budget": dict(g["budget"]), "base_model": g["base_model"],
                     "backend": g["backend"] if g["backend"] != "local" else None,
                     # only when given: a trial without params keeps its id
                     "agent_params": typed_params(agents[cell.agent]["agent"],
                                                  (g.get("agent_params") or {}).get(cell.agent))}
        task_digest = tasks[cell.task]["digest"]
        agent_digest = agents[cell.agent]["digest"]
        content = trial_content(task_digest, agent_digest, cell.driver, cell.mode, cell.seed,
                                overrides)
        ident = trial_id(cell.task, cell.agent, content)
        if ident in out:
            continue
        task_budget = tasks[cell.task]["task"]["budget"]
        trial = Trial(id=ident, group=cell.group, task=cell.task, agent=cell.agent,
                      driver=cell.driver, mode=cell.mode, seed=cell.seed,
                      task_digest=task_digest, agent_digest=agent_digest,
                      overrides=content["overrides"],
                      resources=resources(task_budget, g["budget"]),
                      wall_clock_s=g["budget"].get("wall_clock_s",
                                                   task_budget.get("wall_clock_s")))
        out[ident] = trial.to_dict()
    return list(out.values())
