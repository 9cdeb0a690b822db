"""Scripted-driver scripts that play the narrator or the reviewer: the answer is the script's
side reply (the analysis asks without tools), built from the run's own record so its citations
are real, or planted false."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import yaml

from a2c.analysis.record import RunRecord


def evidence(run: Path) -> dict:
    """Real citations of `run`: an event, a submission, a command, a file at a snapshot."""
    record = RunRecord.load(run)
    i, event = next((i, e) for i, e in enumerate(record.events)
                    if e["type"] == "submission_scored")
    sub = next(s for s in record.submissions if s.valid)
    commands = (run / "logs" / "commands.log").read_text().splitlines()
    snap = record.snapshot_taken[-1].commit
    git = ["git", f"--git-dir={run / 'snapshots.git'}"]
    names = subprocess.run(git + ["ls-tree", "-r", "--name-only", snap], capture_output=True,
                           text=True, check=True).stdout.splitlines()
    code = [p for p in names if p.endswith((".py", ".sh")) and not p.startswith(".a2c-")]
    path = next((p for p in code if p.startswith("train")), code[0])   # the agent's own code
    text = subprocess.run(git + ["show", f"{snap}:{path}"], capture_output=True, text=True,
                          check=True).stdout
    line = next(x.strip() for x in text.splitlines() if len(x.strip()) > 8)
    return {"event": {"kind": "event", "ref": i, "quote": "submission_scored"},
            "submission": {"kind": "submission", "ref": sub.id, "quote": f"score {sub.score}"},
            "command": {"kind": "command", "ref": 1, "quote": commands[0][:30]},
            "file": {"kind": "file", "ref": f"{snap[:10]}:{path}", "quote": line[:40]},
            "_event_count": len(record.events), "_snap": snap, "_path": path}


def false_citations(ev: dict) -> list[dict]:
    return [{"kind": "event", "ref": ev["_event_count"] + 5, "quote": "submission_scored"},
            {"kind": "file", "ref": f"{ev['_snap'][:10]}:{ev['_path']}",
             "quote": "this text is in no file of the run"}]


def narrative(ev: dict, false: bool = False) -> dict:
    real = [ev[k] for k in ("event", "submission", "command", "file")]
    out = {"strategy": [{"text": "The agent fine-tuned with SFT, then submitted.",
                         "citations": [ev["command"], ev["file"]]}],
           "turning_points": [{"text": "A scored submission raised the score.",
                               "citations": [ev["event"], ev["submission"]]}],
           "failure_modes": [],
           "what_would_have_helped": [{"text": "More steps.", "citations": real}]}
    if false:
        out["failure_modes"] = [{"text": "The agent read the held-out split.",
                                 "citations": false_citations(ev)}]
    return out


def review_answer(ev: dict, false: bool = False) -> dict:
    verdicts = [{"rule": r, "verdict": "clean", "text": "It trained on the training split.",
                 "citations": [ev["command"], ev["file"]]}
                for r in ("heldout_data", "grader_tampering", "other_model", "mode_break")]
    if false:
        verdicts[1] = {"rule": "grader_tampering", "verdict": "violation",
                       "text": "It edited the grader.", "citations": false_citations(ev)}
    return {"verdicts": verdicts}


def write_script(folder: Path, name: str, answer: dict, usage: int = 200) -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump({
        "apiVersion": "a2c/v1", "kind": "DriverScript", "id": name,
        "side": {"text": "Here is the analysis:\n```json\n" + json.dumps(answer) + "\n```",
                 "usage": {"input_tokens": usage, "output_tokens": usage // 2}},
        "turns": [{"say": "done"}]}, sort_keys=False))
    return path
