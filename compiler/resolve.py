"""Resolution: a validated spec document → the resolved form the runtime reads.

Defaults are filled in, durations become seconds (`wall_clock: 12h` → `wall_clock_s: 43200`),
descriptions and prompts are read from their files, and every optional field is present (null when
unset), so consumers never guess. The resolved task has exactly the shape in docs/contracts.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from a2c.answer_format import derive as derive_answer_format
from a2c.compiler.params import agent_params
from a2c.compiler.suite_matrix import group_titles, groups_of
from a2c.contracts.inference import DEFAULT_INFERENCE  # shared with the runtime
from a2c.contracts.spec import BudgetSpec, RolloutEnvSpec
from a2c.durations import parse_duration
from a2c.modes import FREE, MODES
from a2c.modes import MODE_TITLES as MODE_TITLES  # re-export: the titles the templates show

DEFAULT_BASE_IMAGE = ("python:3.11.10-slim-bookworm@sha256:"
                      "5148c0e4bbb64271bca1d3322360ebf4bfb7564507ae32dd639322e4952a6b16")
DEFAULT_PACKAGES = ["accelerate==1.15.0", "datasets==5.2.0", "safetensors==0.8.0",
                    "torch==2.13.0", "transformers==5.24.0", "trl==1.16.0"]

# The budget's defaults are the resolved spec's own (a2c.contracts.spec.BudgetSpec: 12 h, 1 GPU,
# 30 submissions, no interval, 1 h an evaluation), in the spec's keys: one place for each.
_BUDGET = BudgetSpec()
DEFAULT_BUDGET = {"wall_clock": _BUDGET.wall_clock_s, "gpus": _BUDGET.gpus,
                  "max_submissions": _BUDGET.max_submissions,
                  "min_interval": _BUDGET.min_interval_s, "eval_timeout": _BUDGET.eval_timeout_s}
DEFAULT_MODES = list(MODES)
DEFAULT_PARAMS = {
    # The graders' own defaults (runtime/graders), written out so a bundle states them.
    "exact_match": {"fallback": "last_number", "normalize": "number", "match": "first"},
    "humaneval": {"k": [1], "timeout": 10, "memory_mb": 1024},
    "pairwise_judge": {"reference_field": "answer", "instruction_field": "prompt",
                       "swap_positions": True, "length_controlled": True, "max_retries": 5,
                       "max_failure_rate": 0.05, "judge_template": "alpaca_eval",
                       "max_output_tokens": 4},
    "rollout": {},
}
DEFAULT_ENV = {"max_steps": RolloutEnvSpec().max_steps, "n_episodes": None,
               "history": {"max_tokens": None, "keep_first_turns": 1}, "options": {}}
FORMATS = {".jsonl": "jsonl", ".json": "json", ".csv": "csv", ".parquet": "parquet"}

def seconds(value: Any) -> int | float:
    """A spec duration in seconds (`12h` → 43200, `1.5h` → 5400, a number → itself), read by the
    one grammar in a2c.durations. 0 is allowed here (`min_interval: 0s`); the checks say where a
    duration must be positive."""
    return parse_duration(value, allow_zero=True)


def text_of(value: Any, spec_path: Path) -> str:
    if isinstance(value, dict):
        text = (spec_path.parent / value["file"]).read_text(encoding="utf-8")
    else:
        text = str(value)
    text = text.replace("\r\n", "\n")
    return text if text.endswith("\n") else text + "\n"


def data_file_name(split: str, source_file: str) -> str:
    """Where a local data file lands inside the bundle."""
    suffix = "".join(Path(source_file).suffixes[-1:]) or ".jsonl"
    return f"data/{split}{suffix}"


# Driver budgets (the gateway's limits on the agent's LLM): spec name -> resolved name. Present in
# the resolved budget only when the spec sets them (unset: unlimited, and task bundles without a
# driver budget keep their digest).
DRIVER_BUDGET_KEYS = {"driver_tokens": "driver_tokens", "driver_cost": "driver_cost_usd",
                      "driver_calls": "driver_calls"}


def driver_budget(b: dict) -> dict[str, Any]:
    """{driver_tokens, driver_cost_usd, driver_calls} for those the budget mapping sets."""
    out: dict[str, Any] = {}
    for key, resolved in DRIVER_BUDGET_KEYS.items():
        if b.get(key) is not None:
            out[resolved] = float(b[key]) if key == "driver_cost" else int(b[key])
    return out


def size_mb(text: str) -> int:
    """MiB of a size the schema accepts (`512m`, `16g`, `1t`, `2048k`), at least 1."""
    size, unit = int(str(text)[:-1]), str(text)[-1].lower()
    return max(1, {"k": size // 1024, "m": size, "g": size * 1024, "t": size * 1024 ** 2}[unit])


def sandbox_limits(b: dict) -> dict[str, Any]:
    """{memory_mb, cpus, pids, disk_mb} for those the budget sets (the sandbox's resource
    limits; absent when unset, so bundles without them keep their digest)."""
    out: dict[str, Any] = {}
    if b.get("memory"):
        out["memory_mb"] = size_mb(b["memory"])
    if b.get("cpus") is not None:
        out["cpus"] = float(b["cpus"])
    if b.get("pids") is not None:
        out["pids"] = int(b["pids"])
    if b.get("disk"):
        out["disk_mb"] = size_mb(b["disk"])
    return out


def resolve(doc) -> dict[str, Any]:
    return {"Task": resolve_task, "Agent": resolve_agent, "Suite": resolve_suite}[doc.kind](doc)


def resolve_task(doc) -> dict[str, Any]:
    d = doc.data
    bm = d["base_model"]
    if "hub" in bm:
        base_model = {"hub": bm["hub"], "revision": bm.get("revision") or "main"}
    elif "path" in bm:
        p = Path(bm["path"])
        base_model = {"path": str(p if p.is_absolute() else (doc.path.parent / p).resolve())}
    else:
        base_model = {"builtin": bm["builtin"]}

    src = d["data"]["source"]
    if "hub" in src:
        source = {"hub": src["hub"], "config": src.get("config"), "revision": src.get("revision")}
    elif "files" in src:
        files = {split: data_file_name(split, f) for split, f in sorted(src["files"].items())}
        fmt = src.get("format") or FORMATS.get(Path(next(iter(src["files"].values()))).suffix,
                                               "jsonl")
        source = {"files": files, "format": fmt}
    elif "package" in src:
        source = {"package": src["package"]}
    else:
        source = {"generator": src["generator"], "params": dict(src.get("params") or {}),
                  "seed": src.get("seed", 0)}
    data = {
        "source": source,
        "agent": {"split": d["data"]["agent"]["split"], "slice": d["data"]["agent"].get("slice")},
        "heldout": {"split": d["data"]["heldout"]["split"],
                    "slice": d["data"]["heldout"].get("slice")},
        "fields": dict(d["data"]["fields"]),
    }

    g = d["grader"]
    kind = g["kind"]
    params = {**DEFAULT_PARAMS[kind], **(g.get("params") or {})}
    if kind == "humaneval":
        params["timeout_s"] = seconds(params.pop("timeout"))
    if kind == "exact_match":   # stated once; derived from the pattern where unambiguous
        params["answer_format"] = params.get("answer_format") or derive_answer_format(
            params["pattern"])
    inference = {**DEFAULT_INFERENCE, **(g.get("inference") or {})}
    inference["stop"] = list(inference["stop"])
    inference["temperature"] = float(inference["temperature"])
    inference["top_p"] = float(inference["top_p"])
    env = None
    if g.get("env"):
        e = g["env"]
        env = {"kind": e["kind"], "max_steps": e.get("max_steps", DEFAULT_ENV["max_steps"]),
               "n_episodes": e.get("n_episodes"),
               "history": {**DEFAULT_ENV["history"], **(e.get("history") or {})},
               "options": dict(e.get("options") or {})}
    grader = {"kind": kind, "params": params, "inference": inference, "env": env}

    b = {**DEFAULT_BUDGET, **(d.get("budget") or {})}
    budget = {"wall_clock_s": seconds(b["wall_clock"]), "gpus": b["gpus"],
              "max_submissions": b["max_submissions"],
              "min_interval_s": seconds(b["min_interval"]),
              "eval_timeout_s": seconds(b["eval_timeout"])}
    budget.update(driver_budget(b))
    budget.update(sandbox_limits(b))
    sc = d.get("scoring") or {}
    scoring = {"policy": sc.get("policy", "best")}
    if sc.get("final"):   # present only when declared: tasks without one keep their spec hash
        scoring["final"] = {"fraction": float(sc["final"]["fraction"]),
                            "seed": int(sc["final"].get("seed", 0))}
    envr = d.get("environment") or {}
    services = [{"name": s["name"], "command": s["command"], "port": s["port"],
                 "health": s.get("health"), "startup_timeout_s": seconds(s.get("startup_timeout", 60))}
                for s in envr.get("services", [])]
    environment = {"base_image": envr.get("base_image", DEFAULT_BASE_IMAGE),
                   "packages": sorted(envr.get("packages", DEFAULT_PACKAGES), key=str.lower),
                   "services": services}
    return {
        "id": d["id"], "title": d["title"], "level": d["level"],
        "description": text_of(d["description"], doc.path),
        "base_model": base_model, "data": data, "grader": grader, "budget": budget,
        "scoring": scoring, "modes": list(d.get("modes", DEFAULT_MODES)),
        "environment": environment,
    }


def _wires(driver: dict) -> list[str]:
    """The wires a scaffold speaks, in order of preference (`wire` is one or a list)."""
    wire = driver.get("wire")
    return [] if wire is None else [wire] if isinstance(wire, str) else list(wire)


def resolve_agent(doc) -> dict[str, Any]:
    d = doc.data
    params = agent_params(d)
    reference = d["type"] == "reference"
    drv = d.get("driver") or {}
    launch = d["launch"]
    tr = d.get("transcript") or {"source": "stdout", "format": "text"}
    ext = tr.get("ext") or {"stream-json": "jsonl", "jsonl": "jsonl", "json": "json",
                            "text": "log"}[tr["format"]]
    prompt = text_of(d["prompt"], doc.path) if d.get("prompt") else DEFAULT_PROMPT
    install = d.get("install") or {}
    files = launch.get("files") or {}
    return {
        "id": d["id"], "title": d["title"], "type": d["type"],
        "homepage": d.get("homepage"), "version": d.get("version"),
        "install": {"npm": list(install.get("npm", [])), "pip": list(install.get("pip", [])),
                    "commands": list(install.get("commands", [])),
                    "check": install.get("check")},
        "launch": {"command": launch["command"].strip(), "env": dict(launch.get("env", {})),
                   "files": {path: files[path] for path in sorted(files)},
                   "pass_env": sorted(launch.get("pass_env", []))},
        "driver": {"required": drv.get("required", not reference), "default": drv.get("default"),
                   "wire": _wires(drv)[0] if _wires(drv) else None, "wires": _wires(drv),
                   "models": list(drv.get("models", [])),
                   **({"context_min": drv["context_min"]} if "context_min" in drv else {})},
        "prompt": prompt,
        "transcript": {"source": tr["source"], "path": tr.get("path"), "format": tr["format"],
                       "ext": ext, "native": tr.get("native")},
        **({"params": params} if params else {}),   # none declared: the bundle as before
    }


DEFAULT_PROMPT = """{{ instructions }}
"""


def suite_budget(b: dict) -> dict[str, Any]:
    """A suite's (or group's) budget overrides, resolved: only the keys it sets."""
    budget: dict[str, Any] = {}
    if "wall_clock" in b:
        budget["wall_clock_s"] = seconds(b["wall_clock"])
    for key in ("gpus", "cpus", "eval_cpus", "eval_gpus"):
        if key in b:
            budget[key] = b[key]
    budget.update(driver_budget(b))
    return budget


def resolve_suite(doc) -> dict[str, Any]:
    """The suite with every group resolved (axes, overrides); the build adds `trials`, the
    expanded list with the bundles' digests (compiler/build.py, compile_suite). The top-level
    `tasks`, `agents`, `drivers`, `modes`, `seeds` are the union over the groups, for readers that
    only want to know what the suite touches."""
    d = doc.data
    titles = group_titles(d)
    groups = {}
    for name, (_, g) in groups_of(d).items():
        drivers = g.get("drivers") or []
        groups[name] = {
            "title": titles.get(name), "tasks": list(g.get("tasks") or []),
            "agents": list(g.get("agents") or []),
            "drivers": ({k: list(v) for k, v in drivers.items()} if isinstance(drivers, dict)
                        else list(drivers)),
            "modes": list(g.get("modes") or [FREE]), "seeds": list(g.get("seeds") or [0]),
            "include": [dict(x) for x in g.get("include") or []],
            "exclude": [dict(x) for x in g.get("exclude") or []],
            "budget": suite_budget(g.get("budget") or {}),
            "base_model": g.get("base_model"), "backend": g.get("backend") or "local",
            **({"agent_params": {a: dict(sorted((v or {}).items()))
                                 for a, v in sorted(g["agent_params"].items()) if v}}
               if g.get("agent_params") else {})}

    def union(key):
        out: list = []
        for g in groups.values():
            values = g[key]
            if isinstance(values, dict):
                values = [v for vs in values.values() for v in vs]
            if key in ("tasks", "agents"):
                values = [*values, *(x[key[:-1]] for x in g["include"])]
            out += [v for v in values if v not in out]
        return out
    return {"id": d["id"], "title": d["title"], "description": d.get("description"),
            "tasks": union("tasks"), "agents": union("agents"), "drivers": union("drivers"),
            "modes": union("modes"), "seeds": union("seeds"),
            "budget": suite_budget(d.get("budget") or {}), "groups": groups}
