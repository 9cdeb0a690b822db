"""Which runs a leaderboard may pool, and what their spread means.

A leaderboard row is a mean over runs, so its runs must differ only by chance: two runs with a
10- and a 20-minute budget, another base model, other driver budgets or other settings passed to
the agent measure different things, and pooling them made "2 runs, 33.50 ± 47.38" with a
t-interval of [−392, +459] out of two unlike runs (issue 25). So besides the `--by` keys a group
is also split by every other setting that changes a run (`CONFIG_KEYS`), and the table shows
those of them that vary. Within a group, the seed is the unit of replication: runs that repeat a
seed are repeats, not seeds — their mean is one seed's value, a group of repeats of one seed has
no interval across seeds, and a group over several seeds takes its interval over per-seed means.

And a run still in progress is neither counted nor a failure: `run_state` tells a live run (its
run.json says queued, prepared or running, and its deadline has not long passed) from one whose
runtime stopped without ending it.
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path
from typing import Any

from a2c.contracts.run_info import RunInfo, RunStatus, read_run_mapping
from a2c.timefmt import parse_time

from .board import Group
from .record import run_info_of
from .summary import RunHeader
from .templating import duration

# Settings that change a run beyond the default --by keys (agent, driver, task, mode): the
# run's budget (wall clock, driver budgets, submissions, ...), its base model and the agent's
# params (run.json `options.agent_params`; a record from before params: the variables it passed
# the agent, `options.agent_env`) and, for a driver a2c served, its weights' digest. Level and
# isolation follow from the task and the backend.
CONFIG_KEYS = ("budget", "model", "agent_params", "driver_weights")
# "queued" is a sweep trial's status before its run directory has a status of its own
LIVE_STATUSES = ("queued", RunStatus.PREPARED, RunStatus.RUNNING)
STALE_GRACE_S = 900          # after the deadline plus one evaluation, "running" is a stopped run


def _label(value: Any) -> str | None:
    if value is None or value == {} or value == "":
        return None
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True, separators=(",", ":"))
    return str(value)


def config_values(header: RunHeader, info: RunInfo) -> dict[str, str | None]:
    """The run's CONFIG_KEYS as comparable strings (canonical JSON for mappings)."""
    params = info.options.agent_params if isinstance(info.options.agent_params, dict) else None
    env = info.options.agent_env if isinstance(info.options.agent_env, dict) else None
    if params is None and env:   # an older record: its knobs were variables
        legacy = ", ".join(f"{k}={v}" for k, v in sorted(env.items()))
    else:
        legacy = None
    return {"budget": _label(header.budget), "model": _label(header.base_model),
            "agent_params": _label(params) or legacy, "driver_weights": driver_weights(info)}


def driver_weights(info: RunInfo) -> str | None:
    """The digest of the weights that drove the agent, for a `vllm/` driver a2c served
    (run.json driver_server): runs driven by other weights are not pooled, and within a group
    the seed (which also seeds the server's sampling) tells repeats from seeds. None for a
    driver a2c did not serve (a hosted model's weights are the provider's)."""
    digest = info.driver_server.fingerprint if info.driver_server else None
    return f"sha256:{digest[:12]}" if isinstance(digest, str) and digest else None


def param_labels(values: list[str | None]) -> dict[str | None, str]:
    """{agent_params value: the params that tell it from the others shown} ("steps=10 · lr=0.001"):
    an agent has a dozen params and a row differs by one or two. An older record's variables
    (not JSON) are shown as they are."""
    parsed = {}
    for raw in set(values):
        try:
            parsed[raw] = json.loads(raw) if raw else {}
        except ValueError:
            parsed[raw] = None
    maps = [d for d in parsed.values() if isinstance(d, dict)]
    keys = sorted({k for d in maps for k in d})
    varying = [k for k in keys if len({json.dumps(d.get(k)) for d in maps}) > 1]
    out: dict[str | None, str] = {}
    for raw, d in parsed.items():
        if not isinstance(d, dict):
            out[raw] = str(raw)
            continue
        parts = [f"{k}={'—' if d.get(k) is None else d[k]}" for k in varying]
        out[raw] = " · ".join(parts) if parts else "—"
    return out


_BUDGET_UNITS = {"wall_clock_s": lambda v: duration(v), "driver_tokens": lambda v: f"{v} tokens",
                 "driver_cost_usd": lambda v: f"${v}", "driver_calls": lambda v: f"{v} calls",
                 "max_submissions": lambda v: f"{v} submissions", "gpus": lambda v: f"{v} GPU"}


def budget_labels(budgets: list[str | None]) -> dict[str | None, str]:
    """{budget JSON: what a reader needs to tell it apart}: only the budget keys that differ
    among the runs shown, the wall clock first ("10m", "20m · 2000 tokens")."""
    parsed = {b: (json.loads(b) if b else {}) for b in set(budgets)}
    keys = sorted({k for d in parsed.values() for k in d},
                  key=lambda k: (k != "wall_clock_s", k))
    varying = [k for k in keys if len({json.dumps(d.get(k)) for d in parsed.values()}) > 1] \
        or [k for k in keys if k == "wall_clock_s"]
    out = {}
    for raw, d in parsed.items():
        parts = [("—" if d.get(k) is None else _BUDGET_UNITS.get(k, lambda v, k=k: f"{k} {v}")(
            d[k])) for k in varying]
        out[raw] = " · ".join(parts) if parts else "—"
    return out


def _cohorts(groups: list[Group]) -> dict[tuple, list[Group]]:
    """The groups that share their --by values (one task's budgets differ from another's
    anyway; what a reader must see is what splits rows that the --by columns do not tell apart)."""
    out: dict[tuple, list[Group]] = {}
    for g in groups:
        out.setdefault(tuple(g.key.values()), []).append(g)
    return out


def varying_config(groups: list[Group]) -> list[str]:
    """The CONFIG_KEYS that split some rows with the same --by values (the columns to show)."""
    cohorts = _cohorts(groups).values()
    return [k for k in CONFIG_KEYS
            if any(len({g.config.get(k) for g in c}) > 1 for c in cohorts)]


def label_budgets(groups: list[Group], by: tuple[str, ...]) -> None:
    """Each group's `labels`: its CONFIG_KEYS for display, the budget as budget_labels says —
    over all rows when the budget is a --by key, else among the rows it must be told from."""
    cohorts = [groups] if "budget" in by else list(_cohorts(groups).values())
    for cohort in cohorts:
        raw = [g.settings for g in cohort]
        labels = budget_labels([_shown(r, "budget") for r in raw])
        params = param_labels([_shown(r, "agent_params") for r in raw])
        for g, r in zip(cohort, raw):
            g.labels = {k: labels.get(None if r[k] == "—" else r[k]) if k == "budget"
                           else params.get(None if r[k] == "—" else r[k])
                           if k == "agent_params" and r[k] not in (None, "—")
                           else r[k] for k in CONFIG_KEYS if k in r}


def _shown(settings: dict[str, str], key: str) -> str | None:
    """A setting's value, None where the table shows "—"."""
    value = settings.get(key)
    return None if value in (None, "—") else value


def _budget_json(group: Group) -> str | None:
    return _shown(group.settings, "budget")


def wall_clock(group: Group) -> float | None:
    """A group's wall-clock budget in seconds (its runs share it: groups split by budget)."""
    try:
        value = json.loads(_budget_json(group) or "{}").get("wall_clock_s")
    except (ValueError, AttributeError):
        return None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
        else None


def label_table_budgets(groups: list[Group]) -> list[float]:
    """Each group's budget label over the whole table (the budget column is always shown: rows
    of other budgets must be told apart, whatever else splits them; a 10- and a 4-minute run
    side by side are not comparable) and its `wall_clock_s`; the distinct wall clocks, sorted."""
    labels = budget_labels([_budget_json(g) for g in groups])
    for g in groups:
        g.labels["budget"] = labels.get(_budget_json(g)) or "—"
        g.wall_clock_s = wall_clock(g)
    return sorted({g.wall_clock_s for g in groups if g.wall_clock_s is not None})


def seed_means(members: list[dict[str, Any]]) -> tuple[list[float], dict[Any, int]]:
    """(the mean improvement of each seed, {seed: runs} for the seeds run more than once)."""
    by_seed: dict[Any, list[float]] = {}
    runs: dict[Any, int] = {}
    for m in members:
        runs[m.get("seed")] = runs.get(m.get("seed"), 0) + 1
        if m.get("improvement") is not None:
            by_seed.setdefault(m.get("seed"), []).append(float(m["improvement"]))
    return ([statistics.fmean(v) for _, v in sorted(by_seed.items(), key=lambda kv: str(kv[0]))],
            {s: n for s, n in runs.items() if n > 1})


def repeats_note(repeated: dict[Any, int], n_seeds: int) -> str | None:
    """How a group's runs relate to its seeds, when some repeat a seed."""
    if not repeated:
        return None
    if n_seeds <= 1:
        (seed,) = repeated
        return f"repeats of seed {seed}"
    listed = ", ".join(f"seed {s} ×{n}" for s, n in sorted(repeated.items(), key=str))
    return f"{n_seeds} seeds; {listed} averaged per seed"


def run_state(run_dir: Path, now: float | None = None) -> tuple[str | None, str | None]:
    """("live", status) for a run in progress, ("stale", why) for one marked running whose
    deadline has long passed (the runtime stopped without ending it), (None, None) otherwise."""
    try:
        info = run_info_of(read_run_mapping(run_dir))
    except (OSError, ValueError):
        return None, None
    if info.status not in LIVE_STATUSES:
        return None, None
    deadline = parse_time(info.deadline)
    grace = float(info.budget.eval_timeout_s or 0) + STALE_GRACE_S
    now = time.time() if now is None else now
    if deadline is not None and now > deadline + grace:
        late = duration(now - deadline)
        return "stale", (f"run.json still says {info.status} {late} after its deadline: the "
                         f"runtime stopped without ending the run (`a2c run --resume "
                         f"{run_dir}` finishes it)")
    return "live", str(info.status)
