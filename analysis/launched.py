"""Training code the agent launched from outside its workspace.

`python -m a2c...` modules named in the agent's launcher (RUN/agent/launch.sh) or in
logs/commands.log (the reference agents train this way; read from the installed a2c), one level
of their a2c imports, and TRL command-line trainers (`trl sft ...`). The report attributes a
submission to these when no training script in its snapshot explains it.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path

from a2c.contracts.run_paths import RunPaths
from a2c.timefmt import parse_time

from .record import RunRecord
from .training_methods import FileTraining, analyse_file

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


def launched_training(record: RunRecord) -> list[tuple[float | None, FileTraining]]:
    """The training code launched, each with the time it was first launched (None: from the
    launcher, i.e. from the start)."""
    sources: list[tuple[float | None, str]] = []
    paths = RunPaths(record.root)
    launch = paths.launch
    if launch.is_file():
        for line in launch.read_text(encoding="utf-8", errors="replace").splitlines():
            if not line.lstrip().startswith("#"):
                sources.append((None, line))
    commands = paths.commands_log
    if commands.is_file() and commands.stat().st_size < 8_000_000:
        for line in commands.read_text(encoding="utf-8", errors="replace").splitlines():
            stamp = parse_time(line.split("\t", 1)[0]) if "\t" in line else None
            sources.append((stamp, line))
    found: dict[str, tuple[float | None, FileTraining]] = {}
    for stamp, line in sources:
        for match in _MODULE_RUN.finditer(line):
            name = match.group(1)
            if name in found:
                continue
            loaded = _module_source(name)
            if loaded is None:
                continue
            found[name] = (stamp, _analyse_module(name, loaded[1]))
            for dep in _a2c_imports(loaded[1])[:10]:
                if dep not in found and (dep_src := _module_source(dep)) is not None:
                    found[dep] = (stamp, _analyse_module(dep, dep_src[1]))
        for match in _CLI_RUN.finditer(line):
            key = f"trl {match.group(1)}"
            if key not in found:
                found[key] = (stamp, analyse_file("logs/commands.log.sh", line.split("\t")[-1]))
                found[key][1].path = "logs/commands.log"
    return [(stamp, code) for stamp, code in found.values() if code.trains]


def _analyse_module(name: str, source: str) -> FileTraining:
    code = analyse_file(f"{name.replace('.', '/')}.py", source)
    code.path = f"module:{name}"
    for item in code.evidence:
        item.file = code.path
    for hp in code.hyperparameters:
        hp.file = code.path
    return code


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
