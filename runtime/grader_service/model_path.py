"""Where a submitted model_path points: the agent's path mapped to a host path inside the output
folder (no `..`, no symlink out of it), or a refusal. What the folder holds (regular files only,
no symlink inside) is checked by the copy made at submit (intake.py)."""

from __future__ import annotations

import os
import posixpath
from pathlib import Path
from typing import Any

from a2c.contracts.service_config import ServiceConfig
from a2c.runtime.grader_service.common import Refusal


def resolve_model_path(cfg: ServiceConfig, output_dir: Path, given: Any) -> tuple[str, Path]:
    """Map the agent's path to a host path inside the output folder, or refuse."""
    if not isinstance(given, str) or not given.strip():
        raise Refusal(400, "bad_request", "model_path must be a non-empty string",
                      limit=None)
    if "\0" in given:
        raise Refusal(400, "bad_request", "model_path contains a NUL byte")
    agent_out = posixpath.normpath(cfg.agent_output_dir)
    host_out = str(cfg.output_dir)
    limit = cfg.agent_output_dir
    parts = given.replace("\\", "/").split("/")
    if ".." in parts:
        raise Refusal(400, "path_escape", f"model_path {given!r} contains '..'; give a path "
                      f"inside {limit}", limit=limit)
    if given.startswith("/"):
        norm = posixpath.normpath(given)
        if norm == agent_out or norm.startswith(agent_out.rstrip("/") + "/"):
            host = Path(host_out) / posixpath.relpath(norm, agent_out)
        else:
            host = Path(norm)  # host-side agents (no sandbox) see host paths
    else:
        rel = posixpath.normpath(given)
        ws = cfg.workspace
        candidates = []
        if ws is not None:
            candidates.append(Path(ws) / rel)
        candidates.append(Path(host_out) / rel)
        host = next((c for c in candidates if os.path.lexists(c)), candidates[-1])
    real = Path(os.path.realpath(host))
    if real != output_dir and output_dir not in real.parents:
        raise Refusal(400, "path_escape",
                      f"model_path {given!r} resolves outside the output folder; submit a "
                      f"folder inside {limit}", limit=limit)
    if not real.exists():
        raise Refusal(400, "bad_request", f"model_path {given!r} does not exist", limit=limit)
    shown = given if given.startswith("/") else posixpath.join(agent_out, posixpath.normpath(
        posixpath.relpath(str(real), str(output_dir))))
    return shown, real
