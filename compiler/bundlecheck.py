"""Checks on compiled bundles (used by `nox -s bundles` and the tests).

For every task bundle: the manifest verifies, the Dockerfile parses (base image pinned by digest,
non-root user), the grading client runs `--help`, and INSTRUCTIONS.md states the budget and the
API. `python -m a2c.compiler.bundlecheck [DIR]` prints one line per problem and exits 1 if any.
"""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from pathlib import Path

from a2c.compiler.build import human_duration
from a2c.contracts.bundle import is_bundle, load_bundle
from a2c.contracts.spec import TaskSpec
from a2c.errors import BundleError


def parse_dockerfile(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs; dockerfile-parse when installed, else a small parser."""
    try:
        from dockerfile_parse import DockerfileParser
    except ImportError:  # pragma: no cover - the dev install has it
        out, pending = [], ""
        for line in text.split("\n"):
            if not pending and (not line.strip() or line.lstrip().startswith("#")):
                continue
            pending += line.rstrip("\\").strip() + " "
            if not line.rstrip().endswith("\\"):
                word, _, rest = pending.strip().partition(" ")
                out.append((word.upper(), rest.strip()))
                pending = ""
        if pending:
            raise ValueError("unterminated line continuation")
        return out
    parser = DockerfileParser(fileobj=io.BytesIO(text.encode("utf-8")))
    return [(i["instruction"], i["value"]) for i in parser.structure
            if i["instruction"] != "COMMENT"]


KNOWN = {"FROM", "RUN", "CMD", "LABEL", "EXPOSE", "ENV", "ADD", "COPY", "ENTRYPOINT", "VOLUME",
         "USER", "WORKDIR", "ARG", "ONBUILD", "STOPSIGNAL", "HEALTHCHECK", "SHELL"}


def check_dockerfile(path: Path) -> list[str]:
    try:
        instructions = parse_dockerfile(path.read_text(encoding="utf-8"))
    except Exception as exc:  # noqa: BLE001 - any parse failure is the finding
        return [f"{path}: does not parse: {exc}"]
    problems = [f"{path}: unknown instruction {word}" for word, _ in instructions
                if word not in KNOWN]
    if not instructions or instructions[0][0] not in ("FROM", "ARG"):
        problems.append(f"{path}: does not start with FROM")
    # FROM ${A2C_BASE_IMAGE}: the pinned base is that ARG's default (the docker backend passes an
    # offline base in its place only where the pinned one cannot be pulled)
    defaults = dict(arg.split("=", 1) for word, arg in instructions
                    if word == "ARG" and "=" in arg)
    froms = [re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: defaults.get(m[1] or m[2], m[0]), arg)
             for word, arg in instructions if word == "FROM"]
    if not froms or not re.search(r"@sha256:[0-9a-f]{64}\b", froms[0]):
        problems.append(f"{path}: base image is not pinned by digest")
    users = [arg for word, arg in instructions if word == "USER"]
    if not users or users[-1].split(":")[0] in ("root", "0"):
        problems.append(f"{path}: the image does not switch to a non-root user")
    for word, arg in instructions:
        if word in ("COPY", "ADD") and re.search(r"(^|\s)(grader|data)/", arg):
            problems.append(f"{path}: copies grader-private files into the image: {arg}")
    return problems


def check_client(root: Path) -> list[str]:
    client = root / "workspace" / "a2c_client.py"
    if not client.is_file():
        return [f"{client}: missing (the grading client)"]
    proc = subprocess.run([sys.executable, str(client), "--help"], capture_output=True,
                          text=True, timeout=60, check=False, env={"PATH": "/usr/bin:/bin"})
    if proc.returncode != 0:
        return [f"{client}: `--help` exited {proc.returncode}: {proc.stderr.strip()[-300:]}"]
    problems = []
    for word in ("submit", "status"):
        if word not in proc.stdout:
            problems.append(f"{client}: `--help` does not mention `{word}`")
    return problems


def check_instructions(root: Path, task: TaskSpec) -> list[str]:
    path = root / "workspace" / "INSTRUCTIONS.md"
    if not path.is_file():
        return [f"{path}: missing"]
    text = path.read_text(encoding="utf-8")
    b = task.budget
    wanted = {
        "the wall clock": human_duration(b.wall_clock_s),
        "the submission limit": f"at most {b.max_submissions}",
        "the GPU count": f"| GPUs | {b.gpus} |",
        "how to submit": "./submit",
        "the status command": "./status",
        "the time command": "./time",
        "the grader URL variable": "A2C_GRADER_URL",
        "the output folder": "A2C_OUTPUT_DIR",
        "the base model": "A2C_BASE_MODEL",
        "the data": "A2C_DATA_DIR",
    }
    return [f"{path}: does not state {what} ({needle!r})" for what, needle in wanted.items()
            if needle not in text]


def check_bundle(root: Path) -> list[str]:
    try:
        bundle = load_bundle(root, kind="Task")
    except BundleError as exc:
        return [str(exc)]
    task = bundle.task
    problems = check_dockerfile(root / "Dockerfile")
    problems += check_client(root)
    problems += check_instructions(root, task)
    grader = json.loads((root / "grader" / "grader.json").read_text(encoding="utf-8"))
    if grader.get("kind") != task.grader.kind:
        problems.append(f"{root}/grader/grader.json: kind differs from the manifest")
    return problems


def task_bundles(out: Path) -> list[Path]:
    return sorted(p for p in out.iterdir() if is_bundle(p, "Task")) if out.is_dir() else []


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    out = Path(argv[0]) if argv else Path("generated")
    bundles = task_bundles(out)
    problems = []
    for root in bundles:
        found = check_bundle(root)
        problems += found
        print(f"{'ok  ' if not found else 'FAIL'} {root}")
    for p in problems:
        print(p, file=sys.stderr)
    if not bundles:
        print(f"{out}: no task bundles", file=sys.stderr)
        return 1
    return 1 if problems else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
