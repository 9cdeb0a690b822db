"""Building a run's report (``report.json``) from its verified record.

``build_report(run_dir)`` returns a dict that validates against ``schemas/report.schema.json``;
``a2c.analysis.render`` turns it into Markdown and a self-contained HTML page.
Every number is derived from the record (events, journal, results, snapshots, logs); metric
definitions are in docs/analysis.md.
"""

from __future__ import annotations

import ast
import importlib.util
import itertools
import json
import math
import re
import statistics
from functools import lru_cache
from pathlib import Path
from typing import Any

import jsonschema

from a2c import __version__

from .failures import analyse_failures
from .record import RunRecord, iso, parse_time
from .route import FileRoute, analyse_file, compliance, is_code
from .snapshots import SnapshotRepo, diff_trees
from .verify import Verification, verify_run

REPORT_FORMAT = "a2c-report/1"
SCHEMA_PATH = Path(__file__).resolve().parent / "schemas" / "report.schema.json"
MAX_EXAMPLES = 3
EXAMPLE_WIDTH = 400


@lru_cache(maxsize=1)
def report_schema() -> dict[str, Any]:
    return json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))


def validate_report(report: dict[str, Any]) -> None:
    """Raise jsonschema.ValidationError if the report does not match its schema."""
    jsonschema.Draft202012Validator(report_schema()).validate(report)


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return None if math.isnan(value) or math.isinf(value) else float(value)


def _r(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


# ---------------------------------------------------------------------- header
def _header(record: RunRecord) -> dict[str, Any]:
    run = record.run
    started = record.first_event("run_started")
    sdata = (started or {}).get("data") or {}

    def pick(key: str, default: Any = None) -> Any:
        value = run.get(key)
        return sdata.get(key, default) if value is None else value

    versions = pick("versions", {}) or {}
    duration = None
    if record.started_at is not None and record.ended_at is not None:
        duration = round(record.ended_at - record.started_at, 3)
    base_model = _base_model_name(pick("base_model"))
    return {
        "run_id": str(pick("run_id", record.root.name)),
        "task": pick("task"), "level": pick("level"), "agent": pick("agent"),
        "driver": pick("driver"), "mode": pick("mode", "free"), "seed": pick("seed"),
        "base_model": base_model if isinstance(base_model, (str, dict)) or base_model is None
        else str(base_model),
        "budget": record.budget, "bundle_digest": pick("bundle_digest"),
        "spec_hash": pick("spec_hash"), "isolation": pick("isolation"),
        "status": pick("status"),
        "started_at": iso(record.started_at), "ended_at": iso(record.ended_at),
        "agent_started_at": iso(record.clock_start), "agent_ended_at": iso(record.agent_ended_at),
        "deadline": iso(record.deadline), "duration_s": duration,
        "agent_time_s": None if record.clock_start is None or record.agent_ended_at is None
        else round(record.agent_ended_at - record.clock_start, 3),
        "versions": versions if isinstance(versions, dict) else {},
    }


def _base_model_name(value: Any) -> Any:
    """`builtin:tiny`, `hub:Qwen/Qwen3-8B-Base@main`, `path:/models/x` from a spec or a
    run.json base_model object ({spec, path, fingerprint}); strings pass through."""
    if isinstance(value, dict):
        spec = value.get("spec") if isinstance(value.get("spec"), dict) else value
        if "builtin" in spec:
            return f"builtin:{spec['builtin']}"
        if "hub" in spec:
            rev = spec.get("revision")
            return f"hub:{spec['hub']}" + (f"@{rev}" if rev else "")
        if "path" in spec:
            return f"path:{spec['path']}"
        return json.dumps(value, sort_keys=True)
    return value


# ---------------------------------------------------------------------- submissions
def _submissions(record: RunRecord, baseline: float | None) -> list[dict[str, Any]]:
    out = []
    best: float | None = None
    for sub in record.submissions:
        improved = False
        if sub.valid and sub.score is not None and not sub.base_copy and (
                best is None or sub.score > best):
            improved = best is not None or baseline is None or sub.score > baseline
            best = sub.score if best is None else max(best, sub.score)
        out.append({
            "id": sub.id, "index": sub.index, "t_s": record.rel_time(sub.received_at),
            "received_at": iso(sub.received_at), "scored_at": iso(sub.scored_at),
            "scored": sub.scored, "valid": sub.valid, "score": _num(sub.score),
            "ci95": sub.ci95, "error": sub.error, "duplicate_of": sub.duplicate_of,
            "base_copy": sub.base_copy, "note": sub.note, "model_path": sub.model_path,
            "weights_hash": sub.weights_hash, "elapsed_s": _num(sub.elapsed_s),
            "backend": sub.backend, "result_file": sub.result_file, "snapshot": sub.snapshot,
            "best_so_far": best, "improved": improved,
        })
    return out


# ---------------------------------------------------------------------- metrics
def _metrics(record: RunRecord, subs: list[dict[str, Any]], baseline: float | None,
             header: dict[str, Any]) -> dict[str, Any]:
    n = len(subs)
    counted = [s for s in subs if s["valid"] and s["score"] is not None and not s["base_copy"]]
    first_valid = counted[0] if counted else None
    best = max(counted, key=lambda s: (s["score"], -s["index"])) if counted else None
    if best is not None:  # earliest submission reaching the best score
        best = next(s for s in counted if s["score"] == best["score"])
    first_improvement = next((s for s in counted if baseline is not None
                              and s["score"] > baseline), None)
    scores = [s["score"] for s in counted]
    pairs = list(itertools.pairwise(scores))
    monotonicity = (sum(1 for a, b in pairs if b >= a) / len(pairs)) if pairs else None
    spearman = None
    if len(scores) >= 3 and len(set(scores)) > 1:
        ranks = _ranks(scores)
        order = list(range(1, len(scores) + 1))
        spearman = _pearson(order, ranks)
    wall = _num((record.budget or {}).get("wall_clock_s"))
    duration = header.get("agent_time_s")
    if duration is None:
        duration = header.get("duration_s")
    max_subs = (record.budget or {}).get("max_submissions")
    last_t = max((s["t_s"] for s in subs if s["t_s"] is not None), default=None)
    gap = None
    if last_t is not None and duration is not None:
        gap = round(max(0.0, duration - last_t), 3)
    return {
        "n_submissions": n,
        "n_valid": len([s for s in subs if s["valid"]]),
        "n_invalid": len([s for s in subs if not s["valid"]]),
        "valid_submission_rate": _r(len([s for s in subs if s["valid"]]) / n) if n else None,
        "first_valid_index": first_valid["index"] if first_valid else None,
        "first_valid_delay_s": first_valid["t_s"] if first_valid else None,
        "first_improvement_index": first_improvement["index"] if first_improvement else None,
        "time_to_first_improvement_s": first_improvement["t_s"] if first_improvement else None,
        "best_index": best["index"] if best else None,
        "time_to_best_s": best["t_s"] if best else None,
        "n_improvements": sum(1 for s in subs if s["improved"]),
        "monotonicity": _r(monotonicity),
        "rank_correlation": _r(spearman),
        "base_model_copies": sum(1 for s in subs if s["base_copy"]),
        "duplicates": sum(1 for s in subs if s["duplicate_of"] and not s["base_copy"]),
        "run_duration_s": header.get("duration_s"),
        "agent_time_s": duration,
        "budget_used_share": _r(duration / wall) if duration is not None and wall else None,
        "submissions_used_share": _r(n / max_subs) if isinstance(max_subs, int) and max_subs
        else None,
        "gap_last_submission_to_end_s": gap,
        "n_snapshots": len({s["commit"] for s in record.snapshots}),
    }


def _ranks(values: list[float]) -> list[float]:
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def _pearson(xs: list[float], ys: list[float]) -> float | None:
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    sx = math.sqrt(sum((x - mx) ** 2 for x in xs))
    sy = math.sqrt(sum((y - my) ** 2 for y in ys))
    return sxy / (sx * sy) if sx and sy else None


# ---------------------------------------------------------------------- route + timeline
class _RouteCache:
    def __init__(self, repo: SnapshotRepo):
        self.repo = repo
        self.by_blob: dict[str, FileRoute] = {}

    def file(self, path: str, blob: str) -> FileRoute | None:
        key = f"{blob}:{path}"
        if key not in self.by_blob:
            text = self.repo.text(blob)
            self.by_blob[key] = analyse_file(path, text) if text is not None else None
        return self.by_blob[key]


def _attribute(routes: list[FileRoute], changed: set[str], model_path: str | None
               ) -> tuple[list[FileRoute], str]:
    training = [r for r in routes if r.trains]
    if not training:
        return [], "none"
    if model_path:
        name = Path(model_path.rstrip("/")).name
        tail = "/".join(Path(model_path.rstrip("/")).parts[-2:])
        if name and name not in ("output", "model", "."):
            hits = [r for r in training if any(name in s or tail in s for s in r.strings)]
            if hits:
                return hits, "output_path"
    hits = [r for r in training if r.path in changed]
    if hits:
        return hits, "changed"
    return training, "all"


_MODULE_RUN = re.compile(r"\bpython[\d.]*\s+(?:-\w+\s+)*-m\s+(a2c\.[\w.]+)")
_CLI_RUN = re.compile(r"\b(?:trl|accelerate\s+launch\s+-m\s+trl\.scripts\.)\s*"
                      r"(sft|dpo|grpo|kto|orpo|ppo|rloo)\b")


def _module_source(name: str) -> tuple[str, str] | None:
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError, AttributeError):
        return None
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return None
    try:
        return spec.origin, Path(spec.origin).read_text(encoding="utf-8")
    except OSError:
        return None


def _launched(record: RunRecord) -> list[tuple[float | None, FileRoute]]:
    """Training code the agent launched from outside its workspace: `python -m a2c...` modules
    named in the agent's launcher (RUN/agent/launch.sh) or in logs/commands.log (the reference
    agents train this way; read from the installed a2c), one level of their a2c imports, and
    TRL command-line trainers (`trl sft ...`). Each with the time it was first launched."""
    sources: list[tuple[float | None, str]] = []
    launch = record.root / "agent" / "launch.sh"
    if launch.is_file():
        for line in launch.read_text(encoding="utf-8", errors="replace").splitlines():
            if not line.lstrip().startswith("#"):
                sources.append((None, line))
    commands = record.root / "logs" / "commands.log"
    if commands.is_file() and commands.stat().st_size < 8_000_000:
        for line in commands.read_text(encoding="utf-8", errors="replace").splitlines():
            stamp = parse_time(line.split("\t", 1)[0]) if "\t" in line else None
            sources.append((stamp, line))
    found: dict[str, tuple[float | None, FileRoute]] = {}
    for stamp, line in sources:
        for match in _MODULE_RUN.finditer(line):
            name = match.group(1)
            if name in found:
                continue
            loaded = _module_source(name)
            if loaded is None:
                continue
            route = _analyse_module(name, loaded[1])
            found[name] = (stamp, route)
            for dep in _a2c_imports(loaded[1])[:10]:
                if dep not in found and (dep_src := _module_source(dep)) is not None:
                    found[dep] = (stamp, _analyse_module(dep, dep_src[1]))
        for match in _CLI_RUN.finditer(line):
            key = f"trl {match.group(1)}"
            if key not in found:
                found[key] = (stamp, analyse_file("logs/commands.log.sh", line.split("\t")[-1]))
                found[key][1].path = "logs/commands.log"
    return [(stamp, route) for stamp, route in found.values() if route.trains]


def _analyse_module(name: str, source: str) -> FileRoute:
    route = analyse_file(f"{name.replace('.', '/')}.py", source)
    route.path = f"module:{name}"
    for item in route.evidence:
        item.file = route.path
    for hp in route.hyperparameters:
        hp.file = route.path
    return route


def _a2c_imports(source: str) -> list[str]:
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("a2c.") \
                and node.module not in names:
            names.append(node.module)
    return names


def _upstream(chosen: list[FileRoute], routes: list[FileRoute]) -> list[FileRoute]:
    """Training scripts whose output folder a chosen script starts from (e.g. SFT -> GRPO)."""
    found = list(chosen)
    for route in chosen:
        mine = {s for s in route.strings if "output" in s and len(s) > 7}
        for other in routes:
            if other.trains and other not in found and mine & other.strings:
                found.append(other)
    return found


def _hp_summary(routes: list[FileRoute]) -> dict[str, list[Any]]:
    found: dict[str, list[Any]] = {}
    for route in routes:
        for hp in route.hyperparameters:
            values = found.setdefault(hp.name, [])
            if hp.value not in values:
                values.append(hp.value)
    return dict(sorted(found.items()))


def _route_and_timeline(record: RunRecord, subs: list[dict[str, Any]], mode: str | None
                        ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    repo = SnapshotRepo(record.root / "snapshots.git")
    route_out: dict[str, Any] = {"available": repo.available, "per_submission": [],
                                 "methods": [], "adapters": [], "hyperparameters": {},
                                 "compliance": compliance(mode, [])}
    timeline: list[dict[str, Any]] = []
    if not repo.available:
        route_out["compliance"]["detail"] = "no snapshots.git: the route cannot be read"
        return route_out, timeline
    cache = _RouteCache(repo)
    shipped = _shipped_workspace(record.root / "bundle" / "workspace")
    launched = _launched(record)
    try:
        snapshots = record.snapshots
        prev_files: dict[str, str] = {}
        prev_commit: str | None = None
        prev_score: float | None = None
        prev_id: str | None = None
        all_methods: set[str] = set()
        all_adapters: set[str] = set()
        verdicts = []
        for sub in subs:
            commit = sub["snapshot"]
            if commit is None:
                commit = repo.resolve(f"refs/tags/submission-{sub['id']}")
                sub["snapshot"] = commit
            if commit is None:
                route_out["per_submission"].append({
                    "id": sub["id"], "snapshot": None, "methods": [], "attribution": "none",
                    "files": [], "adapters": [], "hyperparameters": {}, "evidence": [],
                    "compliance": {"verdict": "unknown", "detail": "no code snapshot",
                                   "offending": []}})
                continue
            if prev_commit is None:
                # Diff the first submission against the last snapshot taken before it.
                before = [s for s in snapshots if s["commit"] != commit and s["ts"] is not None
                          and sub["received_at"] is not None
                          and iso(s["ts"]) <= sub["received_at"]]
                if before:
                    prev_commit = before[-1]["commit"]
                    prev_files = repo.files(prev_commit)
            files = repo.files(commit)
            diff = diff_trees(repo, prev_files, files,
                              old_text=shipped if prev_commit is None else None)
            changed = {f.path for f in diff.files}
            routes = [r for path, blob in sorted(files.items()) if is_code(path)
                      for r in [cache.file(path, blob)] if r is not None]
            chosen, how = _attribute(routes, changed, sub["model_path"])
            if how == "output_path":
                chosen = _upstream(chosen, routes)
            elif how == "none":
                received = parse_time(sub["received_at"])
                chosen = [r for stamp, r in launched
                          if stamp is None or received is None or stamp <= received]
                how = "launched" if chosen else "none"
            methods = sorted({m for r in chosen for m in r.methods})
            adapters = sorted({a for r in chosen for a in r.adapters})
            verdict = compliance(mode, methods) if sub["valid"] or methods else \
                {"verdict": "n/a", "detail": "invalid submission", "offending": []}
            if sub["valid"] and not sub["base_copy"]:
                verdicts.append(verdict)
            all_methods.update(methods)
            all_adapters.update(adapters)
            route_out["per_submission"].append({
                "id": sub["id"], "snapshot": commit, "methods": methods, "attribution": how,
                "files": [r.path for r in chosen], "adapters": adapters,
                "hyperparameters": _hp_summary(chosen),
                "evidence": [e.to_dict() for r in chosen for e in r.evidence][:12],
                "compliance": verdict})
            score = sub["score"] if sub["valid"] else None
            timeline.append({
                "from_id": prev_id, "to_id": sub["id"], "from_commit": prev_commit,
                "to_commit": commit, "t_s": sub["t_s"],
                "files_changed": [{"path": f.path, "status": f.status, "added": f.added,
                                   "removed": f.removed} for f in diff.files],
                "lines_added": diff.added, "lines_removed": diff.removed,
                "diff_excerpt": diff.excerpt, "diff_truncated": diff.truncated,
                "score_before": prev_score, "score_after": score,
                "score_change": _r(score - prev_score) if score is not None
                and prev_score is not None else None,
                "valid": sub["valid"], "methods": methods})
            prev_files, prev_commit, prev_id = files, commit, sub["id"]
            if score is not None:
                prev_score = score
        route_out["methods"] = sorted(all_methods)
        route_out["adapters"] = sorted(all_adapters)
        route_out["hyperparameters"] = _merge_hps(route_out["per_submission"])
        route_out["compliance"] = _overall(mode, verdicts, sorted(all_methods))
    finally:
        repo.close()
    return route_out, timeline


def _shipped_workspace(folder: Path) -> dict[str, str]:
    """The workspace files as the bundle ships them: the first submission is diffed against
    these when no snapshot precedes it (so the diff shows the agent's work, not the bundle)."""
    shipped: dict[str, str] = {}
    if folder.is_dir():
        for path in sorted(folder.rglob("*")):
            if path.is_file() and path.stat().st_size <= 512_000:
                try:
                    shipped[path.relative_to(folder).as_posix()] = path.read_text("utf-8")
                except (UnicodeDecodeError, OSError):
                    continue
    return shipped


def _merge_hps(per_sub: list[dict[str, Any]]) -> dict[str, list[Any]]:
    merged: dict[str, list[Any]] = {}
    for entry in per_sub:
        for key, values in entry["hyperparameters"].items():
            bucket = merged.setdefault(key, [])
            for value in values:
                if value not in bucket:
                    bucket.append(value)
    return dict(sorted(merged.items()))


def _overall(mode: str | None, verdicts: list[dict[str, Any]], methods: list[str]
             ) -> dict[str, Any]:
    base = compliance(mode, methods)
    if base["verdict"] == "n/a":
        return base
    if any(v["verdict"] == "violates" for v in verdicts):
        offending = sorted({m for v in verdicts for m in v.get("offending", [])})
        return {"verdict": "violates", "offending": offending,
                "detail": f"{', '.join(offending)} used for a scored model under {mode}"}
    if verdicts and all(v["verdict"] == "complies" for v in verdicts):
        return {"verdict": "complies", "offending": [],
                "detail": f"every valid submission's route is allowed under {mode}"}
    return {"verdict": "unknown", "offending": [],
            "detail": "the route of some valid submissions could not be determined"
            if verdicts else "no valid submission"}


# ---------------------------------------------------------------------- outcomes
def _clip(value: Any, width: int = EXAMPLE_WIDTH) -> Any:
    if value is None or isinstance(value, (int, float, bool)):
        return value
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= width else text[:width - 1] + "…"


def _correct(item: dict[str, Any]) -> bool | None:
    if isinstance(item.get("correct"), bool):
        return item["correct"]
    score = _num(item.get("score"))
    return None if score is None else score > 0


def _outcomes(record: RunRecord, subs: list[dict[str, Any]], level: Any,
              best_index: int | None) -> dict[str, Any] | None:
    if best_index is None:
        return None
    best = next(s for s in subs if s["index"] == best_index)
    result = record.result(best["result_file"]) if best["result_file"] else None
    if result is None:
        return {"submission_id": best["id"], "available": False, "n_items": 0, "n_correct": 0,
                "accuracy": None, "metrics": {}, "grader": None, "fixed": None, "broken": None,
                "examples": []}
    items = [i for i in result.get("items") or [] if isinstance(i, dict)]
    baseline = record.result("results/baseline.json") or {}
    base_items = {str(i.get("id")): _correct(i) for i in baseline.get("items") or []
                  if isinstance(i, dict)}
    fixed = broken = None
    if base_items:
        fixed = broken = 0
        for item in items:
            before = base_items.get(str(item.get("id")))
            after = _correct(item)
            if before is False and after is True:
                fixed += 1
            elif before is True and after is False:
                broken += 1
    n_correct = sum(1 for i in items if _correct(i))
    examples = []
    right = [i for i in items if _correct(i)]
    wrong = [i for i in items if _correct(i) is False]
    for item in right[:MAX_EXAMPLES] + wrong[:MAX_EXAMPLES]:
        example = {"id": str(item.get("id")), "correct": _correct(item),
                   "score": _num(item.get("score")), "reward": _num(item.get("reward")),
                   "baseline_correct": base_items.get(str(item.get("id")))}
        for key in ("prompt", "output", "extracted", "gold", "error"):
            if item.get(key) is not None:
                example[key] = _clip(item[key])
        trajectory = item.get("trajectory")
        if isinstance(trajectory, list):
            example["steps"] = len(trajectory)
            example["trajectory"] = [_clip(step, 200) for step in trajectory[:6]]
        examples.append(example)
    metrics = {k: v for k, v in (result.get("metrics") or {}).items()
               if isinstance(v, (int, float, str, bool)) or v is None}
    return {"submission_id": best["id"], "available": True, "n_items": len(items),
            "n_correct": n_correct, "accuracy": _r(n_correct / len(items)) if items else None,
            "metrics": metrics, "grader": result.get("grader"), "fixed": fixed,
            "broken": broken, "examples": examples,
            "unit": "episode" if str(level) == "3" else "item"}


# ---------------------------------------------------------------------- main
def build_report(run_dir: str | Path, verification: Verification | None = None,
                 forced: bool = False) -> dict[str, Any]:
    root = Path(run_dir)
    record = RunRecord.load(root)
    verification = verification or verify_run(root, record)
    header = _header(record)
    baseline = record.baseline_score
    subs = _submissions(record, baseline)
    metrics = _metrics(record, subs, baseline, header)
    best_sub = next((s for s in subs if s["index"] == metrics["best_index"]), None)
    best_score = best_sub["score"] if best_sub else None
    last_valid = [s for s in subs if s["valid"] and s["score"] is not None]
    route, timeline = _route_and_timeline(record, subs, header["mode"])
    failures = analyse_failures(record, record.submissions)
    counts: dict[str, int] = {}
    for failure in failures:
        counts[failure["category"]] = counts.get(failure["category"], 0) + 1
    bundle = {}
    try:
        bundle = json.loads((root / "bundle" / "bundle.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        pass
    report = {
        "format": REPORT_FORMAT,
        "producer": {"a2c_version": __version__,
                     "run_a2c_version": header["versions"].get("a2c"),
                     "compiler_version": bundle.get("compiler_version"),
                     "spec_hash": header["spec_hash"] or bundle.get("spec_hash"),
                     "bundle_digest": header["bundle_digest"]},
        "verification": {**verification.to_dict(), "forced": bool(forced and not verification.ok)},
        "run": header,
        "scores": {"baseline": baseline, "best": best_score,
                   "best_submission": best_sub["id"] if best_sub else None,
                   "final": _num(record.run.get("final_score")),
                   "last_valid": last_valid[-1]["score"] if last_valid else None,
                   "improvement": _r(best_score - baseline) if best_score is not None
                   and baseline is not None else None,
                   "scoring_policy": ((bundle.get("task") or {}).get("scoring") or {}).get("policy")},
        "submissions": subs,
        "metrics": metrics,
        "route": route,
        "timeline": timeline,
        "failures": failures,
        "failure_counts": dict(sorted(counts.items())),
        "outcomes": _outcomes(record, subs, header["level"], metrics["best_index"]),
    }
    validate_report(report)
    return report


def write_report(run_dir: str | Path, out_dir: str | Path | None = None, force: bool = False
                 ) -> tuple[dict[str, Any], dict[str, Path]]:
    """Verify, build and write report.json, report.md, score_over_time.svg and report.html.

    Raises VerificationError (naming the first problem) for a record that fails verification,
    unless `force`; the forced report then says so at its top.
    """
    from .render import render_html, render_markdown, render_svg
    from .verify import VerificationError

    root = Path(run_dir)
    record = RunRecord.load(root)
    verification = verify_run(root, record)
    if not verification.ok and not force:
        extra = len(verification.problems) - 1
        raise VerificationError(
            f"{root}: the run record failed verification: {verification.first}"
            + (f" (and {extra} more problem{'s' if extra > 1 else ''})" if extra else "")
            + "; refusing to report it (run `a2c verify` for details, or pass --force to report "
              "it anyway, marked as unverified)")
    report = build_report(root, verification, forced=force)
    out = Path(out_dir) if out_dir else root / "report"
    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": out / "report.json", "md": out / "report.md",
             "svg": out / "score_over_time.svg", "html": out / "report.html"}
    paths["json"].write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n",
                             encoding="utf-8")
    paths["svg"].write_text(render_svg(report), encoding="utf-8")
    paths["md"].write_text(render_markdown(report, paths["svg"].name), encoding="utf-8")
    paths["html"].write_text(render_html(report), encoding="utf-8")
    return report, paths
