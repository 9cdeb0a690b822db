"""The docker backend's container configuration (pure) and its one-line error without an engine."""

from __future__ import annotations

from pathlib import Path

import pytest

from a2c.errors import RunError
from a2c.runtime.sandbox import SandboxSpec, get_backend
from a2c.runtime.sandbox.docker import container_kwargs


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
