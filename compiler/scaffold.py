"""`a2c new task ID [--answer number|string|choice|code]`: a cookiecutter template that writes a
spec which validates, builds and passes `a2c check`'s gold-answer point at once, in the answer
style asked for (its pattern, answer format, normalisation and example data; `code` is graded
by running tests, as HumanEval is)."""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from pathlib import Path

from a2c.errors import A2CError
from a2c.paths import TEMPLATES_DIR

TEMPLATE = TEMPLATES_DIR / "cookiecutter-task"
_ID = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
ANSWERS = ("number", "string", "choice", "code")     # the template's answer styles (level 1)


def new_task(task_id: str, title: str | None = None, level: int = 1,
             specs_dir: Path | None = None, answer: str | None = None) -> Path:
    """Create specs/tasks/<id>.yaml, <id>.md and data/<id>/{train,test}.jsonl; return the spec.
    `answer` (level 1 only; default number) chooses the answer style."""
    from cookiecutter.main import cookiecutter

    from a2c.compiler.load import specs_root

    if not _ID.match(task_id) or len(task_id) > 64:
        raise A2CError(f"{task_id!r} is not a valid id: use lowercase letters, digits, '-', '_'")
    if answer is not None and answer not in ANSWERS:
        raise A2CError(f"--answer {answer}: choose one of {', '.join(ANSWERS)}")
    if answer is not None and level != 1:
        raise A2CError(f"--answer {answer}: answer styles are for level 1 (exact match or code "
                       f"tests); a level-{level} task is graded by its judge")
    tasks = (Path(specs_dir) if specs_dir else specs_root()) / "tasks"
    spec = tasks / f"{task_id}.yaml"
    targets = [spec, tasks / f"{task_id}.md", tasks / "data" / task_id]
    for target in targets:
        if target.exists():
            raise A2CError(f"{target} already exists; choose another id or remove it")
    with tempfile.TemporaryDirectory(prefix="a2c-new-") as tmp:
        config = Path(tmp) / "config.yaml"
        config.write_text(f"replay_dir: {json.dumps(str(Path(tmp) / 'replay'))}\n"
                          f"cookiecutters_dir: {json.dumps(str(Path(tmp) / 'cc'))}\n")
        out = Path(tmp) / "out"
        cookiecutter(str(TEMPLATE), no_input=True, output_dir=str(out), config_file=str(config),
                     extra_context={"task_id": task_id, "title": title or f"Task {task_id}",
                                    "level": str(level),
                                    "answer": answer or "number"})
        made = out / task_id
        tasks.mkdir(parents=True, exist_ok=True)
        (tasks / "data").mkdir(exist_ok=True)
        shutil.move(str(made / f"{task_id}.yaml"), spec)
        shutil.move(str(made / f"{task_id}.md"), tasks / f"{task_id}.md")
        shutil.move(str(made / "data" / task_id), tasks / "data" / task_id)
    return spec
