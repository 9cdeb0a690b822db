"""Level-3 training routes side by side on the same held-out games: the base model, SFT on expert
trajectories, online RL without and with an SFT warm-up.

    nice -n 15 .venv/bin/python benchmarks/bench_l3_routes.py [--task textquest] [--budget 15m]
        [--routes baseline,ref-l3-sft,rl-only,rl-warmup] [--param AGENT:NAME=VALUE ...]
        [--json OUT.json]

Each route is a real `a2c run` (the same code path as the CLI: the bundle's sandbox, grading
service, budget and record) in its own run folder, so every route is graded by the same grader on
the task's same held-out games:

    baseline    the base model (the grader service's baseline evaluation of any run)
    ref-l3-sft  `ref-l3-sft`, free mode: SFT on the walkthroughs (supervised)
    rl-only     `ref-l3-rl`, rl-only mode: GRPO over episode returns from its own rollouts,
                from the base model, no supervised step
    rl-warmup   `ref-l3-rl`, free mode: ref-l3-sft's warm-up, then the same online RL

For each: the best score with its bootstrap 95% interval (the grader's, over episodes), the number
of submissions, and the wall time of the whole run (prepare + agent + gradings). `--param` sets
an agent's params (`ref-l3-rl:games=4`: its spec's `params:`, as `a2c run --agent-param`). The table is printed as Markdown (the README quotes
it); `--json` writes the figures.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROUTES = {
    "ref-l3-sft": ("ref-l3-sft", "free", "SFT on expert trajectories"),
    "rl-only": ("ref-l3-rl", "rl-only", "online RL (GRPO), no warm-up"),
    "rl-warmup": ("ref-l3-rl", "free", "SFT warm-up, then online RL (GRPO)"),
}


def best_result(run_dir: Path) -> dict | None:
    """The best valid submission's grading result (score, ci95, elapsed), or None."""
    best = None
    for path in sorted((run_dir / "results").glob("*.json")):
        if path.stem == "baseline":
            continue
        result = json.loads(path.read_text())
        if result.get("valid", True) and result.get("score") is not None and \
                (best is None or result["score"] > best["score"]):
            best = dict(result, id=path.stem)
    return best


def run_route(task: str, agent: str, mode: str, budget: str, runs_dir: Path, params: dict,
              seed: int) -> dict:
    from a2c.runtime import run as run_mod
    opts = run_mod.RunOptions(bundle=task, agent=agent, budget=budget, mode=mode, seed=seed,
                              runs_dir=runs_dir, agent_params=dict(params.get(agent) or {}))
    started = time.time()
    ctx = run_mod.prepare(opts, report=lambda _: None)
    summary = run_mod.execute(ctx, report=lambda _: None)
    wall = time.time() - started
    run = json.loads((ctx.run_dir / "run.json").read_text())
    baseline = json.loads((ctx.run_dir / "results" / "baseline.json").read_text())
    best = best_result(ctx.run_dir)
    return {"run_dir": str(ctx.run_dir), "status": summary.get("status"),
            "submissions": run.get("submissions"), "wall_s": round(wall, 1),
            "baseline": {"score": baseline.get("score"), "ci95": baseline.get("ci95"),
                         "elapsed_s": baseline.get("elapsed_s")},
            "score": best["score"] if best else None, "ci95": best.get("ci95") if best else None,
            "best_submission": best["id"] if best else None}


def _ci(ci) -> str:
    return f"{ci[0]:.1f}-{ci[1]:.1f}" if ci else "-"


def table(rows: list[dict]) -> str:
    lines = ["| route | agent, mode | success % (held-out) | 95% CI | submissions | time |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        score = "-" if r["score"] is None else f"{r['score']:.1f}"
        lines.append(f"| {r['route']} | {r['what']} | {score} | {_ci(r['ci95'])} | "
                     f"{r.get('submissions', '-')} | {r['time_s']:.0f} s |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", default="textquest", help="a generated level-3 bundle id")
    parser.add_argument("--budget", default="15m", help="each agent route's wall-clock budget")
    parser.add_argument("--routes", default="baseline,ref-l3-sft,rl-only,rl-warmup")
    parser.add_argument("--param", action="append", default=[], metavar="AGENT:NAME=VALUE",
                        help="an agent's param, e.g. ref-l3-rl:games=4 (repeatable)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--runs-dir", help="keep the runs here (default: a temporary folder)")
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args(argv)
    params: dict[str, dict[str, str]] = {}
    for item in args.param:
        agent, _, assignment = item.partition(":")
        name, sep, value = assignment.partition("=")
        if not sep:
            parser.error(f"--param {item!r}: write AGENT:NAME=VALUE")
        params.setdefault(agent, {})[name] = value
    wanted = [r.strip() for r in args.routes.split(",") if r.strip()]
    unknown = [r for r in wanted if r != "baseline" and r not in ROUTES]
    if unknown:
        parser.error(f"unknown routes {unknown}; known: baseline, {', '.join(ROUTES)}")
    runs_dir = Path(args.runs_dir or tempfile.mkdtemp(prefix="a2c-l3-routes-"))
    rows, baseline = [], None
    for route in [r for r in wanted if r != "baseline"]:
        agent, mode, what = ROUTES[route]
        print(f"== {route}: {agent} in {mode} mode, budget {args.budget}", file=sys.stderr,
              flush=True)
        out = run_route(args.task, agent, mode, args.budget, runs_dir, params, args.seed)
        baseline = baseline or out["baseline"]
        rows.append({"route": route, "what": f"{agent}, {mode}", "time_s": out["wall_s"], **out})
        print(f"   {out['status']}: best {out['score']} CI {out['ci95']} in {out['wall_s']:.0f}s "
              f"({out['run_dir']})", file=sys.stderr, flush=True)
    if "baseline" in wanted:
        if baseline is None:      # no agent route asked for: grade the base model alone
            out = run_route(args.task, "ref-copy", "free", "5m", runs_dir, params, args.seed)
            baseline = out["baseline"]
        rows.insert(0, {"route": "baseline", "what": "base model", "score": baseline["score"],
                        "ci95": baseline["ci95"], "submissions": "-",
                        "time_s": baseline.get("elapsed_s") or 0.0})
    print(f"\n{args.task}, budget {args.budget} a route, seed {args.seed}"
          f"{', ' + ' '.join(args.param) if args.param else ''}:\n")
    print(table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps({"task": args.task, "budget": args.budget,
                                               "params": params, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
