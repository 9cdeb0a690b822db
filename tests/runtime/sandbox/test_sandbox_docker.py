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
    kw = container_kwargs(_spec(tmp_path, gpu_ids=("0", "2"), mem_limit="16g", cpus=4), "img:1")
    assert kw["image"] == "img:1"
    vols = kw["volumes"]
    assert vols[str(tmp_path / "w")] == {"bind": "/workspace", "mode": "rw"}
    assert vols[str(tmp_path / "d")] == {"bind": "/data", "mode": "ro"}
    assert vols[str(tmp_path / "m")] == {"bind": "/model", "mode": "ro"}
    assert vols[str(tmp_path / "g.sock")]["bind"] == "/run/a2c/grader.sock"
    assert kw["network_mode"] == "none"
    assert kw["mem_limit"] == "16g" and kw["nano_cpus"] == 4_000_000_000
    (req,) = kw["device_requests"]
    assert req["DeviceIDs"] == ["0", "2"] and req["Capabilities"] == [["gpu"]]
    assert req["Driver"] == "nvidia"
    env = kw["environment"]
    assert env["A2C_GRADER_URL"] == "unix:/run/a2c/grader.sock"
    assert env["A2C_DATA_DIR"] == "/data" and env["A2C_TOKEN"] == "t"
    assert kw["read_only"] and kw["init"] and kw["working_dir"] == "/workspace"


def test_container_cuda_visible_devices_count_from_zero_without_uuids(tmp_path, monkeypatch):
    """Host GPUs 1 and 3 granted: inside, the NVIDIA runtime numbers them 0 and 1; with UUIDs
    the UUIDs themselves (they name the same device everywhere)."""
    from a2c.runtime.sandbox import gpus
    monkeypatch.setattr(gpus, "list_gpus", lambda *a, **k: [gpus.Gpu("1", "/dev/nvidia1"),
                                                            gpus.Gpu("3", "/dev/nvidia3")])
    env = container_kwargs(_spec(tmp_path, gpu_ids=("1", "3")), "img")["environment"]
    assert env["CUDA_VISIBLE_DEVICES"] == "0,1"
    monkeypatch.setattr(gpus, "list_gpus", lambda *a, **k: [
        gpus.Gpu("1", "/dev/nvidia1", uuid="GPU-aaa"), gpus.Gpu("3", "/dev/nvidia3", uuid="GPU-bbb")])
    env = container_kwargs(_spec(tmp_path, gpu_ids=("1", "3")), "img")["environment"]
    assert env["CUDA_VISIBLE_DEVICES"] == "GPU-aaa,GPU-bbb"


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
    """The engine's images API, in memory: what is present, what was built with which args."""

    def __init__(self, present: set[str]):
        self.present, self.built, self.pulls = present, [], []

    def get(self, tag):
        if tag not in self.present:
            raise LookupError(tag)
        return tag

    def pull(self, ref):
        self.pulls.append(ref)
        raise RuntimeError("no registry")

    def build(self, tag, **kwargs):
        self.built.append((tag, kwargs.get("buildargs"), kwargs.get("network_mode")))
        self.present.add(tag)


def _backend(present: set[str]) -> DockerBackend:
    backend = object.__new__(DockerBackend)   # no engine: a stand-in client
    backend.client = type("Client", (), {})()
    backend.client.images = _Images(present)
    backend.build, backend.built, backend.report = True, None, lambda _: None
    return backend


def _task_bundle(tmp_path: Path, digest: str = "5b" * 32) -> Path:
    root = _bundle(tmp_path, digest=digest)
    manifest = json.loads((root / "bundle.json").read_text())
    manifest["task"] = {"environment": {"base_image": "python:3.11@sha256:" + "0" * 64,
                                        "packages": ["torch==2.13.0"]}}
    (root / "bundle.json").write_text(json.dumps(manifest))
    return root


def test_an_image_with_the_digest_tag_is_reused(tmp_path, monkeypatch):
    from a2c.runtime.sandbox import docker_images
    made = []
    monkeypatch.setattr(docker_images, "make_base", lambda client, reqs, report: made.append(
        reqs) or docker_images.Built("a2c-base:offline", True, 1.0))
    backend = _backend(set())
    spec = _spec(tmp_path, bundle_root=_task_bundle(tmp_path))
    assert backend.build_image(spec) == image_tag(spec) == f"a2c-arith:{'5b' * 32}"
    backend.built = None
    assert backend.build_image(spec) == image_tag(spec)
    # built once (on the offline base: the pinned one cannot be pulled), then reused
    assert backend.client.images.built == [(image_tag(spec), {"A2C_BASE_IMAGE": "a2c-base:offline"},
                                            "host")]
    assert made == [["torch==2.13.0"]] and len(backend.client.images.pulls) == 1
    # a per-run tag (no manifest) is never taken for a cached build
    no_manifest = _spec(tmp_path, bundle_root=tmp_path / "plain")
    backend.build_image(no_manifest)
    backend.build_image(no_manifest)
    assert [b[0] for b in backend.client.images.built].count("a2c-abc:latest") == 2


def test_a_pinned_base_that_is_present_is_used_as_is(tmp_path):
    root = _task_bundle(tmp_path)
    backend = _backend({"python:3.11@sha256:" + "0" * 64})
    backend.build_image(_spec(tmp_path, bundle_root=root))
    ((_, buildargs, network),) = backend.client.images.built
    assert buildargs == {} and network == "host"      # the Dockerfile's own ARG default


def test_the_agent_layer_is_tagged_by_both_digests(tmp_path):
    import tarfile

    from scripted_agents import make_agent

    from a2c.runtime.sandbox.docker_agent_layer import agent_context
    from a2c.runtime.sandbox.docker_images import agent_tag
    root = _task_bundle(tmp_path)
    agent = make_agent(tmp_path, "probe", "echo hi\n")
    tag = agent_tag(root, agent)
    digest = json.loads((agent / "agent.json").read_text())["digest"]
    assert tag == f"a2c-arith-probe:{'5b' * 6}-{digest[:12]}"
    spec = _spec(tmp_path, bundle_root=root, extra_ro={"/run/a2c/agent": agent})
    assert image_tag(spec) == tag
    (agent / "prompt.rendered.md").write_text("per run")       # never baked in
    names = tarfile.open(fileobj=agent_context(agent, "a2c-arith:x")).getnames()
    assert sorted(names) == ["Dockerfile", "agent/launch.sh", "agent/prompt.md"]


def test_base_tags_are_keyed_by_requirements():
    from a2c.runtime.sandbox.docker_images import base_tag, install_script
    assert base_tag(["a==1", "b==2"]) == base_tag(["b==2", "a==1"]) != base_tag(["a==1"])
    script = install_script(["torch==2.13.0"])
    assert "python3 -m venv /opt/a2c/python" in script
    assert "--no-index --find-links /wheels" in script and "torch==2.13.0" in script


def test_no_mmdebstrap_says_how_to_get_it(monkeypatch):
    from a2c.runtime.sandbox import docker_images
    monkeypatch.setattr(docker_images.shutil, "which", lambda _: None)
    monkeypatch.setattr(docker_images, "has_image", lambda client, tag: False)
    with pytest.raises(RunError, match="mmdebstrap is not installed.*apt-get install mmdebstrap"):
        docker_images.make_rootfs(object(), report=lambda _: None)


def test_a_failed_pip_resolution_says_which_requirements(monkeypatch, tmp_path):
    import subprocess

    from a2c.runtime.sandbox import docker_images
    monkeypatch.setenv("A2C_IMAGE_CACHE", str(tmp_path))
    failed = subprocess.CompletedProcess([], 1, "", "ERROR: No matching distribution found for "
                                         "a2c-nonexistent-package==0.0.0\n")
    monkeypatch.setattr(docker_images.subprocess, "run", lambda *a, **k: failed)
    with pytest.raises(RunError, match="could not get the bundle's requirements.*nonexistent"):
        docker_images.wheelhouse(["a2c-nonexistent-package==0.0.0"], report=lambda _: None)


def test_limits_library_and_environment(tmp_path):
    kw = container_kwargs(_spec(tmp_path, mem_limit="256m", pids=64), "img",
                          library=tmp_path / "lib")
    assert kw["mem_limit"] == kw["memswap_limit"] == "256m" and kw["pids_limit"] == 64
    assert kw["volumes"][str(tmp_path / "lib")] == {"bind": "/opt/a2c/lib", "mode": "ro"}
    env = kw["environment"]
    assert env["PYTHONPATH"] == "/opt/a2c/lib" and "PATH" not in env and "VIRTUAL_ENV" not in env
    assert env["HOME"] == "/tmp" and env["HF_HUB_OFFLINE"] == "1"
    assert container_kwargs(_spec(tmp_path), "img")["pids_limit"] == 4096


def test_the_staged_library_is_the_agent_view(tmp_path):
    from a2c.runtime.sandbox.docker_container import stage_agent_library
    lib = stage_agent_library(tmp_path / "lib")
    files = {str(p.relative_to(lib)) for p in lib.rglob("*") if p.is_file()}
    assert "a2c/agents/reference/sft.py" in files and "a2c/cli/main.py" not in files
    assert "a2c/runtime/grader_service/client.py" in files
    assert (lib / "a2c/runtime/grader_service/__init__.py").read_text() == ""
    assert {f for f in files if f.startswith("a2c/runtime/grader_service/")} == {
        "a2c/runtime/grader_service/client.py", "a2c/runtime/grader_service/__init__.py"}
    for hidden in ("a2c/compiler", "a2c/specs", "a2c/templates", "a2c/analysis",
                   "a2c/runtime/driver_gateway", "a2c/runtime/run"):
        assert not (lib / hidden).exists(), hidden
    assert not any("__pycache__" in f for f in files)


def test_exit_cause_names_the_memory_limit():
    from a2c.runtime.sandbox.docker_container import exit_cause
    assert "memory limit (256m)" in exit_cause({"OOMKilled": True, "ExitCode": 137}, "256m")
    assert exit_cause({"OOMKilled": False, "ExitCode": 137}, None) == "killed by signal 9"
    assert exit_cause({"OOMKilled": False, "ExitCode": 1}, None) is None


class _ExitedContainer:
    """A container that ended with SIGKILL, whose OOM kill the engine records late (or never)."""

    id = "c0ffee"
    status = "exited"

    def __init__(self, oom_event: bool, oom_after_reloads: int | None = None):
        self.attrs = {"State": {"ExitCode": 137, "OOMKilled": False}}
        self.reloads, self.oom_after = 0, oom_after_reloads
        self.client = self
        self.oom_event = oom_event

    def reload(self):
        self.reloads += 1
        if self.oom_after is not None and self.reloads > self.oom_after:
            self.attrs["State"]["OOMKilled"] = True

    def events(self, **kw):
        assert kw["filters"] == {"container": "c0ffee", "event": "oom"}
        return iter([{"status": "oom"}] if self.oom_event else [])

    def logs(self, **kw):
        return iter([])


@pytest.mark.parametrize("container, stopped, cause", [
    (_ExitedContainer(oom_event=True), False, "out of memory"),          # the engine's event
    (_ExitedContainer(False, oom_after_reloads=2), False, "out of memory"),   # state, late
    (_ExitedContainer(oom_event=False), False, "killed by signal 9"),     # a kill, not memory
    (_ExitedContainer(oom_event=True), True, "killed by signal 9"),       # our own stop
])
def test_an_oom_kill_the_engine_records_after_the_exit_is_still_named(tmp_path, monkeypatch,
                                                                        container, stopped, cause):
    from a2c.runtime.sandbox import docker_container
    monkeypatch.setattr(docker_container, "OOM_SETTLE_S", 0.3)
    proc = docker_container.DockerProcess(container, tmp_path / "agent.log", "128m")
    proc._stopping = stopped
    assert proc.poll() == 137
    assert proc.exit_cause().startswith(cause), proc.exit_cause()


def test_budget_limits_resolve_and_reach_the_sandbox_spec():
    from a2c.compiler.resolve import sandbox_limits as resolved
    from a2c.contracts.budget import Budget
    from a2c.runtime.run.agent import spec_limits
    budget = resolved({"memory": "2g", "cpus": 1.5, "pids": 256, "disk": "50M"})
    assert budget == {"memory_mb": 2048, "cpus": 1.5, "pids": 256, "disk_mb": 50}
    assert resolved({}) == {}
    assert spec_limits(Budget.from_dict(budget)) == {"mem_limit": "2048m", "cpus": 1.5,
                                                     "pids": 256, "disk_limit": "50m"}
    # a task without budget.disk: the default (200 GiB), applied by the runtime, not the bundle
    assert spec_limits(Budget()) == {"disk_limit": f"{200 * 1024}m"}
    assert resolved({"disk": "1T"}) == {"disk_mb": 1024 ** 2}


def test_bundle_dockerfile_takes_the_base_as_a_build_argument():
    from a2c.paths import project_root
    text = (project_root() / "generated" / "arith" / "Dockerfile").read_text()
    arg = next(line for line in text.splitlines() if line.startswith("ARG A2C_BASE_IMAGE="))
    pinned = json.loads((project_root() / "generated" / "arith" / "bundle.json").read_text())[
        "task"]["environment"]["base_image"]
    assert arg == f"ARG A2C_BASE_IMAGE={pinned}"
    assert text.index(arg) < text.index("FROM ${A2C_BASE_IMAGE}")


def test_container_runs_as_the_unprivileged_agent_uid(tmp_path):
    """Root in a container is root on the host without userns remapping (issue 12)."""
    from a2c.runtime.sandbox.privileges import AgentIds
    kw = container_kwargs(_spec(tmp_path), "img", AgentIds(65534, 65534))
    assert kw["user"] == "65534:65534" and kw["cap_drop"] == ["ALL"]
    assert "no-new-privileges" in kw["security_opt"]


def test_images_command_without_an_engine_is_one_line(monkeypatch, capsys):
    from a2c.cli import main
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    for argv in (["images", "list"], ["images", "base", "arith"]):
        assert main(argv) != 0
        err = capsys.readouterr().err.strip()
        assert "no Docker engine is reachable" in err and "\n" not in err, err


def test_one_image_build_at_a_time_and_reentrant(tmp_path, monkeypatch):
    """A second builder waits for the first (then finds the image present); the lock is
    re-entrant within a process, so ensure_run_image -> ensure_task_image cannot deadlock."""
    import subprocess
    import sys
    import time

    from a2c.runtime.sandbox.docker_images import build_lock
    monkeypatch.setenv("A2C_IMAGE_CACHE", str(tmp_path))
    holder = subprocess.Popen(
        [sys.executable, "-c", "import time\nfrom a2c.runtime.sandbox.docker_images import "
         "build_lock\nwith build_lock():\n    print('held', flush=True)\n    time.sleep(1.5)\n"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        start = time.monotonic()
        with build_lock():
            waited = time.monotonic() - start
            with build_lock():          # re-entrant
                pass
        assert waited > 0.8, waited
    finally:
        holder.wait(timeout=10)
    assert (tmp_path / "build.lock").exists()


def test_docker_backend_takes_npm_and_pip_scaffolds_and_refuses_install_commands():
    """The agent layer installs a scaffold's npm/pip packages (docker_scaffolds.py); an agent
    whose install is a command (OpenHands' `uv tool install ... --python 3.12`) is refused
    before anything is written, with the command named and the way out."""
    import json

    from a2c.contracts.spec import AgentSpec, TaskSpec
    from a2c.errors import RunError
    from a2c.paths import project_root
    from a2c.runtime.run import RunOptions
    from a2c.runtime.run.prepare import _check_task_and_agent
    gen = project_root() / "generated"
    task = TaskSpec.from_dict(json.loads((gen / "arith" / "bundle.json").read_text())["task"])

    def check(opts, name):
        agent = json.loads((gen / "agents" / name / "agent.json").read_text())["agent"]
        _check_task_and_agent(opts, task, AgentSpec.from_dict(agent))
    for name in ("claude-code", "codex", "gemini-cli", "opencode", "mini-swe-agent", "ref-sft"):
        check(RunOptions(bundle="arith", agent=name, backend="docker",
                         driver="scripted:sft-recipe"), name)
    opts = RunOptions(bundle="arith", agent="openhands", backend="docker",
                      driver="scripted:sft-recipe")
    with pytest.raises(RunError, match=r"openhands: the docker backend does not run install "
                                       r"commands \(.*uv tool install openhands==1\.16\.0.*"
                                       r"--backend local"):
        check(opts, "openhands")
