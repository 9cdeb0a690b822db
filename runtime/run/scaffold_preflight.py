"""A scaffold's pre-flight, before its run spends anything (the baseline, the budget): its
command exists inside the very sandbox it will get, and its driver gateway starts and answers.
A `PreflightError` (one line, exit 2) otherwise, and a fresh run leaves nothing behind."""

from __future__ import annotations

import dataclasses

from a2c.contracts.run_info import RunInfo
from a2c.contracts.run_paths import RunPaths
from a2c.contracts.spec import AgentSpec
from a2c.runtime.run.agent import CONFINED, sandbox_spec
from a2c.runtime.run.context import Reporter
from a2c.runtime.run.driver_link import DriverLink
from a2c.runtime.run.scaffold import PreflightError, check_command, check_script, install_hint

PREFLIGHT_TIMEOUT_S = 120.0


def preflight(agent: AgentSpec, run: RunInfo, paths: RunPaths, driver: DriverLink, backend,
              report: Reporter) -> None:
    agent_id = agent.id
    command = check_command(agent)
    if command:
        report(f"pre-flight: looking for `{command}` inside the sandbox")
        found, detail = command_exists(agent, run, paths, backend, command)
        if not found:
            why = "is not installed where the agent runs" if not detail else \
                f"was not found where the agent runs ({detail})"
            raise PreflightError(f"{agent_id}: `{command}` {why}. Install it: "
                                 f"{install_hint(agent)}")
    try:
        driver.start()
    except Exception as exc:  # noqa: BLE001 - any failure to start is the pre-flight's
        last = driver.gateway.last_log_line()
        raise PreflightError(f"{agent_id}: the driver gateway for {run.driver} did not "
                             f"start: {str(exc).splitlines()[0] if str(exc) else exc!r}"
                             + (f" (log: {last})" if last else "")) from exc
    ok, message = driver.gateway.probe()
    if not ok:
        last = driver.gateway.last_log_line()
        raise PreflightError(f"{agent_id}: the driver gateway for {run.driver} does not "
                             f"answer: {' '.join(str(message).split())[:300]}"
                             + (f" (log: {last})" if last else ""))
    report(f"pre-flight: the driver gateway answers ({message})" if message
           else "pre-flight: the driver gateway answers")


def command_exists(agent: AgentSpec, run: RunInfo, paths: RunPaths, backend,
                   command: str) -> tuple[bool, str]:
    """`command -v COMMAND` in the agent's own sandbox (same binds, user and environment;
    no command hook, a log of its own, removed after)."""
    confined = backend.isolation in CONFINED
    spec = sandbox_spec(agent, run, paths, confined, {})
    log = paths.logs / "preflight.log"
    env = {k: v for k, v in spec.env.items() if k != "BASH_ENV"}
    # the grader's and the gateway's sockets do not exist yet: not bound for the check
    spec = dataclasses.replace(
        spec, command=["bash", "-c", check_script(agent, command)], log_path=log,
        command_log=None, env=env, marker=f"{run.sandbox_id}-preflight",
        socket_path=spec.socket_path if spec.socket_path.exists() else None,
        driver_socket=spec.driver_socket if spec.driver_socket and
        spec.driver_socket.exists() else None)
    try:
        proc = backend.start(spec)
        rc = proc.wait(PREFLIGHT_TIMEOUT_S)
        if rc is None:
            proc.stop(grace=1.0)
            return False, "the check timed out"
        if hasattr(proc, "close"):
            proc.close()
        output = log.read_text(encoding="utf-8", errors="replace").strip() \
            if log.is_file() else ""
    finally:
        log.unlink(missing_ok=True)
    if rc == 0:
        return True, ""
    first = output.splitlines()[0][:200] if output else ""
    return False, first
