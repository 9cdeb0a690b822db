"""Build RUN_DIR: bundle copy, workspace, data splits, model, token, service.json, run.json.

Nothing is started here; `execute` (runner.py) starts the grader and the agent.
"""

from __future__ import annotations

import os
import secrets
import shutil
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from a2c.contracts.agent_params import effective as effective_params
from a2c.contracts.budget import Budget
from a2c.contracts.bundle import Bundle, load_bundle
from a2c.contracts.inference import InferenceBlock
from a2c.contracts.run_info import (
    BaseModelRecord,
    DataRecord,
    GpuPlacement,
    RunInfo,
    RunSettings,
)
from a2c.contracts.run_paths import CREATED_DIRS, RunPaths
from a2c.contracts.service_config import read_grader_json, write_service_config
from a2c.contracts.spec import AgentSpec, DriverSpec, GraderSpec, TaskSpec
from a2c.durations import format_duration
from a2c.errors import BundleError, RunError
from a2c.fsutil import write_json_atomic, write_text_atomic
from a2c.modes import MODES
from a2c.runtime.run.context import Reporter, RunContext, RunOptions, versions
from a2c.runtime.run.driver import configure, is_served
from a2c.runtime.run.limits_note import limits_section
from a2c.runtime.run.resolve import (
    load_agent_spec,
    model_cfg,
    resolve_agent_bundle,
    resolve_task_bundle,
)
from a2c.runtime.run.scaffold import (
    key_env_names,
    launch_of,
    refuse_provider_keys,
    uses_gateway,
)
from a2c.scrub import record_path


def grader_cfg(bundle: Path, task: TaskSpec) -> dict:
    """The task's grader section as the grader service reads it (grader/grader.json):
    bundle/grader/grader.json, else the task's `grader`."""
    path = RunPaths(bundle).grader_json   # the same relative path inside a bundle
    if path.is_file():
        return read_grader_json(path)
    return task.grader.to_dict()


def make_read_only(root: Path) -> None:
    for path in sorted(root.rglob("*"), reverse=True):
        if path.is_symlink():
            continue
        os.chmod(path, 0o555 if path.is_dir() else 0o444)
    os.chmod(root, 0o555)


# Who may read what (the run directory is the operator's, 0700: another local user reaches
# nothing under it, whichever command wrote it; the agent's and the evaluator's unprivileged uids
# see what bubblewrap, or the container engine, binds for them as root, never through RUN):
TRAVERSE_DIRS = ("grader", "logs", "bundle")     # 0711: reachable by name, not listable
PRIVATE_DIRS = ("results", "snapshots.git", "grader/eval", "bundle/grader", "driver")  # 0700
PRIVATE_FILES = ("run.json", "events.jsonl", "submissions.jsonl", "bundle/bundle.json",
                 "logs/agent.log", "logs/commands.log", "logs/grader.log",
                 "grader/service.pid")  # 0600 (created; their writers keep the mode)


def make_private(root: Path) -> None:
    """RUN 0700; results/, snapshots.git/, grader/eval/, bundle/grader/ 0700; every file under
    grader/ and those 0600 (token, held-out split, service.json, grader.json), folders 0700; the record's files
    and the logs 0600 (created empty so that their writers, which append, keep the mode).
    workspace/, data/ and agent/ are left to the sandbox (the agent's uid must reach them)."""
    for rel in PRIVATE_DIRS:
        if rel == "driver" and not (root / rel).is_dir():
            continue   # a scaffold's gateway folder, only where there is one
        (root / rel).mkdir(parents=True, exist_ok=True)
        os.chmod(root / rel, 0o700)
    for top in ("grader", *PRIVATE_DIRS):
        if not (root / top).is_dir():
            continue
        for path in (root / top).rglob("*"):
            if not path.is_symlink():
                os.chmod(path, 0o700 if path.is_dir() else 0o600)
    for rel in PRIVATE_FILES:
        path = root / rel
        path.touch(mode=0o600, exist_ok=True)
        os.chmod(path, 0o600)
    for rel in TRAVERSE_DIRS:
        os.chmod(root / rel, 0o711)
    os.chmod(root, 0o700)


def render_prompt(paths: RunPaths, task: TaskSpec, mode: str, budget_s: float) -> str:
    template = paths.prompt
    if not template.is_file():
        return ""
    instructions = ""
    source = paths.bundle_workspace / "INSTRUCTIONS.md"
    if source.is_file():
        instructions = source.read_text(encoding="utf-8")
    import jinja2
    env = jinja2.Environment(undefined=jinja2.ChainableUndefined, keep_trailing_newline=True)
    try:
        return env.from_string(template.read_text(encoding="utf-8")).render(
            instructions=instructions, task=task.to_dict(), mode=mode, budget=format_duration(budget_s),
            budget_s=budget_s, workspace="$A2C_WORKSPACE")
    except jinja2.TemplateError as exc:
        raise BundleError(f"{template}: cannot render the prompt: {exc}") from exc


def baseline_cache() -> Path:
    from a2c.paths import cache_dir
    path = cache_dir() / "baselines"
    path.mkdir(parents=True, exist_ok=True)
    return path


def check_options(opts: RunOptions) -> None:
    if opts.mode not in MODES:
        raise RunError(f"unknown mode {opts.mode!r} (choose one of {', '.join(MODES)})")
    from a2c.runtime.sandbox import BACKENDS
    if opts.backend not in BACKENDS:
        raise RunError(f"unknown sandbox backend {opts.backend!r} (choose local or docker)")
    reserved = sorted(str(k) for k in opts.agent_env or {} if str(k).startswith("A2C_"))
    if reserved:   # the interface is the runtime's; an agent's settings are its params
        raise RunError(f"agent_env {', '.join(reserved)}: A2C_* variables are set by the "
                       "runtime (the runtime → agent interface); pass an agent's settings as "
                       "its params (RunOptions.agent_params, a2c run --agent-param NAME=VALUE)")
    from a2c.runtime.sandbox import get_backend
    if opts.backend == "docker":  # fail fast, before anything is written, without an engine
        get_backend("docker", build=False)
    else:  # refuses, before anything is written, a local agent that would keep root
        get_backend("local", use_bwrap=opts.use_bwrap)


def _check_task_and_agent(opts: RunOptions, task: TaskSpec, agent_spec: AgentSpec) -> None:
    if opts.backend == "docker":
        # the agent layer installs npm/pip packages (docker_scaffolds.py), not install commands
        from a2c.runtime.sandbox.docker_scaffolds import unsupported
        if unsupported(agent_spec):
            raise RunError(f"agent {agent_spec.id}: the docker backend does not run install "
                           f"commands ({'; '.join(unsupported(agent_spec))}) in its image; run it "
                           "with --backend local")
    if opts.mode not in (task.modes or MODES):
        raise RunError(f"task {task.id} does not offer mode {opts.mode!r} "
                       f"(it offers {', '.join(task.modes)})")
    # an old agent may name its driver as a plain string; a hand-made one without a driver
    # section needs none (DriverSpec.required is unset: false)
    driver = agent_spec.driver if isinstance(agent_spec.driver, DriverSpec) else DriverSpec()
    if driver.required and not (opts.driver or driver.default):
        raise RunError(f"agent {agent_spec.id} needs a driver model: pass --driver MODEL")
    overrides = {"--driver-tokens": opts.driver_tokens, "--driver-cost": opts.driver_cost,
                 "--driver-calls": opts.driver_calls}
    if not uses_gateway(agent_spec):
        given = [flag for flag, value in overrides.items() if value is not None]
        if given:
            raise RunError(f"{', '.join(given)}: agent {agent_spec.id} has no driver model (a "
                           f"{agent_spec.type} agent); driver budgets apply to scaffolds "
                           "(agents of type cli)")
        return
    if not (opts.driver or driver.default):
        raise RunError(f"agent {agent_spec.id} needs a driver model: pass --driver MODEL")
    for flag, value in overrides.items():
        if value is not None and not value > 0:
            raise RunError(f"{flag} {value}: a driver budget must be positive")
    key_envs = key_env_names(None, dict(os.environ))
    refuse_provider_keys(agent_spec, list(launch_of(agent_spec).pass_env or []), key_envs)
    refuse_provider_keys(agent_spec, list(opts.agent_env or {}), key_envs)


def _run_dir(opts: RunOptions, task: TaskSpec, agent: AgentSpec) -> tuple[str, Path]:
    from a2c.paths import project_root
    runs_dir = Path(opts.runs_dir) if opts.runs_dir else project_root() / "runs"
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    run_id = opts.run_id or f"{task.id}-{agent.id}-{stamp}-{secrets.token_hex(2)}"
    return run_id, (runs_dir / run_id).resolve()


def _prepare_workspace(paths: RunPaths, mode: str, budget: Budget) -> None:
    """The bundle's agent-visible files, MODE.md (the mode, then the limits this run enforces:
    limits_note.py), output/."""
    shutil.copytree(paths.bundle_workspace, paths.workspace, dirs_exist_ok=True)
    mode_file = paths.workspace_mode(mode)
    text = mode_file.read_text(encoding="utf-8") if mode_file.is_file() else ""
    paths.mode_md.write_text(text + limits_section(budget), encoding="utf-8")
    paths.output.mkdir(exist_ok=True)


def _prepare_data(paths: RunPaths, task: TaskSpec, report: Reporter) -> DataRecord:
    """Agent split read-only under data/, held-out split only under grader/ (with a final split:
    the feedback part in heldout.jsonl, the final part in final.jsonl)."""
    from a2c.runtime import data as data_mod
    cache = None
    splits = data_mod.load_splits(task, paths.bundle, cache)
    agent, heldout = splits["agent"], splits["heldout"]
    feedback, final = data_mod.split_final(heldout, task.scoring.final)
    data_mod.write_jsonl(paths.train, agent)
    data_mod.write_jsonl(paths.heldout, feedback)
    if final:
        data_mod.write_jsonl(paths.final_heldout, final)
    try:
        root = data_mod.data_root(task, paths.bundle, cache)
        data_mod.copy_referenced_files(agent, root, paths.data)
        data_mod.copy_referenced_files(feedback + final, root, paths.grader)
    except Exception as exc:  # noqa: BLE001 - referenced files are optional
        report(f"note: referenced data files not copied: {exc}")
    make_read_only(paths.data)
    return DataRecord(agent_fingerprint=data_mod.fingerprint(agent), agent_records=len(agent),
                      heldout_fingerprint=data_mod.fingerprint(feedback),
                      heldout_records=len(feedback),
                      final_fingerprint=data_mod.fingerprint(final) if final else None,
                      final_records=len(final) if final else None)


def prepare(opts: RunOptions, report: Reporter = lambda _: None) -> RunContext:
    """Build RUN_DIR from a compiled task bundle and agent bundle (see resolve.py)."""
    check_options(opts)
    bundle_src = resolve_task_bundle(opts.bundle)
    agent_src = resolve_agent_bundle(opts.agent)
    task = Bundle.load(bundle_src).task
    agent_spec = load_agent_spec(agent_src)
    _check_task_and_agent(opts, task, agent_spec)
    # a refused param: nothing written
    params = effective_params(agent_spec.to_dict(), opts.agent_params)
    # the run's limits, decided once: the task's, `--budget` and the `--driver-*` overrides
    # (refused above for an agent without a gateway)
    budget = Budget.for_run(task.budget, opts.budget, driver_tokens=opts.driver_tokens,
                            driver_cost_usd=opts.driver_cost, driver_calls=opts.driver_calls)
    gateway = uses_gateway(agent_spec)

    run_id, run_dir = _run_dir(opts, task, agent_spec)
    if run_dir.exists():
        raise RunError(f"{run_dir} already exists")
    _check_record_keys(run_dir.parent)
    from a2c.runtime.run import devices  # before anything is written: a missing GPU is one line
    served = gateway and is_served(_driver_name(opts, agent_spec))
    gpus, lease = devices.assign(opts.gpus, opts.grader_gpus, task.budget.gpus or 0,
                                 driver_gpus=opts.driver_gpus, served_driver=served)
    devices.register(run_dir, lease)
    try:
        ctx = _build(opts, task, agent_spec, bundle_src, agent_src, budget, run_id,
                     run_dir, report, params, gpus)
        ctx.run.gpus = gpus
        ctx.save()
        report(f"GPUs: agent {','.join(gpus.agent) or 'none'}, "
               f"grader {','.join(gpus.grader) or 'none (CPU)'}"
               + (f", driver {','.join(gpus.driver or ()) or 'none (CPU)'}" if served else ""))
        return ctx
    except BaseException:
        devices.release(run_dir)
        remove_run_dir(run_dir)   # nothing half-made
        raise


def _check_record_keys(runs_dir: Path) -> None:
    """The record's private keys (the signing key, a legacy HMAC key) never lie where a report
    server or an agent could reach them: not in the runs folder, not in a folder the local
    sandbox binds into the agent's view (the system folders, the interpreter, the venv)."""
    from a2c.contracts.record_key import private_key_paths
    from a2c.runtime.sandbox.local import SYSTEM_DIRS, python_binds
    visible = [("the runs folder", runs_dir)] + [
        ("a folder the sandbox shows the agent", Path(d)) for d in (*SYSTEM_DIRS,
                                                                     *python_binds())]
    for key in private_key_paths():
        resolved = key.resolve()
        for what, folder in visible:
            folder = folder.resolve()
            if resolved == folder or folder in resolved.parents:
                raise RunError(f"the record key {key} is inside {what} ({folder}); keep it in "
                               "the operator's configuration (~/.config/a2c)")


def remove_run_dir(run_dir: Path) -> None:
    """Remove a run directory that never ran, and the short socket folder a long path needed."""
    paths = RunPaths(run_dir)
    for sock in (paths.driver_socket, paths.socket):
        if run_dir not in sock.parents:
            sock.unlink(missing_ok=True)
            try:
                sock.parent.rmdir()
            except OSError:
                pass
    shutil.rmtree(run_dir, ignore_errors=True)


def _driver_name(opts: RunOptions, agent: AgentSpec) -> str | None:
    driver = agent.driver   # an old agent may name its driver as a plain string
    return opts.driver or (driver.default if isinstance(driver, DriverSpec) else driver)


def _build(opts: RunOptions, task: TaskSpec, agent_spec: AgentSpec, bundle_src: Path,
           agent_src: Path, budget: Budget, run_id: str, run_dir: Path, report: Reporter,
           params: dict[str, Any], gpus: GpuPlacement | None = None) -> RunContext:
    wall = budget.wall_clock_s
    paths = RunPaths(run_dir)
    for sub in CREATED_DIRS:
        (run_dir / sub).mkdir(parents=True, exist_ok=True)
    report(f"run directory {run_dir}")
    shutil.copytree(bundle_src, paths.bundle)
    shutil.copytree(agent_src, paths.agent)
    bundle = Bundle.load(paths.bundle)

    grader = grader_cfg(paths.bundle, task)
    write_json_atomic(paths.grader_json, grader)
    inference = GraderSpec.from_dict(grader).inference
    _prepare_workspace(paths, opts.mode, budget)
    report("preparing data")
    data_info = _prepare_data(paths, task, report)

    report("resolving the base model")
    from a2c.runtime import models
    model = model_cfg(opts.model, task.base_model.to_dict())
    model_path = Path(models.resolve_base_model(model, paths.bundle))
    model_fp = models.model_fingerprint(model_path)

    token = secrets.token_urlsafe(32)
    write_text_atomic(paths.token, token, mode=0o600)
    prompt = render_prompt(paths, task, opts.mode, wall)
    paths.prompt_rendered.write_text(prompt, encoding="utf-8")

    write_service_config(
        run_dir, token=token, socket_path=str(paths.socket), host=None, port=None,
        deadline_unix=None, max_submissions=budget.max_submissions,
        min_interval_s=budget.min_interval_s, eval_timeout_s=budget.eval_timeout_s,
        output_dir=str(paths.output),
        agent_output_dir=str(paths.output),   # set per backend at launch
        workspace=str(paths.workspace), bundle=str(paths.bundle), heldout=str(paths.heldout),
        engine=InferenceBlock.of(inference).engine,
        base_model=str(model_path), baseline_cache=str(baseline_cache()),
        task_id=task.id, baseline=False,
        # --no-bwrap: the grader service goes without bubblewrap too (written only then)
        **({"use_bwrap": False} if opts.use_bwrap is False else {}))

    driver_name = _driver_name(opts, agent_spec)
    if uses_gateway(agent_spec):
        paths.agent_home.mkdir(mode=0o700)   # the scaffold's HOME (owned by the agent at start)
        os.chmod(paths.agent_home, 0o700)
        config = configure(paths, driver_name, agent_spec, budget.driver_limits(),
                           gpus=gpus.driver if gpus else None, seed=opts.seed,
                           share=opts.share_driver_server)
        refuse_provider_keys(agent_spec, list(launch_of(agent_spec).pass_env or []),
                             key_env_names(config, dict(os.environ)))
        report(f"driver {driver_name}: through the run's gateway")
    info = RunInfo(
        run_id=run_id, task=task.id, level=task.level, title=task.title, agent=agent_spec.id,
        agent_digest=load_bundle(paths.agent, kind="Agent", verify=False).digest,
        driver=driver_name,
        mode=opts.mode, seed=opts.seed, backend=opts.backend,
        base_model=BaseModelRecord(spec=model, path=record_path(model_path),
                                   fingerprint=model_fp),
        data=data_info, bundle_digest=bundle.digest, spec_hash=bundle.spec_hash,
        isolation=None, budget=budget, scoring=task.scoring.to_dict(),
        versions=versions(), sandbox_id=secrets.token_hex(8),
        options=RunSettings(use_bwrap=opts.use_bwrap, snapshot_every_s=opts.snapshot_every_s,
                            agent_params=params, agent_env=opts.agent_env))
    ctx = RunContext(run_dir, info)
    ctx.save()
    make_private(run_dir)
    return ctx
