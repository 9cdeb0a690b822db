"""Sandbox backends: where and how an agent's process runs (the interface: `spec`)."""

from a2c.runtime.sandbox.spec import (
    BACKENDS,
    SandboxBackend,
    SandboxProcess,
    SandboxSpec,
    get_backend,
)

__all__ = ["BACKENDS", "SandboxBackend", "SandboxProcess", "SandboxSpec", "get_backend"]
