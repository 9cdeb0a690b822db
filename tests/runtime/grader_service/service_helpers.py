"""Helpers shared by the grader service tests (imported by name; tests dirs are not packages)."""

from __future__ import annotations

import json
import secrets
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
FAKE_EVALUATOR = [sys.executable, str(HERE / "fake_evaluator.py")]


def make_model(path: Path, content: str = "weights", **controls) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "model.safetensors").write_text(content)
    (path / "config.json").write_text('{"model_type": "fake"}')
    for name, value in controls.items():
        (path / name.upper()).write_text(str(value))
    return path


class RunFactory:
    def __init__(self, tmp_path: Path):
        self.tmp_path = tmp_path
        self.count = 0

    def __call__(self, **overrides) -> Path:
        from a2c.runtime.grader_service import write_service_config

        self.count += 1
        run = self.tmp_path / f"run{self.count}"
        ws = run / "workspace"
        (ws / "output").mkdir(parents=True)
        (ws / "train.py").write_text("print('train')\n")
        heldout = run / "grader" / "heldout.jsonl"
        heldout.parent.mkdir(parents=True)
        heldout.write_text('{"id": "h1", "prompt": "1+1", "answer": "2"}\n')
        cfg = {
            "token": secrets.token_hex(16), "socket_path": str(run / "grader" / "grader.sock"),
            "host": "127.0.0.1", "port": 0, "deadline_unix": time.time() + 3600,
            "max_submissions": 50, "min_interval_s": 0, "eval_timeout_s": 60,
            "output_dir": str(ws / "output"), "agent_output_dir": "/workspace/output",
            "workspace": str(ws), "heldout": str(heldout), "engine": "transformers",
            "baseline_cache": str(self.tmp_path / "baseline-cache"), "task_id": "unit",
            "grader": {"kind": "exact_match", "params": {}}, "evaluator": FAKE_EVALUATOR,
        }
        cfg.update(overrides)
        cfg = {k: v for k, v in cfg.items() if v is not None}
        write_service_config(run, **cfg)
        return run



def service_config(run: Path) -> dict:
    return json.loads((run / "grader" / "service.json").read_text())
