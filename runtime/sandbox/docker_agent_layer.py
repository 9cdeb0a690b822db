"""The docker backend's run image: the task image plus the agent layer (the agent bundle's files
at /opt/a2c/agent and a scaffold's packages copied from its tools image), `a2c-<task>-<agent>:
<t12>-<a12>`. Apart from docker_images.py (the base and the task image), which it builds on, and
beside docker_scaffolds.py (the tools image), which builds on docker_images.py too.
"""

from __future__ import annotations

import io
import json
import tarfile
import time
from pathlib import Path

from a2c.contracts.spec import AgentSpec
from a2c.runtime.sandbox.docker_images import (
    AGENT_DIR,
    Built,
    Report,
    _build,
    agent_tag,
    build_lock,
    ensure_task_image,
    has_image,
    manifest,
)
from a2c.runtime.sandbox.docker_scaffolds import ensure_tools, layer_has_tools, layer_lines


def agent_context(agent_root: Path, task_image: str, tools: str | None = None) -> io.BytesIO:
    """A build context (tar) for the agent layer: the agent bundle's own files (its manifest's
    list, not the run's rendered prompt) at /opt/a2c/agent, read-only, labelled by digest; a
    scaffold's packages copied from its tools image (docker_scaffolds.py)."""
    found = manifest(agent_root, "Agent")
    files = sorted(found.files) if found else []
    lines = [f"FROM {task_image}", "USER root", *layer_lines(tools)]
    if files:
        lines.append(f"COPY agent/ {AGENT_DIR}/")
    ident, digest = (found.id, found.digest) if found else (None, None)
    lines += [f"LABEL a2c.agent={json.dumps(str(ident))} "
              f"a2c.agent_digest={json.dumps(str(digest))}", "USER agent"]
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        def add(name: str, data: bytes, mode: int = 0o644) -> None:
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), mode, 0
            tar.addfile(info, io.BytesIO(data))
        add("Dockerfile", ("\n".join(lines) + "\n").encode())
        for rel in files:
            add(f"agent/{rel}", (Path(agent_root) / rel).read_bytes(), 0o755 if
                rel.endswith(".sh") else 0o644)
    buffer.seek(0)
    return buffer


def ensure_run_image(client, bundle_root: Path, agent_root: Path | None,
                     report: Report = print) -> Built:
    """The image a run's container starts from: the task image plus the agent layer, tagged by
    both digests; built once, reused by every run of the same task and agent bundles."""
    with build_lock():
        return _ensure_run_image(client, bundle_root, agent_root, report)


def _ensure_run_image(client, bundle_root: Path, agent_root: Path | None,
                      report: Report) -> Built:
    start = time.monotonic()
    task = ensure_task_image(client, bundle_root, report)
    tag = agent_tag(bundle_root, agent_root)
    if tag is None:
        return Built(task.tag, task.built, time.monotonic() - start, task.how, task.steps)
    agent = manifest(agent_root, "Agent")
    tools, tools_s = ensure_tools(client, agent.body if agent and isinstance(
        agent.body, AgentSpec) else AgentSpec(), report)
    if has_image(client, tag) and layer_has_tools(client, tag, tools):
        return Built(tag, task.built, time.monotonic() - start,
                     "present" if not task.built else task.how, task.steps)
    mark = time.monotonic()
    _build(client, tag, "the agent layer", fileobj=agent_context(agent_root, task.tag, tools),
           custom_context=True)
    steps = {**task.steps, "agent_layer_s": round(time.monotonic() - mark, 1)}
    if tools:
        steps["tools_s"] = round(tools_s, 1)
    return Built(tag, True, time.monotonic() - start, "built", steps)
