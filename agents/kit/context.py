"""A reference agent's view of the run: what the runtime gives it (the `A2C_*` variables,
`$A2C_WORKSPACE/run_meta.json`, `$A2C_DATA_DIR/train.jsonl`), and its log.

Everything here reads only what an agent is given; an agent's hyperparameters are its spec's
`params:` (`params.py`), its answer format `answers.py`, its submissions `grading.py`.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from a2c.agents.kit.answers import DEFAULT_PATTERN, AnswerFormat


def log(message: str, **fields) -> None:
    """One line to stdout (agent.log) and one JSON line to the transcript."""
    stamp = time.strftime("%H:%M:%S")
    print(f"[{stamp}] {message}", flush=True)
    path = None
    if os.environ.get("A2C_WORKSPACE"):
        path = str(Path(os.environ["A2C_WORKSPACE"]) / ".a2c" / "transcript.jsonl")
    if path:
        try:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            with open(path, "a", encoding="utf-8") as handle:
                handle.write(json.dumps({"ts": time.time(), "message": message, **fields}) + "\n")
        except OSError:
            pass


@dataclass
class AgentContext:
    workspace: Path
    output_dir: Path
    data_dir: Path
    base_model: Path
    mode: str
    seed: int
    deadline: float
    meta: dict = field(default_factory=dict)

    @classmethod
    def from_env(cls) -> AgentContext:
        env = os.environ
        workspace = Path(env.get("A2C_WORKSPACE", os.getcwd()))
        meta = {}
        meta_path = workspace / "run_meta.json"
        if meta_path.is_file():
            try:
                meta = json.loads(meta_path.read_text(encoding="utf-8"))
            except ValueError:
                meta = {}
        deadline = float(env.get("A2C_DEADLINE") or meta.get("deadline") or time.time() + 3600)
        return cls(workspace=workspace,
                   output_dir=Path(env.get("A2C_OUTPUT_DIR", workspace / "output")),
                   data_dir=Path(env["A2C_DATA_DIR"]), base_model=Path(env["A2C_BASE_MODEL"]),
                   mode=env.get("A2C_MODE") or meta.get("mode") or "free",
                   seed=int(env.get("A2C_SEED") or meta.get("seed") or 0),
                   deadline=deadline, meta=meta)

    def remaining(self) -> float:
        return self.deadline - time.time()

    @property
    def task(self) -> dict:
        return self.meta.get("task") or {}

    @property
    def prompt_template(self) -> str:
        return self.task.get("prompt_template") or "{prompt}"

    @property
    def answer_pattern(self) -> str:
        return self.task.get("answer_pattern") or DEFAULT_PATTERN

    @property
    def answer_format(self) -> AnswerFormat:
        """How the task writes and reads an answer (see AnswerFormat)."""
        return AnswerFormat.from_task(self.task)

    @property
    def use_chat(self) -> bool:
        value = self.task.get("chat_template", "auto")
        return value is not False and str(value).lower() != "false"

    def load_train(self) -> list[dict]:
        path = self.data_dir / "train.jsonl"
        with open(path, encoding="utf-8") as handle:
            return [json.loads(line) for line in handle if line.strip()]

    def format_prompt(self, record: dict) -> str:
        try:
            return self.prompt_template.format(**record)
        except (KeyError, IndexError, ValueError):
            return str(record.get("prompt", ""))
