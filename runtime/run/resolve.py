"""Which task bundle, agent bundle and base model a run uses.

The runtime runs compiled bundles only: a bundle folder, or an id with a bundle in `generated/`
(`generated/<id>/`, `generated/agents/<id>/`). Compiling a spec first is the CLI's step
(`a2c.cli.run`), so the runtime never imports the compiler.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from a2c.contracts.bundle import MANIFESTS, is_bundle, load_bundle
from a2c.contracts.spec import AgentSpec
from a2c.errors import RunError

TASK_MANIFEST = MANIFESTS["Task"]
AGENT_MANIFEST = MANIFESTS["Agent"]


def _project_root() -> Path:
    from a2c.paths import project_root
    return project_root()


def find_bundle(ref: str | Path, kind: str) -> Path | None:
    """A bundle folder, or an id built under generated/ -> its folder; None when neither."""
    kind = "Task" if kind == "Task" else "Agent"
    path = Path(ref)
    if path.is_dir() and is_bundle(path, kind):
        return path.resolve()
    if not path.exists():
        generated = _project_root() / "generated"
        generated = generated / str(ref) if kind == "Task" else generated / "agents" / str(ref)
        if is_bundle(generated, kind):
            return generated.resolve()
    return None


def _resolve(ref: str | Path, kind: str) -> Path:
    found = find_bundle(ref, kind)
    if found is None:
        raise RunError(f"{ref}: not a compiled {kind.lower()} bundle (a folder with "
                       f"{TASK_MANIFEST if kind == 'Task' else AGENT_MANIFEST}, or an id built "
                       "under generated/); compile its spec first (a2c build, or a2c run SPEC)")
    return found


def resolve_task_bundle(ref: str | Path) -> Path:
    return _resolve(ref, "Task")


def resolve_agent_bundle(ref: str | Path) -> Path:
    return _resolve(ref, "Agent")


def load_agent(root: Path, verify: bool = True) -> dict[str, Any]:
    """The resolved agent spec of the agent bundle at `root` (verified by the one bundle check)."""
    return load_bundle(root, kind="Agent", verify=verify).agent.to_dict()


def load_agent_spec(root: Path, verify: bool = True) -> AgentSpec:
    """`load_agent`, typed (a2c.contracts.spec.AgentSpec)."""
    return load_bundle(root, kind="Agent", verify=verify).agent


def model_cfg(override: str | None, task_cfg: dict) -> dict:
    """The base model a run uses: the task's, or an override (folder, builtin, hub id)."""
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
