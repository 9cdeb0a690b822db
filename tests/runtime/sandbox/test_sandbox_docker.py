"""The docker backend's container configuration (pure) and its one-line error without an engine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from a2c.errors import RunError
from a2c.runtime.sandbox import SandboxSpec, get_backend
from a2c.runtime.sandbox.docker import DockerBackend, container_kwargs, digest_tag, image_tag


def _spec(tmp_path: Path, **kw) -> SandboxSpec:
    return SandboxSpec(command=["bash", "/run/a2c/agent/launch.sh"], workspace=tmp_path / "w",
                       data_dir=tmp_path / "d", model_dir=tmp_path / "m",
                       socket_path=tmp_path / "g.sock", log_path=tmp_path / "agent.log",
                       command_log=tmp_path / "commands.log", env={"A2C_TOKEN": "t"},
                       marker="abc", **kw)


def test_container_kwargs_mounts_limits_network(tmp_path):
    kw = container_kwargs(_spec(tmp_path, gpus=2, mem_limit="16g", cpus=4), "img:1")
    assert kw["image"] == "img:1"
    vols = kw["volumes"]
    assert vols[str(tmp_path / "w")] == {"bind": "/workspace", "mode": "rw"}
    assert vols[str(tmp_path / "d")] == {"bind": "/data", "mode": "ro"}
    assert vols[str(tmp_path / "m")] == {"bind": "/model", "mode": "ro"}
    assert vols[str(tmp_path / "g.sock")]["bind"] == "/run/a2c/grader.sock"
    assert kw["network_mode"] == "none"
    assert kw["mem_limit"] == "16g" and kw["nano_cpus"] == 4_000_000_000
    (req,) = kw["device_requests"]
    assert req["Count"] == 2 and req["Capabilities"] == [["gpu"]]
    env = kw["environment"]
    assert env["A2C_GRADER_URL"] == "unix:/run/a2c/grader.sock"
    assert env["A2C_DATA_DIR"] == "/data" and env["A2C_TOKEN"] == "t"
    assert kw["read_only"] and kw["init"] and kw["working_dir"] == "/workspace"


def test_no_gpu_no_device_requests(tmp_path):
    kw = container_kwargs(_spec(tmp_path), "img")
    assert "device_requests" not in kw and "mem_limit" not in kw


def test_no_engine_is_one_line_error(monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    with pytest.raises(RunError) as info:
        get_backend("docker")
    message = str(info.value)
    assert "no Docker engine is reachable" in message and "\n" not in message


def _bundle(tmp_path: Path, task: str = "arith", digest: str = "5b" * 32) -> Path:
    root = tmp_path / "bundle"
    root.mkdir(exist_ok=True)
    (root / "bundle.json").write_text(json.dumps({"id": task, "kind": "Task", "digest": digest}))
    return root


def test_image_is_tagged_by_the_bundle_digest(tmp_path):
    root = _bundle(tmp_path)
    assert image_tag(_spec(tmp_path, bundle_root=root)) == f"a2c-arith:{'5b' * 32}"
    # the same bundle in another run (another marker) names the same image
    other = _spec(tmp_path, bundle_root=root)
    other.marker = "another-run"
    assert image_tag(other) == image_tag(_spec(tmp_path, bundle_root=root))
    # another digest, another image; an explicit image wins; no manifest: the run's own tag
    assert image_tag(_spec(tmp_path, bundle_root=_bundle(tmp_path, digest="0a" * 32))) \
        == f"a2c-arith:{'0a' * 32}"
    assert image_tag(_spec(tmp_path, bundle_root=root, image="mine:1")) == "mine:1"
    assert image_tag(_spec(tmp_path, bundle_root=tmp_path / "none")) == "a2c-abc:latest"
    assert digest_tag(_bundle(tmp_path, task="Web Shop", digest="ab" * 32)) \
        == f"a2c-web-shop:{'ab' * 32}"


class _Images:
    def __init__(self, present: set[str]):
        self.present, self.built = present, []

    def get(self, tag):
        if tag not in self.present:
            raise LookupError(tag)
        return tag

    def build(self, path, tag, rm):
        self.built.append(tag)
        self.present.add(tag)


def test_an_image_with_the_digest_tag_is_reused(tmp_path):
    backend = object.__new__(DockerBackend)   # no engine: a stand-in client
    backend.client = type("Client", (), {})()
    backend.client.images = _Images(set())
    spec = _spec(tmp_path, bundle_root=_bundle(tmp_path))
    assert backend.build_image(spec) == image_tag(spec)
    assert backend.build_image(spec) == image_tag(spec)
    assert backend.client.images.built == [image_tag(spec)]   # built once, then reused
    # a per-run tag (no manifest) is never taken for a cached build
    no_manifest = _spec(tmp_path, bundle_root=tmp_path / "plain")
    backend.build_image(no_manifest)
    backend.build_image(no_manifest)
    assert backend.client.images.built.count("a2c-abc:latest") == 2


def test_container_runs_as_the_unprivileged_agent_uid(tmp_path):
    """Root in a container is root on the host without userns remapping (issue 12)."""
    from a2c.runtime.sandbox.privileges import AgentIds
    kw = container_kwargs(_spec(tmp_path), "img", AgentIds(65534, 65534))
    assert kw["user"] == "65534:65534" and kw["cap_drop"] == ["ALL"]
    assert "no-new-privileges" in kw["security_opt"]
