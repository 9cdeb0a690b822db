"""GPUs in the local sandbox (issue 24): a run's agent gets exactly its devices' nodes and the
driver's control nodes, CUDA_VISIBLE_DEVICES names them, the grader's devices are never inside,
the evaluator box binds only the grader's, and a run asking for GPUs a machine lacks stops at
pre-flight in one line (exit 2) with nothing left behind.

Device nodes are faked as root (`mknod`, removed after): opening them fails (no driver), but a
sandbox binds and lists them like real ones."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from a2c.contracts.run_info import GpuPlacement
from a2c.errors import RunError
from a2c.runtime.run import devices
from a2c.runtime.run.scaffold import PreflightError
from a2c.runtime.sandbox import SandboxSpec, gpus
from a2c.runtime.sandbox.local import LocalBackend, bwrap_works

ROOT = os.geteuid() == 0
HAVE_BWRAP = bwrap_works()
FAKE_NODES = {"nvidia0": (195, 0), "nvidia1": (195, 1), "nvidiactl": (195, 255),
              "nvidia-uvm": (510, 0)}


@pytest.fixture
def fake_gpus():
    """/dev/nvidia0, /dev/nvidia1 and the control nodes, made here and removed after."""
    if not ROOT:
        pytest.skip("making device nodes needs root")
    made = []
    try:
        for name, (major, minor) in FAKE_NODES.items():
            node = Path("/dev") / name
            if not node.exists():
                os.mknod(node, 0o666 | 0o020000, os.makedev(major, minor))
                made.append(node)
    except OSError as exc:
        for node in made:
            node.unlink(missing_ok=True)
        pytest.skip(f"mknod failed: {exc}")
    yield made
    for node in made:
        node.unlink(missing_ok=True)


def _fake_tree(tmp_path: Path) -> tuple[Path, Path]:
    dev, proc = tmp_path / "dev", tmp_path / "gpus"
    dev.mkdir()
    for name in ("nvidia0", "nvidia1", "nvidia3", "nvidiactl", "nvidia-uvm", "nvidia-caps"):
        (dev / name).mkdir() if name == "nvidia-caps" else (dev / name).write_text("")
    for minor, bus in (("0", "0000:3b:00.0"), ("1", "0000:5e:00.0")):
        (proc / bus).mkdir(parents=True)
        (proc / bus / "information").write_text(
            f"Model: \t\t NVIDIA H100\nIRQ:   42\nGPU UUID: \t GPU-aaaa-{minor}\n"
            f"Device Minor: \t {minor}\nBus Location: \t {bus}\n")
    return dev, proc


def test_devices_names_and_uuids_come_from_dev_and_the_driver(tmp_path):
    dev, proc = _fake_tree(tmp_path)
    found = gpus.list_gpus(dev, proc)
    assert [g.index for g in found] == ["0", "1", "3"]
    assert found[1].name == "NVIDIA H100" and found[1].uuid == "GPU-aaaa-1"
    assert found[2].uuid is None and found[2].node == str(dev / "nvidia3")
    assert gpus.control_nodes(dev) == [str(dev / "nvidiactl"), str(dev / "nvidia-uvm"),
                                       str(dev / "nvidia-caps")]
    # UUIDs where all are known (CUDA's order need not be the minors'), else the indices
    assert gpus.visible_devices(("1", "0"), found) == "GPU-aaaa-1,GPU-aaaa-0"
    assert gpus.visible_devices(("1", "3"), found) == "1,3"
    assert gpus.nodes_for_visible("GPU-aaaa-1", found) == [str(dev / "nvidia1")]
    assert gpus.nodes_for_visible("", found) == []
    assert len(gpus.nodes_for_visible(None, found)) == 3
    argv = gpus.bwrap_args(("1",), dev)
    binds = [argv[i + 1] for i, a in enumerate(argv) if a == "--dev-bind"]
    assert binds == [str(dev / n) for n in ("nvidia1", "nvidiactl", "nvidia-uvm", "nvidia-caps")]
    assert gpus.bwrap_args((), dev) == []


@pytest.mark.parametrize("text, why", [("0,x", "expected device indices"),
                                       ("1,1", "named twice"), ("-1", "expected")])
def test_bad_gpu_ids_are_refused_in_one_line(text, why):
    with pytest.raises(RunError, match=why):
        gpus.parse_ids(text)


def test_assignment_keeps_agent_and_grader_apart_and_locks_devices(tmp_path):
    dev, proc = _fake_tree(tmp_path)
    found = gpus.list_gpus(dev, proc)
    locks = tmp_path / "locks"
    locks.mkdir()
    first, lease = devices.assign(None, None, 1, found, gpus.GpuLease(locks))
    assert first == GpuPlacement(agent=("0",), grader=("1",))
    # another run on this machine gets the devices the first does not hold
    second, lease2 = devices.assign(None, "none", 1, found, gpus.GpuLease(locks))
    assert second == GpuPlacement(agent=("3",), grader=())
    with pytest.raises(PreflightError, match="fewer are free"):
        devices.assign(None, None, 1, found, gpus.GpuLease(locks))
    with pytest.raises(RunError, match="in use by another a2c run"):
        devices.assign("0", "none", 0, found, gpus.GpuLease(locks))
    lease.release()
    assert devices.assign("0", "1", 0, found, gpus.GpuLease(locks))[0] == \
        GpuPlacement(agent=("0",), grader=("1",))
    lease2.release()
    with pytest.raises(RunError, match="share a device"):
        devices.assign("1", "1", 0, found, gpus.GpuLease(locks))
    with pytest.raises(PreflightError, match="GPU 7 is not on this machine"):
        devices.assign("7", None, 0, found, gpus.GpuLease(locks))
    assert devices.assign("none", None, 4, found, gpus.GpuLease(locks))[0] == \
        GpuPlacement(agent=(), grader=())


def test_more_gpus_than_the_machine_has_is_a_preflight_error():
    with pytest.raises(PreflightError, match=r"asks for 2 GPU\(s\).*has 0 \(no /dev/nvidia\*\)"):
        devices.assign(None, None, 2, [], gpus.GpuLease(Path("/nonexistent")))


@pytest.mark.skipif(bool(gpus.list_gpus()), reason="this machine has GPUs")
def test_cli_budget_gpus_without_devices_exits_2_and_leaves_nothing(tmp_path):
    from a2c.paths import project_root
    agent = tmp_path / "agents"
    from scripted_agents import make_agent
    agent = make_agent(tmp_path, "idle", "true\n")
    runs = tmp_path / "runs"
    proc = subprocess.run([sys.executable, "-m", "a2c.cli", "run", "humaneval", "--agent",
                           str(agent), "--model", "tiny", "--runs-dir", str(runs)],
                          capture_output=True, text=True, timeout=120, cwd=project_root())
    assert proc.returncode == 2, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "budget.gpus" in lines[0] and "--gpus none" in lines[0], lines
    assert not runs.exists() or list(runs.iterdir()) == []


def _spec(tmp_path: Path, command: list[str], gpu_ids=()) -> SandboxSpec:
    run = tmp_path / "run"
    for name in ("workspace", "data", "model", "logs"):
        (run / name).mkdir(parents=True, exist_ok=True)
    return SandboxSpec(command=command, workspace=run / "workspace", data_dir=run / "data",
                       model_dir=run / "model", socket_path=None, log_path=run / "logs" / "a.log",
                       command_log=run / "logs" / "commands.log", marker=f"gpu-{os.getpid()}",
                       agent_tmp=run / "agent-tmp", gpu_ids=tuple(gpu_ids))


LIST = "ls /dev | grep nvidia | sort | tr '\\n' ' '; echo; echo CVD=${CUDA_VISIBLE_DEVICES-unset}"


@pytest.mark.skipif(not HAVE_BWRAP, reason="bubblewrap not usable here")
def test_the_sandbox_binds_exactly_its_gpus(tmp_path, fake_gpus):
    spec = _spec(tmp_path, ["sh", "-c", LIST], gpu_ids=("1",))
    proc = LocalBackend().start(spec)
    assert proc.wait(60) == 0, spec.log_path.read_text()
    nodes, cvd = spec.log_path.read_text().splitlines()[:2]
    controls = {Path(n).name for n in gpus.control_nodes()}
    assert set(nodes.split()) == {"nvidia1"} | controls, nodes
    assert "nvidia0" not in nodes.split()
    assert cvd == "CVD=" + gpus.visible_devices(("1",))
    # without GPUs: no NVIDIA node at all, no CUDA_VISIBLE_DEVICES
    spec = _spec(tmp_path / "none", ["sh", "-c", LIST])
    proc = LocalBackend().start(spec)
    assert proc.wait(60) == 0
    assert spec.log_path.read_text().splitlines()[:2] == ["", "CVD=unset"]


def test_the_evaluator_box_binds_only_the_graders(tmp_path, fake_gpus):
    from a2c.runtime.sandbox import evaluator_box
    from a2c.runtime.sandbox.privileges import AgentIds
    if not (evaluator_box.bwrap_path() and Path("/usr/bin/setpriv").exists()):
        pytest.skip("bubblewrap and setpriv are needed to build the box's command line")

    def bound(visible):
        argv = evaluator_box.box_argv(["true"], model=tmp_path, grader_cfg=tmp_path / "g.json",
                                      heldout=tmp_path / "h.jsonl", box_dir=tmp_path / "box",
                                      ids=AgentIds(65533, 65533), python_dirs=[],
                                      visible=visible)
        return {argv[i + 1] for i, a in enumerate(argv) if a == "--dev-bind"}
    assert "/dev/nvidia0" in bound("0") and "/dev/nvidia1" not in bound("0")
    assert "/dev/nvidiactl" in bound("0")
    assert not any("nvidia" in n for n in bound(""))
    assert {"/dev/nvidia0", "/dev/nvidia1"} <= bound(None)   # unset: every GPU, as before


@pytest.mark.slow
@pytest.mark.skipif(not HAVE_BWRAP, reason="bubblewrap not usable here")
def test_a_run_with_gpus_1_and_grader_gpus_0(tmp_path, fake_gpus):
    """A real run (arith, tiny model, a shell agent): the agent sees /dev/nvidia1 and the
    control nodes, never the grader's /dev/nvidia0; run.json records both; the grader service
    runs with CUDA_VISIBLE_DEVICES naming its own device."""
    import json

    from scripted_agents import make_agent

    from a2c.runtime import run as run_mod
    agent = make_agent(tmp_path, "lister", LIST + "\n")
    opts = run_mod.RunOptions(bundle="arith", agent=str(agent), model="tiny", budget="60s",
                              runs_dir=tmp_path / "runs", gpus="1", grader_gpus="0")
    ctx = run_mod.prepare(opts, report=lambda _: None)
    assert ctx.run.gpus == GpuPlacement(agent=("1",), grader=("0",))
    with pytest.raises(RunError, match="in use by another a2c run"):   # held for the run
        devices.assign("1", "none", 0)
    run_mod.execute(ctx, report=lambda _: None)
    log = (ctx.run_dir / "logs" / "agent.log").read_text().splitlines()
    controls = {Path(n).name for n in gpus.control_nodes()}
    assert set(log[0].split()) == {"nvidia1"} | controls, log
    assert log[1] == "CVD=" + gpus.visible_devices(("1",))
    assert json.loads((ctx.run_dir / "run.json").read_text())["gpus"] == \
        {"agent": ["1"], "grader": ["0"]}
    assert devices.grader_env(ctx.run)["CUDA_VISIBLE_DEVICES"] == gpus.visible_devices(("0",))
    lease = gpus.GpuLease()   # released at the run's end
    lease.take(("0", "1"))
    lease.release()
