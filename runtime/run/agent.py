"""The agent's side of a run: its sandbox spec and environment, run_meta.json in its workspace,
its transcript in logs/."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from a2c.contracts.agent_params import ENV_VAR as PARAMS_ENV
from a2c.contracts.agent_params import to_env as params_to_env
from a2c.contracts.budget import Budget
from a2c.contracts.inference import InferenceBlock
from a2c.contracts.run_info import RunInfo
from a2c.contracts.run_paths import RunPaths
from a2c.contracts.service_config import ServiceConfig
from a2c.contracts.spec import AgentSpec, GraderSpec, TranscriptSpec
from a2c.runtime.redact import redact_bytes
from a2c.runtime.run.scaffold import PROVIDER_KEY, driver_model, launch_of, typed, uses_gateway
from a2c.runtime.run.workspace_io import copy_out, write_file
from a2c.scrub import expand_path
from a2c.timefmt import iso_utc

# Where the sandbox shows the run's read-only folders to a confined agent.
INSIDE_AGENT = "/run/a2c/agent"
INSIDE_HOOKS = "/run/a2c/hooks"
CONFINED = ("bubblewrap", "docker")


def task_format(grader: dict) -> dict[str, Any]:
    """What an agent may know about how its model is prompted and graded (no data)."""
    spec = GraderSpec.from_dict(grader)
    inference, params = InferenceBlock.of(spec.inference), spec.params or {}
    return {"grader": spec.kind, "prompt_template": inference.prompt_template,
            "chat_template": inference.chat_template, "max_new_tokens": inference.max_new_tokens,
            "answer_pattern": params.get("pattern")}


def run_meta(paths: RunPaths, run: RunInfo, remaining: float | None) -> dict[str, Any]:
    """What run_meta.json tells the agent: the bundle's copy (RUN/bundle, the runtime's own)
    updated from the runtime's state; the workspace copy is never read."""
    try:
        meta = json.loads(paths.bundle_run_meta.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        meta = {}
    if not isinstance(meta, dict):
        meta = {}
    meta.update({"mode": run.mode, "seed": run.seed, "deadline": run.deadline,
                 "deadline_iso": iso_utc(run.deadline), "budget": run.budget.to_dict(),
                 "remaining_s": None if remaining is None else round(remaining, 1),
                 "updated_at": iso_utc(time.time()),
                 "base_model": run.base_model.spec if run.base_model.spec is not None
                 else meta.get("base_model")})
    task = meta.get("task") if isinstance(meta.get("task"), dict) else {}
    meta["task"] = {**task, **(run.task_format or {})}
    if run.data.final_records:   # a final split: how many items each part has (not which)
        meta["heldout"] = {"feedback_items": run.data.heldout_records,
                           "final_items": run.data.final_records}
    return meta


def update_run_meta(paths: RunPaths, run: RunInfo, remaining: float | None) -> None:
    """Write workspace/run_meta.json without ever reading it: the agent may have put a symlink,
    a FIFO or a folder there. A fresh file is renamed over the name (workspace_io.write_file)."""
    data = (json.dumps(run_meta(paths, run, remaining), indent=2, sort_keys=True) + "\n").encode()
    write_file(paths.workspace, paths.run_meta.name, data)


def copy_transcript(agent: dict | AgentSpec, paths: RunPaths,
                    secrets: dict | None = None) -> str | None:
    """logs/transcript.<ext>: the agent's stdout, or the file/folder it declared (workspace path),
    copied without following a symlink, regular files only, within a size budget, redacted."""
    spec = typed(agent).transcript
    if not isinstance(spec, TranscriptSpec):    # an old agent's transcript: a path
        spec = TranscriptSpec(path=str(spec) if spec else None)
    ext = spec.ext or spec.format or "txt"
    target = paths.transcript(ext)
    def scrub(data: bytes) -> bytes:
        return redact_bytes(data, secrets) if secrets else data

    try:
        if spec.source == "stdout" and not spec.path:
            if target == paths.agent_log:
                return str(target.relative_to(paths.root))
            copy_out(paths.agent_log.parent, paths.agent_log.name, target, transform=scrub)
            return str(target.relative_to(paths.root))
        rel = str(spec.path or "")
        for prefix in ("/workspace/", "$A2C_WORKSPACE/", "${A2C_WORKSPACE}/"):
            if rel.startswith(prefix):
                rel = rel[len(prefix):]
        path = Path(rel)
        if not rel or path.is_absolute() or ".." in path.parts:
            return None
        report = copy_out(paths.workspace, rel, target, transform=scrub)
    except OSError:   # absent, a symlink, a FIFO, over the budget: no transcript
        return None
    return str(target.relative_to(paths.root)) if report["files"] else None


def driver_env(agent: dict | AgentSpec, run: RunInfo, paths: RunPaths) -> dict[str, str]:
    """A scaffold's driver variables: the driver string, its model part, the wire the run chose
    from those the scaffold speaks (OpenCode picks its provider by it), the per-run gateway key
    (A2C_DRIVER_SOCKET is the backend's: where the socket is bound). A reference agent keeps
    A2C_DRIVER_MODEL = the run's driver, as before."""
    if not uses_gateway(agent):
        return {"A2C_DRIVER_MODEL": run.driver or ""}
    from a2c.runtime.run.driver import read_key, read_wire, served_context
    env = {"A2C_DRIVER": run.driver or "", "A2C_DRIVER_MODEL": driver_model(run.driver, agent),
           "A2C_DRIVER_WIRE": read_wire(paths), "A2C_DRIVER_KEY": read_key(paths)}
    context = served_context(paths)
    if context:
        env["A2C_DRIVER_CONTEXT"] = str(context)
    return env


def sandbox_spec(agent: dict | AgentSpec, run: RunInfo, paths: RunPaths, confined: bool,
                 env_proxies: dict):
    """The agent's SandboxSpec: command, mounts, environment (token, deadline, environment
    service proxies; for a scaffold its driver gateway's socket, key and model, and its home)."""
    from a2c.runtime.sandbox import SandboxSpec
    svc = ServiceConfig.load(paths.root)
    agent_dir = INSIDE_AGENT if confined else str(paths.agent)
    gateway = uses_gateway(agent)
    env = {
        "A2C_TOKEN": svc.token, "A2C_TASK_ID": run.task, "A2C_MODE": run.mode,
        "A2C_SEED": str(run.seed),
        "A2C_DEADLINE": "" if run.deadline is None else f"{run.deadline:.3f}",
        **driver_env(agent, run, paths),
        "A2C_PROMPT_FILE": agent_dir + "/" + paths.prompt_rendered.name,
        "A2C_AGENT_DIR": agent_dir,
    }
    hooks = paths.bash_logging_hook
    if hooks.is_file():
        env["BASH_ENV"] = f"{INSIDE_HOOKS}/{hooks.name}" if confined else str(hooks)
    for key in launch_of(agent).pass_env or []:  # e.g. API keys: from the host, never stored
        if gateway and PROVIDER_KEY.search(str(key)):
            continue   # never a provider key past the gateway (refused at prepare already)
        if key in os.environ and not str(key).startswith("A2C_"):
            env[str(key)] = os.environ[key]
    env.update({str(k): str(v) for k, v in run.options.agent_env.items()})
    params = run.options.agent_params
    if params:   # the runtime → agent interface: the effective params, one JSON object
        env[PARAMS_ENV] = params_to_env(params)
    from a2c.runtime.env_services import INSIDE_DIR, service_url_var
    for name, env_proxy in (env_proxies or {}).items():
        where = f"{INSIDE_DIR}/{env_proxy.socket_path.name}" if confined \
            else env_proxy.socket_path
        env[service_url_var(name)] = f"unix:{where}"
    extra = {INSIDE_AGENT: paths.agent}
    if hooks.is_file():
        extra[INSIDE_HOOKS] = paths.bundle_hooks
    launch_sh = f"{INSIDE_AGENT}/{paths.launch.name}" if confined else str(paths.launch)
    spec = SandboxSpec(
        command=["bash", launch_sh],
        workspace=paths.workspace, data_dir=paths.data,
        model_dir=expand_path(run.base_model.path), socket_path=Path(svc.socket_path),
        log_path=paths.agent_log, command_log=paths.commands_log, env=env,
        marker=run.sandbox_id, extra_ro=extra, bundle_root=paths.bundle,
        env_service_sockets=paths.env_service_sockets if env_proxies else None,
        driver_socket=paths.driver_socket if gateway else None,
        agent_home=paths.agent_home if gateway else None,
        agent_tmp=paths.agent_tmp,
        gpu_ids=tuple(str(g) for g in run.gpus.agent) if run.gpus else (),
        **spec_limits(run.budget))
    if not confined:
        env["A2C_PROMPT_FILE"] = str(paths.prompt_rendered)
    return spec


def spec_limits(budget: Budget) -> dict:
    """The task's resource limits (budget memory_mb, cpus, pids) as SandboxSpec fields, for
    every backend: docker's engine enforces them, the local backend a cgroup per run
    (sandbox/cgroups.py); and its disk budget (disk_mb, else the default), always, which both
    backends watch from the host (sandbox/disk.py)."""
    limits: dict = {}
    if budget.memory_mb:
        limits["mem_limit"] = f"{int(budget.memory_mb)}m"
    if budget.cpus:
        limits["cpus"] = float(budget.cpus)
    if budget.pids:
        limits["pids"] = int(budget.pids)
    limits["disk_limit"] = f"{budget.disk_budget_mb}m"
    return limits


def log_tail(path: Path, secrets: dict | None = None, lines: int = 20,
             width: int = 400) -> list[str]:
    """The last `lines` lines of a log (redacted; each cut at `width` characters)."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - 64 * 1024))
            data = handle.read()
    except OSError:
        return []
    if secrets:
        data = redact_bytes(data, secrets)
    text = data.decode("utf-8", errors="replace").replace("\r", "\n")
    out = [line.rstrip()[:width] for line in text.splitlines() if line.strip()]
    return out[-lines:]
