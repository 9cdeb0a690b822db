"""Compiling specs into bundles: render every file through Jinja, hash, write atomically.

`build_specs(paths, out_dir)` is the Python API; `plan(...)` computes what would be written
(path → bytes) without touching the disk, which `--check` compares with what is there.
Output is deterministic: sorted keys, no timestamps, "\\n" line endings.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import jinja2

import a2c
from a2c.canonical import sha256_bytes
from a2c.compiler import resolve as resolve_mod
from a2c.compiler.load import Document, discover, find_spec, read_document, validate_document
from a2c.compiler.renamed import announce
from a2c.contracts.bundle import MANIFEST_CLASSES
from a2c.errors import SpecError
from a2c.fsutil import swap_in_dir
from a2c.paths import TEMPLATES_DIR, project_root

MANIFESTS = {"Task": "bundle.json", "Agent": "agent.json", "Suite": "suite.json"}
KEYS = {"Task": "task", "Agent": "agent", "Suite": "suite"}
SUBDIRS = {"Task": "", "Agent": "agents", "Suite": "suites"}
L3_PREFIX = "workspace/l3/"
MODES_PREFIX = "workspace/modes/"
# The runtime's view of the run, the same in every sandbox backend (docs/contracts.md).
ENV_VARS = {
    "workspace": "A2C_WORKSPACE", "output": "A2C_OUTPUT_DIR", "data": "A2C_DATA_DIR",
    "model": "A2C_BASE_MODEL", "grader_url": "A2C_GRADER_URL", "token": "A2C_TOKEN",
    "task": "A2C_TASK_ID", "mode": "A2C_MODE", "seed": "A2C_SEED", "deadline": "A2C_DEADLINE",
    "driver": "A2C_DRIVER_MODEL", "command_log": "A2C_COMMAND_LOG",
}
MODE_TITLES = resolve_mod.MODE_TITLES      # the one list of modes: a2c.modes


@dataclass
class Artifact:
    """One compiled spec: where it goes and every file in it (manifest included)."""

    kind: str
    id: str
    rel_dir: str                 # relative to the output dir: "arith", "agents/codex"
    files: dict[str, bytes]      # relative to rel_dir
    source: Path


def default_out_dir() -> Path:
    return project_root() / "generated"


# ---------------------------------------------------------------- rendering

def human_duration(seconds: float | None) -> str:
    if seconds is None:
        return "none"
    seconds = int(seconds)
    if seconds == 0:
        return "0s"
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return "".join(f"{v}{u}" for v, u in ((h, "h"), (m, "m"), (s, "s")) if v)


def to_json(value: Any, indent: int | None = 2) -> str:
    return json.dumps(value, sort_keys=True, indent=indent, ensure_ascii=False)


@cache
def environment(root: str) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(root),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )
    env.filters["tojson"] = to_json
    env.filters["duration"] = human_duration
    env.filters["shquote"] = lambda s: "'" + str(s).replace("'", "'\"'\"'") + "'"
    return env


def _templates(prefix: str) -> list[str]:
    base = TEMPLATES_DIR / prefix
    return sorted(p.relative_to(TEMPLATES_DIR).as_posix() for p in base.rglob("*.j2")
                  if p.is_file() and "__pycache__" not in p.parts)


def _render(name: str, context: dict[str, Any]) -> bytes:
    try:
        text = environment(str(TEMPLATES_DIR)).get_template(name).render(**context)
    except jinja2.TemplateError as exc:
        where = getattr(exc, "lineno", None)
        raise SpecError(f"{TEMPLATES_DIR / name}:{where or 1}:1: (template): {exc}") from None
    text = text.replace("\r\n", "\n")
    if text and not text.endswith("\n"):
        text += "\n"
    return text.encode("utf-8")


def _manifest(kind: str, ident: str, resolved: dict, files: dict[str, bytes]) -> bytes:
    hashes = {rel: sha256_bytes(data) for rel, data in sorted(files.items())}
    manifest = MANIFEST_CLASSES[kind].create(ident, resolved, hashes, a2c.__version__)
    return (to_json(manifest.to_dict()) + "\n").encode("utf-8")


def task_context(task: dict) -> dict[str, Any]:
    return {"task": task, "level": task["level"], "budget": task["budget"],
            "grader": task["grader"], "modes": task["modes"], "mode_titles": MODE_TITLES,
            "env_vars": ENV_VARS, "compiler_version": a2c.__version__,
            "fields": task["data"]["fields"], "level3": task["level"] == 3,
            "standalone": False, "l3": l3_context(task) if task["level"] == 3 else None}


def l3_context(task: dict) -> dict[str, Any]:
    """The level-3 prompt format, described by the runtime's own code (workspace/l3/ templates)."""
    from a2c.runtime.envs.prompts import describe  # stdlib only; no torch

    env = task["grader"].get("env") or {}
    return describe(env["kind"], env.get("options"), env.get("history"))


def compile_task(doc: Document) -> Artifact:
    task = resolve_mod.resolve_task(doc)
    ctx = task_context(task)
    files: dict[str, bytes] = {}
    for name in _templates("task"):
        rel = name[len("task/"):-len(".j2")]
        if rel.startswith(L3_PREFIX) and not ctx["level3"]:
            continue            # level-3 workspace files (workspace/l3/...) only for level 3
        if rel.startswith(MODES_PREFIX):
            mode = Path(rel).stem
            if mode not in task["modes"]:
                continue
        extra = {"mode": Path(rel).stem, "standalone": rel.startswith(MODES_PREFIX)}
        files[rel] = _render(name, {**ctx, **extra})
    src = doc.data["data"]["source"]
    for split, original in sorted(src.get("files", {}).items()):
        raw = (doc.path.parent / original).read_bytes()
        if Path(original).suffix != ".parquet":
            raw = raw.replace(b"\r\n", b"\n")
        files[resolve_mod.data_file_name(split, original)] = raw
    files["bundle.json"] = _manifest("Task", task["id"], task,
                                     {k: v for k, v in files.items()})
    return Artifact("Task", task["id"], task["id"], files, doc.path)


def compile_agent(doc: Document) -> Artifact:
    agent = resolve_mod.resolve_agent(doc)
    ctx = {"agent": agent, "compiler_version": a2c.__version__, "env_vars": ENV_VARS}
    files: dict[str, bytes] = {}
    for name in _templates("agent"):
        files[name[len("agent/"):-len(".j2")]] = _render(name, ctx)
    # The prompt is itself a Jinja template, rendered by the runtime with the task's instructions.
    files["prompt.md"] = agent["prompt"].encode("utf-8")
    files["agent.json"] = _manifest("Agent", agent["id"], agent, dict(files))
    return Artifact("Agent", agent["id"], f"agents/{agent['id']}", files, doc.path)


def _referenced(doc: Document, kind: str, ident: str) -> dict[str, Any]:
    """The manifest a task or agent the suite names compiles to (in memory), from the specs folder
    the suite sits in: its digest is part of every trial id."""
    folder = {"Task": "tasks", "Agent": "agents"}[kind]
    root = doc.path.resolve().parent.parent / folder
    path = next(p for p in (root / f"{ident}.yaml", root / f"{ident}.yml") if p.is_file())
    (art,) = plan([path])
    return json.loads(art.files[MANIFESTS[kind]])


def compile_suite(doc: Document) -> Artifact:
    """suite.json (the resolved suite and its expanded `trials`) and TRIALS.md (the same list as
    a table, so a reviewer sees what a suite change does to the grid)."""
    from a2c.compiler.suite_trials import trials_of

    suite = resolve_mod.resolve_suite(doc)
    tasks = {t: _referenced(doc, "Task", t) for t in suite["tasks"]}
    agents = {a: _referenced(doc, "Agent", a) for a in suite["agents"]}
    suite["trials"] = trials_of(doc.data, suite, tasks, agents)
    files = {"TRIALS.md": _render("suite/TRIALS.md.j2", {"suite": suite})}
    files["suite.json"] = _manifest("Suite", suite["id"], suite, dict(files))
    return Artifact("Suite", suite["id"], f"suites/{suite['id']}", files, doc.path)


COMPILERS = {"Task": compile_task, "Agent": compile_agent, "Suite": compile_suite}


# ---------------------------------------------------------------- planning and writing

def load_all(paths) -> list[Document]:
    """Read and validate every spec; raise one SpecError listing every problem in all of them."""
    docs, problems = [], []
    for p in paths:
        try:
            doc = read_document(find_spec(p))
        except SpecError as exc:
            problems.extend(exc.problems)
            continue
        found = validate_document(doc)
        if found:
            problems.extend(found)
        else:
            docs.append(doc)
    if problems:
        raise SpecError(problems)
    for doc in docs:
        announce(doc.deprecations)
    seen: dict[tuple[str, str], Path] = {}
    for doc in docs:
        key = (doc.kind, doc.data["id"])
        if key in seen and seen[key].resolve() != doc.path.resolve():
            problems.append(f"{doc.source.where(('id',))}: id: {doc.kind.lower()} id "
                            f"'{doc.data['id']}' is also used by {seen[key]}")
        seen[key] = doc.path
    if problems:
        raise SpecError(problems)
    return docs


def plan(paths) -> list[Artifact]:
    """Compile `paths` in memory (nothing is written)."""
    docs = load_all(paths)
    unique = {}
    for doc in docs:
        unique[(doc.kind, doc.data["id"])] = doc
    return [COMPILERS[doc.kind](doc) for _, doc in sorted(unique.items())]


def _write_file(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    if data.startswith(b"#!"):
        os.chmod(path, 0o755)
    else:
        os.chmod(path, 0o644)


def write_artifact(art: Artifact, out_dir: Path) -> Path:
    """Write one bundle atomically: into a temp dir beside the target, then swap it in."""
    target = out_dir / art.rel_dir
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{art.id}.tmp-", dir=target.parent))
    try:
        for rel, data in sorted(art.files.items()):
            _write_file(tmp / rel, data)
        os.chmod(tmp, 0o755)
        swap_in_dir(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


def build_specs(paths, out_dir: str | Path | None = None) -> list[Path]:
    """Validate every spec first (nothing is written if any is invalid), then write each bundle.

    Returns the bundle directories (tasks: out/<id>, agents: out/agents/<id>, suites:
    out/suites/<id>) in the order built.
    """
    out = Path(out_dir) if out_dir else default_out_dir()
    artifacts = plan([Path(p) if not isinstance(p, Path) else p for p in paths])
    return [write_artifact(art, out) for art in artifacts]


def expected_tree(artifacts: list[Artifact]) -> dict[str, bytes]:
    return {f"{art.rel_dir}/{rel}": data for art in artifacts for rel, data in art.files.items()}


def _on_disk(out: Path) -> dict[str, Path]:
    found = {}
    if not out.is_dir():
        return found
    for path in out.rglob("*"):
        rel = path.relative_to(out).as_posix()
        if path.is_file() and "__pycache__" not in rel and not any(
                part.startswith(".") for part in Path(rel).parts):
            found[rel] = path
    return found


def stale_files(artifacts: list[Artifact], out_dir: Path, only_theirs: bool = False) -> list[str]:
    """Every difference between what the specs compile to and what is in `out_dir`; with
    `only_theirs` (`a2c build --check SPEC...`), only those inside the artifacts' own folders."""
    expected = expected_tree(artifacts)
    actual = _on_disk(out_dir)
    if only_theirs:
        folders = tuple(art.rel_dir + "/" for art in artifacts)
        actual = {rel: path for rel, path in actual.items() if rel.startswith(folders)}
    problems = []
    for rel in sorted(set(expected) | set(actual)):
        shown = f"{out_dir.name}/{rel}"
        if rel not in actual:
            problems.append(f"{shown}: missing (not built)")
        elif rel not in expected:
            problems.append(f"{shown}: not produced by any spec (left over)")
        elif actual[rel].read_bytes() != expected[rel]:
            problems.append(f"{shown}: differs from what its spec compiles to")
    return problems


def prune(artifacts: list[Artifact], out_dir: Path) -> list[Path]:
    """Remove bundle dirs under out_dir that no spec produces any more."""
    wanted = {art.rel_dir for art in artifacts}
    removed = []
    for manifest in sorted(set(MANIFESTS.values())):
        for path in sorted(out_dir.rglob(manifest)):
            rel = path.parent.relative_to(out_dir).as_posix()
            if rel not in wanted and path.parent.exists():
                shutil.rmtree(path.parent)
                removed.append(path.parent)
    return removed


def all_spec_paths(root: Path | None = None) -> list[Path]:
    return discover(root)
