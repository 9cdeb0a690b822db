"""One run: prepare the run directory, start the grader, run the agent in a sandbox under the
budget guard, record everything, score the run by the task's policy. Resume after a crash.

    ctx = prepare(RunOptions(bundle="arith", agent="ref-sft"))     # RUN_DIR ready, nothing running
    summary = execute(ctx)                                          # baseline, agent, finalise
    summary = resume(run_dir)                                       # after a crash

Run directory (docs/contracts.md, plus `data/` and `agent/`):
    run.json, events.jsonl, submissions.jsonl, results/, snapshots.git/,
    workspace/   the agent's workspace (the only writable path inside the sandbox)
    data/        the agent split, read-only (train.jsonl + referenced files)
    agent/       the agent bundle's launch.sh and the rendered prompt.md (read-only inside)
    grader/      token, held-out data, service.json, grader.json (never visible to the agent)
    logs/        agent.log, commands.log, transcript.<ext>, grader.log
    bundle/      the task bundle the run used
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from a2c.canonical import sha256_bytes
from a2c.errors import A2CError, BundleError, RunError
from a2c.runtime.budget import BudgetGuard, format_duration, parse_duration
from a2c.runtime.bundle import Bundle
from a2c.runtime.events import EventLog, read_events, verify_events

MODES = ("free", "sft-only", "rl-only")
SNAPSHOT_EVERY_S = float(os.environ.get("A2C_SNAPSHOT_EVERY_S", "180"))
STOP_GRACE_S = 3.0
READY_TIMEOUT_S = 120.0
Reporter = Callable[[str], None]


def _iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=2, sort_keys=True, ensure_ascii=False)
        handle.write("\n")
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def _read_json(path: Path) -> Any:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def versions() -> dict[str, str | None]:
    from importlib import metadata

    import a2c
    out: dict[str, str | None] = {"a2c": a2c.__version__, "python": sys.version.split()[0]}
    for name in ("torch", "transformers", "trl"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


# ----------------------------------------------------------------------------- resolution
def _project_root() -> Path:
    from a2c.paths import project_root
    return project_root()


def resolve_task_bundle(ref: str | Path, work: Path | None = None) -> Path:
    """A bundle folder, a spec file, or a task id -> a verified task bundle folder.

    An id uses `generated/<id>/` when it exists there, else its spec (specs/tasks/<id>.yaml) is
    compiled into a temporary folder; a spec file is always compiled fresh.
    """
    path = Path(ref)
    if path.is_dir() and (path / "bundle.json").is_file():
        return path.resolve()
    if not path.exists():
        generated = _project_root() / "generated" / str(ref)
        if (generated / "bundle.json").is_file():
            return generated.resolve()
    return _compile(ref, "Task", work)


def resolve_agent_bundle(ref: str | Path, work: Path | None = None) -> Path:
    path = Path(ref)
    if path.is_dir() and (path / "agent.json").is_file():
        return path.resolve()
    if not path.exists():
        generated = _project_root() / "generated" / "agents" / str(ref)
        if (generated / "agent.json").is_file():
            return generated.resolve()
    return _compile(ref, "Agent", work)


def _compile(ref: str | Path, kind: str, work: Path | None) -> Path:
    try:
        from a2c.compiler.build import build_specs
        from a2c.compiler.load import find_spec
    except ImportError as exc:  # pragma: no cover - the compiler ships with a2c
        raise RunError(f"cannot compile {ref}: the compiler is not available ({exc})") from exc
    spec = find_spec(ref, kind=kind) if kind else find_spec(ref)
    out = Path(work or tempfile.mkdtemp(prefix="a2c-build-"))
    built = build_specs([spec], out)
    manifest = "bundle.json" if kind == "Task" else "agent.json"
    for folder in built:
        if (folder / manifest).is_file():
            return folder.resolve()
    raise RunError(f"{ref}: compiled, but it is not a {kind.lower()} spec")


def _verify_agent(root: Path) -> None:
    """An agent bundle's files must match agent.json's hashes and digest (as task bundles do)."""
    from a2c.canonical import sha256_file
    from a2c.runtime.bundle import bundle_digest
    manifest = _read_json(root / "agent.json")
    files = manifest.get("files", {})
    problems = [rel for rel, digest in sorted(files.items())
                if not (root / rel).is_file() or sha256_file(root / rel) != digest]
    if bundle_digest(manifest.get("spec_hash", ""), files) != manifest.get("digest"):
        problems.append("digest")
    if problems:
        raise BundleError(f"{root}: agent bundle failed verification: {', '.join(problems)}")


def _load_agent(root: Path) -> dict[str, Any]:
    manifest = _read_json(root / "agent.json")
    return manifest.get("agent", manifest)


# ----------------------------------------------------------------------------- options
@dataclass
class RunOptions:
    bundle: str                      # bundle folder, spec file or task id
    agent: str                       # agent bundle folder, spec file or agent id
    model: str | None = None         # override of the task's base model: folder, builtin name, hub id
    budget: str | float | None = None
    mode: str = "free"
    backend: str = "local"
    seed: int = 0
    runs_dir: str | Path | None = None
    driver: str | None = None        # driver model for LLM scaffolds
    agent_env: dict[str, str] = field(default_factory=dict)   # extra variables for the agent
    use_bwrap: bool | None = None    # local backend: None = where available
    snapshot_every_s: float = SNAPSHOT_EVERY_S
    run_id: str | None = None


@dataclass
class RunContext:
    run_dir: Path
    run: dict[str, Any]

    @property
    def events(self) -> EventLog:
        return EventLog(self.run_dir / "events.jsonl", verify=False)

    def save(self) -> None:
        _write_json(self.run_dir / "run.json", self.run)


def _model_cfg(override: str | None, task_cfg: dict) -> dict:
    if not override:
        return dict(task_cfg)
    path = Path(os.path.expanduser(override))
    if path.exists():
        return {"path": str(path.resolve())}
    try:
        from a2c.runtime import models
        builtins = getattr(models, "BUILTINS", None) or {}
        if override in builtins or override in ("tiny", "smollm2-135m-instruct"):
            return {"builtin": override}
    except ImportError:
        pass
    if "/" in override:
        repo, _, revision = override.partition("@")
        return {"hub": repo, "revision": revision or None}
    return {"builtin": override}


def _grader_cfg(bundle: Path, task: dict) -> dict:
    path = bundle / "grader" / "grader.json"
    if path.is_file():
        data = _read_json(path)
        if isinstance(data, dict) and "kind" not in data and isinstance(data.get("grader"), dict):
            data = data["grader"]
        return data
    return task.get("grader") or {}


def _socket_path(run_dir: Path) -> Path:
    """The grader's Unix socket: in RUN/grader when the path is short enough (108-byte limit)."""
    candidate = run_dir / "grader" / "grader.sock"
    if len(str(candidate)) < 100:
        return candidate
    short = Path(tempfile.gettempdir()) / f"a2c-{sha256_bytes(str(run_dir).encode())[:12]}"
    short.mkdir(mode=0o700, exist_ok=True)
    return short / "grader.sock"


def _env_socket_dir(run_dir: Path) -> Path:
    """Where the environment gateways' sockets live (mounted at /run/a2c/env in the sandbox):
    RUN/env-sockets when its socket paths stay under the 108-byte limit, else a short tmp dir."""
    candidate = run_dir / "env-sockets"
    if len(str(candidate)) < 80:
        return candidate
    return Path(tempfile.gettempdir()) / f"a2c-{sha256_bytes(str(run_dir).encode())[:12]}-env"


def _make_read_only(root: Path) -> None:
    for path in sorted(root.rglob("*"), reverse=True):
        if path.is_symlink():
            continue
        os.chmod(path, 0o555 if path.is_dir() else 0o444)
    os.chmod(root, 0o555)


def _task_format(grader: dict) -> dict[str, Any]:
    """What an agent may know about how its model is prompted and graded (no data)."""
    inference = grader.get("inference") or {}
    params = grader.get("params") or {}
    return {"grader": grader.get("kind"), "prompt_template": inference.get("prompt_template"),
            "chat_template": inference.get("chat_template", "auto"),
            "max_new_tokens": inference.get("max_new_tokens"),
            "answer_pattern": params.get("pattern")}


def _render_prompt(agent_root: Path, bundle: Path, task: dict, mode: str, budget_s: float) -> str:
    template = (agent_root / "prompt.md")
    if not template.is_file():
        return ""
    instructions = ""
    if (bundle / "workspace" / "INSTRUCTIONS.md").is_file():
        instructions = (bundle / "workspace" / "INSTRUCTIONS.md").read_text(encoding="utf-8")
    import jinja2
    env = jinja2.Environment(undefined=jinja2.ChainableUndefined, keep_trailing_newline=True)
    try:
        return env.from_string(template.read_text(encoding="utf-8")).render(
            instructions=instructions, task=task, mode=mode, budget=format_duration(budget_s),
            budget_s=budget_s, workspace="$A2C_WORKSPACE")
    except jinja2.TemplateError as exc:
        raise BundleError(f"{template}: cannot render the prompt: {exc}") from exc


def prepare(opts: RunOptions, report: Reporter = lambda _: None) -> RunContext:
    """Build RUN_DIR: bundle copy, workspace, data splits, model, token, service.json, run.json.

    Nothing is started; `execute` starts the grader and the agent.
    """
    if opts.mode not in MODES:
        raise RunError(f"unknown mode {opts.mode!r} (choose one of {', '.join(MODES)})")
    from a2c.runtime.sandbox import BACKENDS
    if opts.backend not in BACKENDS:
        raise RunError(f"unknown sandbox backend {opts.backend!r} (choose local or docker)")
    if opts.backend == "docker":  # fail fast, before anything is written, without an engine
        from a2c.runtime.sandbox import get_backend
        get_backend("docker", build=False)
    build_tmp = Path(tempfile.mkdtemp(prefix="a2c-build-"))
    try:
        bundle_src = resolve_task_bundle(opts.bundle, build_tmp / "task")
        agent_src = resolve_agent_bundle(opts.agent, build_tmp / "agent")
        bundle = Bundle.load(bundle_src)
        _verify_agent(agent_src)
        task = bundle.task
        agent = _load_agent(agent_src)
        if opts.mode not in task.get("modes", MODES):
            raise RunError(f"task {task['id']} does not offer mode {opts.mode!r} "
                           f"(it offers {', '.join(task.get('modes', []))})")
        driver = agent.get("driver") if isinstance(agent.get("driver"), dict) else {}
        if driver.get("required") and not (opts.driver or driver.get("default")):
            raise RunError(f"agent {agent['id']} needs a driver model: pass --driver MODEL")
        budget_cfg = dict(task.get("budget") or {})
        wall = parse_duration(opts.budget) if opts.budget is not None \
            else float(budget_cfg.get("wall_clock_s") or 3600)
        budget_cfg["wall_clock_s"] = wall

        runs_dir = Path(opts.runs_dir) if opts.runs_dir else _project_root() / "runs"
        stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
        run_id = opts.run_id or f"{task['id']}-{agent['id']}-{stamp}-{secrets.token_hex(2)}"
        run_dir = (runs_dir / run_id).resolve()
        if run_dir.exists():
            raise RunError(f"{run_dir} already exists")
        for sub in ("workspace", "grader", "logs", "results", "data"):
            (run_dir / sub).mkdir(parents=True, exist_ok=True)
        report(f"run directory {run_dir}")

        shutil.copytree(bundle_src, run_dir / "bundle")
        shutil.copytree(agent_src, run_dir / "agent")
        bundle = Bundle.load(run_dir / "bundle")
    finally:
        shutil.rmtree(build_tmp, ignore_errors=True)

    grader = _grader_cfg(run_dir / "bundle", task)
    _write_json(run_dir / "grader" / "grader.json", grader)

    # Workspace: the bundle's agent-visible files, MODE.md, run_meta.json, output/.
    workspace = run_dir / "workspace"
    shutil.copytree(run_dir / "bundle" / "workspace", workspace, dirs_exist_ok=True)
    mode_file = workspace / "modes" / f"{opts.mode}.md"
    if mode_file.is_file():
        shutil.copy2(mode_file, workspace / "MODE.md")
    (workspace / "output").mkdir(exist_ok=True)

    # Data: agent split read-only under data/, held-out split only under grader/.
    report("preparing data")
    from a2c.runtime import data as data_mod
    cache = None
    splits = data_mod.load_splits(task, run_dir / "bundle", cache)
    data_mod.write_jsonl(run_dir / "data" / "train.jsonl", splits["agent"])
    data_mod.write_jsonl(run_dir / "grader" / "heldout.jsonl", splits["heldout"])
    try:
        root = data_mod.data_root(task, run_dir / "bundle", cache)
        data_mod.copy_referenced_files(splits["agent"], root, run_dir / "data")
        data_mod.copy_referenced_files(splits["heldout"], root, run_dir / "grader")
    except Exception as exc:  # noqa: BLE001 - referenced files are optional
        report(f"note: referenced data files not copied: {exc}")
    _make_read_only(run_dir / "data")
    fingerprints = {"agent": data_mod.fingerprint(splits["agent"]),
                    "heldout": data_mod.fingerprint(splits["heldout"])}

    # Base model, read-only.
    report("resolving the base model")
    from a2c.runtime import models
    model_cfg = _model_cfg(opts.model, task.get("base_model") or {})
    model_path = Path(models.resolve_base_model(model_cfg, run_dir / "bundle"))
    model_fp = models.model_fingerprint(model_path)

    token = secrets.token_urlsafe(32)
    token_path = run_dir / "grader" / "token"
    token_path.write_text(token)
    os.chmod(token_path, 0o600)
    marker = secrets.token_hex(8)

    prompt = _render_prompt(run_dir / "agent", run_dir / "bundle", task, opts.mode, wall)
    (run_dir / "agent" / "prompt.rendered.md").write_text(prompt, encoding="utf-8")

    service = {
        "token": token, "socket_path": str(_socket_path(run_dir)), "host": None, "port": None,
        "deadline_unix": None, "max_submissions": budget_cfg.get("max_submissions"),
        "min_interval_s": budget_cfg.get("min_interval_s") or 0,
        "eval_timeout_s": budget_cfg.get("eval_timeout_s") or 3600,
        "output_dir": str(workspace / "output"),
        "agent_output_dir": str(workspace / "output"),   # set per backend at launch
        "workspace": str(workspace), "bundle": str(run_dir / "bundle"),
        "heldout": str(run_dir / "grader" / "heldout.jsonl"),
        "backend": (grader.get("inference") or {}).get("backend", "auto"),
        "base_model": str(model_path), "baseline_cache": str(_baseline_cache()),
        "task_id": task["id"], "baseline": False,
    }
    from a2c.runtime.service import write_service_config
    write_service_config(run_dir, **service)

    run = {
        "run_id": run_id, "task": task["id"], "level": task.get("level"),
        "title": task.get("title"), "agent": agent["id"],
        "agent_digest": _read_json(run_dir / "agent" / "agent.json").get("digest"),
        "driver": opts.driver or ((agent.get("driver") or {}).get("default")
                                  if isinstance(agent.get("driver"), dict) else agent.get("driver")),
        "mode": opts.mode, "seed": opts.seed, "backend": opts.backend,
        "base_model": {"spec": model_cfg, "path": str(model_path), "fingerprint": model_fp},
        "data": {"agent_fingerprint": fingerprints["agent"], "agent_records": len(splits["agent"]),
                 "heldout_fingerprint": fingerprints["heldout"],
                 "heldout_records": len(splits["heldout"])},
        "bundle_digest": bundle.digest, "spec_hash": bundle.spec_hash,
        "isolation": None, "budget": budget_cfg,
        "scoring": task.get("scoring") or {"policy": "best"},
        "baseline_score": None, "best_score": None, "final_score": None,
        "submissions": 0, "valid_submissions": 0, "status": "prepared",
        "started_at": None, "ended_at": None, "deadline": None, "agent_started_at": None,
        "versions": versions(), "sandbox_id": marker,
        "options": {"use_bwrap": opts.use_bwrap, "snapshot_every_s": opts.snapshot_every_s,
                    "agent_env": opts.agent_env},
        "agent_exit": None, "resumes": 0,
    }
    ctx = RunContext(run_dir, run)
    ctx.save()
    return ctx


def _baseline_cache() -> Path:
    from a2c.paths import cache_dir
    path = cache_dir() / "baselines"
    path.mkdir(parents=True, exist_ok=True)
    return path


# ----------------------------------------------------------------------------- grader service
class ServiceProcess:
    """The grader service for this run (`a2c.runtime.service.start_service`), restartable."""

    def __init__(self, run_dir: Path):
        self.run_dir = run_dir
        self.handle = None

    def start(self, timeout: float = READY_TIMEOUT_S) -> None:
        from a2c.runtime.service import start_service
        cfg = _read_json(self.run_dir / "grader" / "service.json")
        sock = cfg.get("socket_path")
        if sock and Path(sock).exists():
            Path(sock).unlink()
        self.handle = start_service(self.run_dir, timeout_s=timeout,
                                    log_path=self.run_dir / "logs" / "grader.log")
        (self.run_dir / "grader" / "service.pid").write_text(str(self.handle.pid))

    def alive(self) -> bool:
        return self.handle is not None and self.handle.alive()

    def stop(self, grace: float = 30.0) -> None:
        if self.handle is not None and self.handle.alive():
            self.handle.stop(timeout=grace)


def _tail(path: Path, n: int = 2000) -> str:
    try:
        return path.read_text(errors="replace")[-n:]
    except OSError:
        return ""


def _kill_stale(run_dir: Path, run: dict) -> None:
    """After a crash: stop a grader service and agent processes left over from before."""
    from a2c.runtime.sandbox.proctree import kill_tree
    pid_file = run_dir / "grader" / "service.pid"
    if pid_file.is_file():
        try:
            pid = int(pid_file.read_text())
            if _is_service(pid, run_dir):
                kill_tree(pid, pid, None, grace=5.0)
        except (ValueError, OSError):
            pass
    if run.get("sandbox_id"):
        kill_tree(None, None, run["sandbox_id"], grace=2.0)


def _is_service(pid: int, run_dir: Path) -> bool:
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"a2c.runtime.service" in cmd and str(run_dir).encode() in cmd


# ----------------------------------------------------------------------------- journal
def journal_state(run_dir: Path) -> dict[str, Any]:
    """Submissions as the grader's journal records them: received, scored, pending."""
    path = run_dir / "submissions.jsonl"
    received: dict[str, dict] = {}
    scored: dict[str, dict] = {}
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue  # a torn last line after a crash
            sid = str(entry.get("id"))
            if entry.get("op") == "received":
                received[sid] = entry
            elif entry.get("op") == "scored":
                scored[sid] = entry
    pending = [sid for sid in received if sid not in scored]
    return {"received": received, "scored": scored, "pending": pending}


def _sort_key(sid: str):
    return (0, int(sid)) if sid.isdigit() else (1, sid)


def score_run(run_dir: Path, policy: str) -> dict[str, Any]:
    state = journal_state(run_dir)
    valid = [(sid, e) for sid, e in sorted(state["scored"].items(), key=lambda kv: _sort_key(kv[0]))
             if e.get("valid", True) and e.get("score") is not None]
    best = max((float(e["score"]) for _, e in valid), default=None)
    last = float(valid[-1][1]["score"]) if valid else None
    final = last if policy == "last" else best
    best_id = None
    if best is not None:
        best_id = next(sid for sid, e in valid if float(e["score"]) == best)
    return {"submissions": len(state["received"]), "valid_submissions": len(valid),
            "best_score": best, "final_score": final, "best_submission": best_id,
            "pending": state["pending"],
            "copies_of_base": sum(1 for e in state["scored"].values() if e.get("copy_of_base"))}


def _baseline_score(run_dir: Path) -> float | None:
    path = run_dir / "results" / "baseline.json"
    if not path.is_file():
        return None
    data = _read_json(path)
    if data.get("valid") is False:
        return None
    return data.get("score")


# ----------------------------------------------------------------------------- execution
def _agent_command(agent: dict, confined: bool, run_dir: Path) -> list[str]:
    launch = "/run/a2c/agent/launch.sh" if confined else str(run_dir / "agent" / "launch.sh")
    return ["bash", launch]


def _copy_transcript(agent: dict, run_dir: Path) -> str | None:
    """logs/transcript.<ext>: the agent's stdout, or the file/folder it declared (workspace path)."""
    spec = agent.get("transcript") or {}
    if not isinstance(spec, dict):
        spec = {"path": str(spec)}
    ext = spec.get("ext") or spec.get("format") or "txt"
    target = run_dir / "logs" / f"transcript.{ext}"
    if spec.get("source", "stdout") == "stdout" and not spec.get("path"):
        source = run_dir / "logs" / "agent.log"
    else:
        rel = str(spec.get("path") or "")
        for prefix in ("/workspace/", "$A2C_WORKSPACE/", "${A2C_WORKSPACE}/"):
            if rel.startswith(prefix):
                rel = rel[len(prefix):]
        path = Path(rel)
        if not rel or path.is_absolute() or ".." in path.parts:
            return None
        source = run_dir / "workspace" / path
    if not source.exists():
        return None
    if source.is_dir():
        shutil.copytree(source, target, dirs_exist_ok=True)
    else:
        shutil.copy2(source, target)
    return str(target.relative_to(run_dir))


def _update_run_meta(workspace: Path, run: dict, remaining: float | None) -> None:
    path = workspace / "run_meta.json"
    try:
        meta = _read_json(path) if path.is_file() else {}
    except ValueError:
        meta = {}
    meta.update({"mode": run["mode"], "seed": run["seed"], "deadline": run["deadline"],
                 "deadline_iso": _iso(run["deadline"]), "budget": run["budget"],
                 "remaining_s": None if remaining is None else round(remaining, 1),
                 "updated_at": _iso(time.time()),
                 "base_model": (run.get("base_model") or {}).get("spec", meta.get("base_model"))})
    meta.setdefault("task", {}).update(run.get("task_format") or {})
    _write_json(path, meta)


class Runner:
    """Drives one run (fresh or resumed) from the grader's start to `run_finished`."""

    def __init__(self, ctx: RunContext, report: Reporter = print):
        self.ctx = ctx
        self.run_dir = ctx.run_dir
        self.run = ctx.run
        self.report = report
        self.service = ServiceProcess(self.run_dir)
        self.env_services = None      # the task's environment.services (runtime/services.py)
        self.env_gateways: dict = {}  # the agent's gateways to them (runtime/service_gateway.py)
        self.agent = _load_agent(self.run_dir / "agent")
        self._seen_scored: set[str] = set()
        self._seen_received: set[str] = set()

    # ---------------------------------------------------------------- helpers
    def event(self, type_: str, data: dict | None = None) -> dict:
        return self.ctx.events.append(type_, data or {})

    def refresh(self) -> dict:
        policy = (self.run.get("scoring") or {}).get("policy", "best")
        scores = score_run(self.run_dir, policy)
        self.run.update({k: scores[k] for k in ("submissions", "valid_submissions", "best_score",
                                                "final_score", "best_submission",
                                                "copies_of_base")})
        self.run["baseline_score"] = _baseline_score(self.run_dir)
        self.ctx.save()
        state = journal_state(self.run_dir)
        for sid, entry in state["received"].items():
            if sid not in self._seen_received:
                self._seen_received.add(sid)
                self.report(f"submission {sid} received: {entry.get('model_path')}")
        for sid, entry in sorted(state["scored"].items(), key=lambda kv: _sort_key(kv[0])):
            if sid not in self._seen_scored:
                self._seen_scored.add(sid)
                if entry.get("valid", True) and entry.get("score") is not None:
                    extra = " (copy of the base model)" if entry.get("copy_of_base") else ""
                    self.report(f"submission {sid} scored {float(entry['score']):.1f}{extra}")
                else:
                    self.report(f"submission {sid} invalid: {entry.get('error')}")
        return scores

    def backend(self):
        from a2c.runtime.sandbox import get_backend
        if self.run["backend"] == "local":
            return get_backend("local", use_bwrap=(self.run.get("options") or {}).get("use_bwrap"))
        return get_backend(self.run["backend"])

    def start_env_services(self) -> None:
        """Start the task's declared services (e.g. the WebShop server) before any grading."""
        task = _read_json(self.run_dir / "bundle" / "bundle.json").get("task") or {}
        specs = (task.get("environment") or {}).get("services") or []
        if specs and self.env_services is None:
            from a2c.runtime.sidecars import describe
            from a2c.runtime.sidecars import start_sidecars as start_services
            self.report("starting services: " + ", ".join(describe(s) for s in specs))
            self.env_services = start_services(specs, log_dir=self.run_dir / "logs")
            # the agent's own way in, limited to its training split (service_gateway.py)
            from a2c.runtime.sidecars import agent_gateways
            self.env_gateways = agent_gateways(task, self.run_dir / "data" / "train.jsonl",
                                               _env_socket_dir(self.run_dir),
                                               log_dir=self.run_dir / "logs")
            for name in self.env_gateways:
                self.report(f"service {name}: the agent reaches it through a gateway limited "
                            "to its training split")

    def stop_env_services(self) -> None:
        for gateway in (getattr(self, "env_gateways", None) or {}).values():
            gateway.stop()
        self.env_gateways = {}
        if self.env_services is not None:
            self.env_services.stop()
            self.env_services = None

    def baseline(self) -> None:
        if (self.run_dir / "results" / "baseline.json").is_file():
            self.run["baseline_score"] = _baseline_score(self.run_dir)
            return
        self.report("scoring the base model (baseline; cached per task, model and grader)")
        from a2c.runtime.service.baseline import compute_baseline_for_run
        summary = compute_baseline_for_run(self.run_dir)
        self.run["baseline_score"] = summary.get("score")
        if not summary.get("valid"):
            self.report(f"baseline evaluation FAILED (not scored as 0): {summary.get('error')}")
        else:
            cached = " (cached)" if summary.get("cached") else ""
            self.report(f"baseline score {summary['score']:.1f}{cached}")
        self.ctx.save()

    def _service_json(self, **updates) -> None:
        path = self.run_dir / "grader" / "service.json"
        cfg = _read_json(path)
        cfg.update(updates)
        from a2c.runtime.service import write_service_config
        write_service_config(self.run_dir, **cfg)

    # ---------------------------------------------------------------- phases
    def launch_agent(self, backend):
        from a2c.runtime.sandbox import SandboxSpec
        confined = backend.isolation in ("bubblewrap", "docker")
        run, run_dir = self.run, self.run_dir
        svc = _read_json(run_dir / "grader" / "service.json")
        env = {
            "A2C_TOKEN": svc["token"], "A2C_TASK_ID": run["task"], "A2C_MODE": run["mode"],
            "A2C_SEED": str(run["seed"]), "A2C_DEADLINE": f"{run['deadline']:.3f}",
            "A2C_DRIVER_MODEL": run.get("driver") or "",
            "A2C_PROMPT_FILE": ("/run/a2c/agent" if confined else str(run_dir / "agent"))
            + "/prompt.rendered.md",
            "A2C_AGENT_DIR": "/run/a2c/agent" if confined else str(run_dir / "agent"),
        }
        hooks = run_dir / "bundle" / "hooks" / "bash_logging.sh"
        if hooks.is_file():
            env["BASH_ENV"] = "/run/a2c/hooks/bash_logging.sh" if confined else str(hooks)
        launch = self.agent.get("launch") or {}
        for key in launch.get("pass_env") or []:  # e.g. API keys: from the host, never stored
            if key in os.environ and not str(key).startswith("A2C_"):
                env[str(key)] = os.environ[key]
        env.update({str(k): str(v) for k, v in (run.get("options") or {}).get(
            "agent_env", {}).items()})
        from a2c.runtime.sidecars import INSIDE_DIR, env_var
        for name, gateway in (self.env_gateways or {}).items():
            where = f"{INSIDE_DIR}/{gateway.socket_path.name}" if confined else gateway.socket_path
            env[env_var(name)] = f"unix:{where}"
        extra = {"/run/a2c/agent": run_dir / "agent"}
        if hooks.is_file():
            extra["/run/a2c/hooks"] = run_dir / "bundle" / "hooks"
        spec = SandboxSpec(
            command=_agent_command(self.agent, confined, run_dir),
            workspace=run_dir / "workspace", data_dir=run_dir / "data",
            model_dir=Path(run["base_model"]["path"]), socket_path=Path(svc["socket_path"]),
            log_path=run_dir / "logs" / "agent.log",
            command_log=run_dir / "logs" / "commands.log", env=env, marker=run["sandbox_id"],
            extra_ro=extra, bundle_root=run_dir / "bundle",
            env_sockets=_env_socket_dir(run_dir) if self.env_gateways else None,
            gpus=int((run.get("budget") or {}).get("gpus") or 0)
            if run["backend"] == "docker" else 0)
        if not confined:
            env["A2C_PROMPT_FILE"] = str(run_dir / "agent" / "prompt.rendered.md")
        return backend.start(spec)

    def supervise(self, proc, guard: BudgetGuard) -> dict:
        """Wait for the agent to exit or the deadline; stop the whole tree at the deadline."""
        last_snapshot = time.monotonic()
        last_meta = 0.0
        last_refresh = 0.0
        every = float((self.run.get("options") or {}).get("snapshot_every_s") or SNAPSHOT_EVERY_S)
        reason = "exited"
        stop_report = None
        while True:
            rc = proc.poll()
            for type_, data in guard.tick():
                if type_ == "budget_warning":
                    self.event(type_, data)
                    self.report(f"budget: {int(data['fraction'] * 100)}% used, "
                                f"{format_duration(data['remaining_s'])} left")
            if rc is not None:
                break
            if guard.deadline_hit:
                self.event("deadline_reached", {"deadline": guard.deadline,
                                                "wall_clock_s": guard.wall_clock_s})
                self.report("deadline reached: stopping the agent's process tree")
                stop_report = proc.stop(grace=STOP_GRACE_S)
                reason = "deadline"
                break
            now = time.monotonic()
            if now - last_meta >= 15:
                last_meta = now
                _update_run_meta(self.run_dir / "workspace", self.run, guard.remaining())
            if now - last_refresh >= 2:
                last_refresh = now
                self.refresh()
                if not self.service.alive():
                    self.report("the grader service died; restarting it on the same journal")
                    self.service.start()
            if now - last_snapshot >= every:
                last_snapshot = now
                self.snapshot("periodic")
            time.sleep(0.25)
        if hasattr(proc, "close"):
            proc.close()
        return {"returncode": proc.returncode, "reason": reason, "stop": stop_report}

    def snapshot(self, reason: str) -> None:
        try:
            from a2c.runtime.snapshots import Snapshotter
            Snapshotter(self.run_dir / "snapshots.git", self.run_dir / "workspace",
                        event_log=self.ctx.events).snapshot(reason)
        except Exception as exc:  # noqa: BLE001 - a snapshot failure never stops a run
            self.report(f"snapshot ({reason}) failed: {exc}")

    def drain(self, timeout: float) -> None:
        """Let accepted submissions finish scoring (the deadline never cuts an evaluation)."""
        end = time.monotonic() + timeout
        announced = False
        while time.monotonic() < end:
            pending = journal_state(self.run_dir)["pending"]
            if not pending:
                return
            if not announced:
                self.report(f"waiting for {len(pending)} evaluation(s) to finish")
                announced = True
            if not self.service.alive():
                self.service.start()
            self.refresh()
            time.sleep(0.5)
        self.report("gave up waiting for pending evaluations: "
                    + ", ".join(journal_state(self.run_dir)["pending"]))

    def finish(self, status: str = "finished") -> dict:
        self.snapshot("final")
        budget = self.run.get("budget") or {}
        pending = journal_state(self.run_dir)["pending"]
        self.drain(float(budget.get("eval_timeout_s") or 3600) * max(1, len(pending)) + 30)
        self.service.stop()
        self.stop_env_services()
        transcript = _copy_transcript(self.agent, self.run_dir)
        scores = self.refresh()
        self.run.update({"status": status, "ended_at": _iso(time.time()),
                         "transcript": transcript})
        self.ctx.save()
        self.event("run_finished", {"baseline_score": self.run["baseline_score"],
                                    "best_score": scores["best_score"],
                                    "final_score": scores["final_score"],
                                    "submissions": scores["submissions"],
                                    "valid_submissions": scores["valid_submissions"],
                                    "status": status})
        return self.summary()

    def summary(self) -> dict:
        keys = ("run_id", "task", "agent", "mode", "isolation", "baseline_score", "best_score",
                "final_score", "submissions", "valid_submissions", "status")
        return {**{k: self.run.get(k) for k in keys}, "run_dir": str(self.run_dir)}

    def go(self, resumed: bool = False) -> dict:
        run = self.run
        try:
            backend = self.backend()
            run["isolation"] = backend.isolation
            warning = getattr(backend, "warning", lambda: None)()
            if warning:
                self.report(warning)
            if not resumed:
                run["status"] = "running"
                run["started_at"] = _iso(time.time())
                self.ctx.save()
                self.event("run_started", {
                    k: run.get(k) for k in ("run_id", "task", "level", "agent", "agent_digest",
                                            "driver", "mode", "seed", "backend", "isolation",
                                            "base_model", "data", "bundle_digest", "spec_hash",
                                            "budget", "scoring", "versions")})
            self.start_env_services()
            self.baseline()
            if run.get("deadline") is None:
                now = time.time()
                run["agent_started_at"] = _iso(now)
                run["deadline"] = now + float(run["budget"]["wall_clock_s"])
                run["task_format"] = _task_format(_grader_cfg(self.run_dir / "bundle", {}))
            guard = BudgetGuard(started_at=run["deadline"] - float(run["budget"]["wall_clock_s"]),
                                wall_clock_s=float(run["budget"]["wall_clock_s"]))
            guard.warned = {t for t in guard.thresholds if guard.fraction_used() >= t}
            guard.deadline_hit = False
            agent_out = "/workspace/output" if backend.isolation in ("bubblewrap", "docker") \
                else str(self.run_dir / "workspace" / "output")
            self._service_json(deadline_unix=run["deadline"], agent_output_dir=agent_out)
            _update_run_meta(self.run_dir / "workspace", run, guard.remaining())
            self.ctx.save()
            self.report("starting the grader service")
            self.service.start()
            self.refresh()
            exit_info = run.get("agent_exit")
            if exit_info is None and guard.remaining() > 1:
                self.event("agent_started", {"deadline": run["deadline"],
                                             "wall_clock_s": guard.wall_clock_s,
                                             "isolation": backend.isolation, "resumed": resumed})
                self.report(f"launching agent {run['agent']} ({backend.isolation} sandbox), "
                            f"budget {format_duration(guard.remaining())}")
                proc = self.launch_agent(backend)
                info = self.supervise(proc, guard)
                run["agent_exit"] = {k: info[k] for k in ("returncode", "reason")}
                self.ctx.save()
                data = {"returncode": info["returncode"], "reason": info["reason"]}
                if info.get("stop"):
                    data["stop"] = {k: info["stop"].get(k) for k in ("terminated", "killed",
                                                                     "elapsed_s", "survivors")}
                self.event("agent_exited", data)
                self.report(f"agent exited ({info['reason']}, rc {info['returncode']})")
            elif exit_info is None:
                self.event("deadline_reached", {"deadline": run["deadline"],
                                                "wall_clock_s": guard.wall_clock_s,
                                                "note": "no budget left at resume"})
                run["agent_exit"] = {"returncode": None, "reason": "no budget left at resume"}
                self.event("agent_exited", run["agent_exit"])
            return self.finish("finished")
        except KeyboardInterrupt:
            self._abort("interrupted")
            raise
        except A2CError:
            self._abort("failed")
            raise
        except Exception:
            self._abort("failed")
            raise

    def _abort(self, status: str) -> None:
        try:
            from a2c.runtime.sandbox.proctree import kill_tree
            kill_tree(None, None, self.run.get("sandbox_id"), grace=2.0)
            self.service.stop()
            self.stop_env_services()
            self.run.update({"status": status, "ended_at": _iso(time.time())})
            self.ctx.save()
        except Exception:  # noqa: BLE001 - best effort while failing
            pass


def execute(ctx: RunContext, report: Reporter = print) -> dict:
    return Runner(ctx, report).go(resumed=False)


def resume(run_dir: str | Path, report: Reporter = print) -> dict:
    """Continue a run after a crash of the runtime or the grader.

    The grader restarts on the same journal (it re-queues unscored submissions), the event chain
    continues with `run_resumed`, the agent is relaunched only if budget remains (the deadline
    does not move), and the run is finalised.
    """
    run_dir = Path(run_dir).resolve()
    if not (run_dir / "run.json").is_file():
        raise RunError(f"{run_dir}: not a run directory (no run.json)")
    run = _read_json(run_dir / "run.json")
    if run.get("status") == "finished":
        raise RunError(f"{run_dir}: the run already finished; nothing to resume")
    check = verify_events(run_dir / "events.jsonl")
    if not check.ok and check.events == 0 and not (run_dir / "events.jsonl").exists():
        pass
    elif not check.ok:
        raise RunError(f"{run_dir}/events.jsonl:{check.bad_line}: {check.reason}; "
                       "the record was altered, refusing to resume")
    _kill_stale(run_dir, run)
    ctx = RunContext(run_dir, run)
    started = any(e["type"] == "run_started" for e in read_events(run_dir / "events.jsonl")) \
        if (run_dir / "events.jsonl").exists() else False
    run["resumes"] = int(run.get("resumes") or 0) + 1
    run["status"] = "running"
    ctx.save()
    runner = Runner(ctx, report)
    if started:
        runner.event("run_resumed", {"resume": run["resumes"],
                                     "pending": journal_state(run_dir)["pending"],
                                     "deadline": run.get("deadline"),
                                     "agent_exit": run.get("agent_exit")})
        report(f"resuming {run['run_id']} (resume #{run['resumes']})")
    return runner.go(resumed=started)
