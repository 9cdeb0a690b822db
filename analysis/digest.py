"""A compact digest of a run's record for a model to read: the numbers of report.json, the
events (numbered as citations name them), the submissions, the commands (numbered by line of
logs/commands.log), the code at each submission (snapshot commit, diff stat, a short diff) and
the agent's first steps. Capped at `max_chars` (about a quarter as many tokens): each part has
its own share, so a long command log cannot push out the code.
"""

from __future__ import annotations

import json

from a2c.contracts.run_paths import RunPaths

from .attribution import _shipped_workspace
from .citations import Evidence, event_text, submission_text
from .report_doc import Report
from .snapshots import diff_trees

SKIP_EVENTS = {"driver_call"}        # one per model call: the steps part says what they did
MAX_CHARS = 60_000
OUTSIDE = ".a2c-outside/"
LINE = 220


def _clip(text: str, n: int = LINE) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[:n - 1] + "…"


def _capped(lines: list[str], budget: int) -> list[str]:
    out, used = [], 0
    for i, line in enumerate(lines):
        if used + len(line) + 1 > budget:
            out.append(f"… {len(lines) - i} more line(s) left out")
            break
        out.append(line)
        used += len(line) + 1
    return out


def _header(report: Report) -> list[str]:
    run = report.run
    keep = {"run_id": run.run_id, "task": run.task, "level": run.level, "mode": run.mode,
            "agent": run.agent, "driver": run.driver, "base_model": run.base_model,
            "status": run.status}
    return [json.dumps(keep, ensure_ascii=False),
            f"scores: {json.dumps(report.scores.to_dict(), ensure_ascii=False)}",
            f"submissions: {report.metrics.n_submissions}, training route: "
            f"{_clip(json.dumps(report.route.to_dict(), ensure_ascii=False), 600)}",
            f"failure counts: {json.dumps(report.failure_counts)}"]


def _inside(files: dict[str, str]) -> dict[str, str]:
    return {p: b for p, b in files.items() if not p.startswith(OUTSIDE)}


def _code(ev: Evidence) -> list[str]:
    out: list[str] = []
    repo, prev = ev.repo, {}
    if not repo.available:
        return ["(no code snapshots)"]
    shipped = _shipped_workspace(RunPaths(ev.root).bundle_workspace)
    snapshots = ev.record.snapshot_taken
    for snap in snapshots:
        files = repo.files(snap.commit)
        if snap.submission_id is None and snap is not snapshots[-1]:
            continue
        # the workspace's own files with a short diff; what the agent left outside it
        # (.a2c-outside/: its HOME and /tmp, scaffold state mostly) by name only
        ws_prev, ws_now = _inside(prev), _inside(files)
        diff = diff_trees(repo, ws_prev, ws_now, excerpt_lines=40,
                          old_text=None if prev else shipped)
        outside = diff_trees(repo, {p: b for p, b in prev.items() if p not in ws_prev},
                             {p: b for p, b in files.items() if p not in ws_now}, 0)
        what = f"submission {snap.submission_id}" if snap.submission_id else snap.reason
        out.append(f"snapshot {snap.commit[:12]} ({what}): {len(files)} files; changed: "
                   + (", ".join(f"{c.path} ({c.status} +{c.added}/-{c.removed})"
                                for c in diff.files[:12]) or "nothing"))
        if outside.files:
            out.append("  outside the workspace: " + _clip(", ".join(
                f"{c.path} ({c.status})" for c in outside.files), 600))
        out += ["    " + _clip(x, 160) for x in diff.excerpt]
        prev = files
    return out


def _steps(report: Report) -> list[str]:
    out = []
    for s in (report.driver or {}).get("steps") or []:
        calls = "; ".join(_clip(c.get("text", ""), 120) for c in s.get("tool_calls") or [])
        out.append(f"step {s.get('step_id')}: {_clip(s.get('message') or '', 160)}"
                   + (f" | calls: {calls}" if calls else ""))
    return out


def build_digest(ev: Evidence, report: Report, max_chars: int = MAX_CHARS) -> str:
    """The digest text (see the module doc)."""
    events = [f"E{i} {_clip(event_text(e))}" for i, e in enumerate(ev.record.events)
              if e.get("type") not in SKIP_EVENTS]
    subs = [f"S{s.id}: {submission_text(s)}" for s in ev.record.submissions]
    commands = [f"C{i}: {_clip(c)}" for i, c in enumerate(ev.commands, 1)]
    parts = [("RUN", _header(report), 0.08), ("SUBMISSIONS", subs, 0.08),
             ("EVENTS (cite as kind=event, ref=N of EN; driver calls left out)", events, 0.22),
             ("COMMANDS (cite as kind=command, ref=N of CN)", commands, 0.2),
             ("CODE AT EACH SUBMISSION (cite as kind=file, ref=COMMIT:PATH)", _code(ev), 0.27),
             ("AGENT STEPS", _steps(report), 0.15)]
    text = []
    for title, lines, share in parts:
        text.append(f"## {title}")
        text += _capped(lines, int(max_chars * share)) or ["(none)"]
        text.append("")
    return "\n".join(text)
