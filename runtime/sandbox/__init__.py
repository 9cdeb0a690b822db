"""Sandbox backends: where and how an agent's process runs.

One small interface, chosen by name (`get_backend("local" | "docker")`):

    backend.isolation            # "bubblewrap" | "none" | "docker" (recorded in run.json)
    backend.start(spec) -> SandboxProcess
    process.poll() / wait(timeout) / stop(grace) / returncode

A `SandboxSpec` names host paths (workspace, data, model, grader socket, logs); each backend
decides how the agent sees them (`inside` paths) and fills the path variables of the agent's
environment (`A2C_WORKSPACE`, `A2C_OUTPUT_DIR`, `A2C_DATA_DIR`, `A2C_BASE_MODEL`,
`A2C_GRADER_URL`, `A2C_COMMAND_LOG`). Everything else in the environment comes from the runtime.
"""

from a2c.runtime.sandbox.spec import BACKENDS, Backend, SandboxProcess, SandboxSpec, get_backend

__all__ = ["BACKENDS", "Backend", "SandboxProcess", "SandboxSpec", "get_backend"]
