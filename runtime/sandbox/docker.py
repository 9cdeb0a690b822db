"""The `docker` backend: the agent in a container built from its bundles.

    docker_engine.py     the client, or one RunError when no engine answers
    docker_images.py     the offline base, the task image (bundle digest), the agent layer
    docker_container.py  the container's configuration (pure), the a2c code it runs, the process

The image is made once per (task bundle digest, agent bundle digest) and reused by every run
(`prepare_image`, called by the runner before the baseline, so a build never eats the agent's
budget). The container gets the same layout as bubblewrap gives, network `none`, the agent's
unprivileged uid, and the task's memory, CPU and pids limits; its disk budget is watched from the
host (disk.py); at the deadline the whole container is stopped, and every process in it with its
pid namespace.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from a2c.errors import RunError
from a2c.runtime.sandbox import SandboxSpec
from a2c.runtime.sandbox.docker_agent_layer import ensure_run_image
from a2c.runtime.sandbox.docker_container import (
    DEFAULT_PIDS,
    LIB_DIR,
    DockerProcess,
    container_env,
    container_kwargs,
    stage_agent_library,
)
from a2c.runtime.sandbox.docker_engine import NO_ENGINE, client, engine_error
from a2c.runtime.sandbox.docker_images import (
    Built,
    agent_tag,
    has_image,
    task_tag,
)
from a2c.runtime.sandbox.local import grants
from a2c.runtime.sandbox.privileges import agent_ids, grant_agent, is_root

__all__ = ["NO_ENGINE", "DockerBackend", "DockerProcess", "container_env", "container_kwargs",
           "digest_tag", "image_tag"]

INSIDE_AGENT = "/run/a2c/agent"     # where the run's agent folder is mounted (run/agent.py)
IMAGE_RECORD = "image.json"         # RUN/logs/image.json: which image, built or reused, how long


def digest_tag(bundle_root: Path | None) -> str | None:
    """The task image's tag named by the bundle's manifest (id and digest), or None."""
    return task_tag(bundle_root)


def image_tag(spec: SandboxSpec) -> str:
    """The image a run starts from: an explicit `spec.image`, else `a2c-<task>-<agent>:...`
    (both digests), else `a2c-<task>:<digest>`, else a per-run tag (no manifest)."""
    if spec.image:
        return spec.image
    return (agent_tag(spec.bundle_root, spec.extra_ro.get(INSIDE_AGENT))
            or digest_tag(spec.bundle_root)
            or f"a2c-{(spec.marker or 'bundle')[:12]}:latest")


class DockerBackend:
    name = "docker"
    isolation = "docker"

    def __init__(self, build: bool = True, report=print):
        self.build = build
        self.report = report
        self.client = client()
        self.built: Built | None = None

    def warning(self) -> str | None:
        return None

    def prepare_image(self, bundle_root: Path, agent_root: Path | None) -> Built:
        """Make (or find) the run's image before the budget starts; say what it cost."""
        if bundle_root is None:
            raise RunError("docker backend: no bundle to build the image from")
        self.built = ensure_run_image(self.client, Path(bundle_root),
                                      Path(agent_root) if agent_root else None, self.report)
        verb = "built" if self.built.built else "reused"
        self.report(f"docker image {self.built.tag} {verb} ({self.built.seconds:.2f} s)")
        return self.built

    def build_image(self, spec: SandboxSpec) -> str:
        """The image for `spec`: prepared already, present, or built now."""
        tag = image_tag(spec)
        if self.built is not None and self.built.tag == tag:
            return tag
        if spec.image or not self.build:
            return tag
        if spec.bundle_root is None:
            raise RunError("docker backend: no bundle to build the image from")
        if digest_tag(spec.bundle_root) is None:   # no manifest: a per-run image, built each time
            from a2c.runtime.sandbox.docker_images import _build
            _build(self.client, tag, "the bundle image", path=str(spec.bundle_root))
            return tag
        return self.prepare_image(spec.bundle_root, spec.extra_ro.get(INSIDE_AGENT)).tag

    def _record(self, spec: SandboxSpec, tag: str) -> None:
        built = self.built
        record = {"image": tag, "built": bool(built and built.built and built.tag == tag),
                  "seconds": round(built.seconds, 3) if built else None,
                  "how": built.how if built else None, "steps": built.steps if built else {}}
        try:
            (spec.log_path.parent / IMAGE_RECORD).write_text(
                json.dumps(record, indent=2, sort_keys=True) + "\n")
        except OSError:
            pass

    def start(self, spec: SandboxSpec) -> DockerProcess:
        tag = self.build_image(spec)
        if not has_image(self.client, tag):
            raise RunError(f"docker backend: the image {tag} does not exist (a2c images build)")
        ids = agent_ids()
        spec.log_path.parent.mkdir(parents=True, exist_ok=True)
        if spec.command_log:
            spec.command_log.touch(exist_ok=True)
        if spec.agent_tmp:   # made here, not by the engine's bind (root-owned, unwritable)
            spec.agent_tmp.mkdir(mode=0o700, exist_ok=True)
            os.chmod(spec.agent_tmp, 0o700)
        if is_root():   # what the agent writes, as for the local backend
            grant_agent(ids, **grants(spec))
        library = stage_agent_library(spec.workspace.parent / LIB_DIR)
        self._record(spec, tag)
        try:
            container = self.client.containers.run(**container_kwargs(spec, tag, ids, library))
        except Exception as exc:  # noqa: BLE001 - the engine's reason, one line
            raise RunError(f"docker backend: could not start the container: "
                           f"{engine_error(exc)}") from exc
        proc = DockerProcess(container, spec.log_path, spec.mem_limit,
                             int(spec.pids or DEFAULT_PIDS))
        proc.watch_disk(spec)
        return proc
