"""Which GPUs a run's agent and its grader get, held apart and locked for the run's life.

The agent's: `--gpus 0,1` (RunOptions.gpus; `none` for no GPU whatever the task asks), else the
task's `budget.gpus` N, chosen among this machine's free devices (runtime/sandbox/gpus.py: not
held by another a2c run here, not the grader's). A sweep passes the ids Ray assigned.

The grader's: `--grader-gpus` (RunOptions.grader_gpus; `none`: evaluations on CPU), else one free
device that is not the agent's when the agent has GPUs (as a sweep's `eval_gpus` default), else
none. The two sets never overlap: the agent never sees the grader's devices.

The driver's (a `--driver vllm/MODEL` server a2c starts): `--driver-gpus` (RunOptions.driver_gpus;
`none`: vLLM's CPU build), else one free device that is neither the agent's nor the grader's
where the machine has GPUs, else none. Kept apart from both, the same way.

run.json records `gpus: {"agent": [...], "grader": [...]}` (host indices; `driver` too for a
served driver). A run asking for
more GPUs than the machine has fails before anything is written (`PreflightError`, exit 2).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from a2c.contracts.run_info import GpuPlacement
from a2c.errors import RunError
from a2c.runtime.run.scaffold import PreflightError
from a2c.runtime.sandbox import gpus as gpu_mod

_LEASES: dict[str, gpu_mod.GpuLease] = {}   # run dir -> the locks this process holds for it


def _ids(text: str | None, flag: str, found: list[gpu_mod.Gpu]) -> tuple[str, ...] | None:
    """Parsed ids (UUIDs, as Ray may report, mapped to indices); None when not given."""
    if text is None:
        return None
    by_uuid = {g.uuid: g.index for g in found if g.uuid}
    parts = [by_uuid.get(p.strip(), p.strip()) for p in str(text).split(",")]
    ids = gpu_mod.parse_ids(",".join(parts), flag)
    try:
        gpu_mod.check_present(ids, found, flag)
    except RunError as exc:
        raise PreflightError(str(exc)) from None
    return ids


def assign(gpus: str | None, grader_gpus: str | None, budget_gpus: int,
           found: list[gpu_mod.Gpu] | None = None,
           lease: gpu_mod.GpuLease | None = None, *, driver_gpus: str | None = None,
           served_driver: bool = False) -> tuple[GpuPlacement, gpu_mod.GpuLease]:
    """(the devices of the agent, the grader and a served driver, the lease holding them), or a
    one-line error."""
    found = gpu_mod.list_gpus() if found is None else found
    if driver_gpus is not None and not served_driver:
        raise RunError(f"--driver-gpus {driver_gpus}: only a driver a2c serves itself "
                       "(--driver vllm/MODEL) has GPUs of its own")
    agent = _ids(gpus, "--gpus", found)
    grader = _ids(grader_gpus, "--grader-gpus", found)
    driver = _ids(driver_gpus, "--driver-gpus", found)
    for flag, other in (("--gpus", agent), ("--grader-gpus", grader)):
        if driver and other and set(driver) & set(other):
            raise RunError(f"--driver-gpus {','.join(driver)} and {flag} {','.join(other)} "
                           "share a device: the driver's server has GPUs of its own")
    want = int(budget_gpus or 0)
    if agent is None and want > len(found):
        raise PreflightError(
            f"the task asks for {want} GPU(s) (budget.gpus) and this machine has {len(found)}"
            + (f" ({', '.join(g.node for g in found)})" if found else " (no /dev/nvidia*)")
            + "; pass --gpus none to run without")
    if agent and grader and set(agent) & set(grader):
        raise RunError(f"--gpus {','.join(agent)} and --grader-gpus {','.join(grader)} share a "
                       "device: the grader's GPUs are never the agent's")
    lease = lease or gpu_mod.GpuLease()
    try:
        if driver:
            lease.take(driver, "--driver-gpus")
        if grader:
            lease.take(grader, "--grader-gpus")
        if agent is None:
            agent = lease.choose(want, found, exclude=(*(grader or ()), *(driver or ()))) \
                if want else ()
            if want and not agent:
                raise PreflightError(f"the task asks for {want} GPU(s) (budget.gpus): fewer are "
                                     f"free on this machine (the others are held by a2c runs "
                                     f"or by this run's grader; see {lease.directory})")
        else:
            lease.take(agent, "--gpus")
        if grader is None:
            grader = lease.choose(1, found, exclude=(*agent, *(driver or ()))) if agent else ()
        if served_driver and driver is None:
            driver = lease.choose(1, found, exclude=(*agent, *grader)) if found else ()
            if found and not driver:
                raise PreflightError("the driver's vLLM server needs a GPU and none is free "
                                     "beside the agent's and the grader's; pass --driver-gpus "
                                     "IDS (or none for vLLM's CPU build)")
    except BaseException:
        lease.release()
        raise
    return GpuPlacement(agent=tuple(agent), grader=tuple(grader),
                        driver=tuple(driver or ()) if served_driver else None), lease


def register(run_dir: Path, lease: gpu_mod.GpuLease) -> None:
    _LEASES[str(Path(run_dir).resolve())] = lease


def release(run_dir: Path) -> None:
    lease = _LEASES.pop(str(Path(run_dir).resolve()), None)
    if lease is not None:
        lease.release()


@contextlib.contextmanager
def held(run_dir: Path, run):
    """The run's recorded GPUs locked while the body runs: the lease prepare took in this
    process, or (a resumed run) the same ids taken again."""
    key = str(Path(run_dir).resolve())
    record = run.gpus or GpuPlacement()
    if key not in _LEASES and record.any:
        lease = gpu_mod.GpuLease()
        try:
            lease.take(record.grader, "--grader-gpus")
            lease.take(record.agent, "--gpus")
            lease.take(record.driver or (), "--driver-gpus")
        except BaseException:
            lease.release()
            raise
        _LEASES[key] = lease
    try:
        yield
    finally:
        release(run_dir)


def grader_visible(run) -> str | None:
    """CUDA_VISIBLE_DEVICES for the grader's evaluations: its devices ("" for none), or None for a
    run recorded before GPUs were assigned (the environment's, as before)."""
    if run.gpus is None:
        return None
    return gpu_mod.visible_devices(run.gpus.grader)


def grader_env(run) -> dict[str, str] | None:
    """The grader service's environment: the runtime's, CUDA_VISIBLE_DEVICES its own devices."""
    visible = grader_visible(run)
    if visible is None:
        return None
    return {**os.environ, "CUDA_VISIBLE_DEVICES": visible}


@contextlib.contextmanager
def grader_devices(run):
    """For an evaluation the runtime runs in its own process (the baseline): the environment
    names the grader's devices while it runs (the evaluator and its box read it)."""
    visible = grader_visible(run)
    if visible is None:
        yield
        return
    before = os.environ.get("CUDA_VISIBLE_DEVICES")
    os.environ["CUDA_VISIBLE_DEVICES"] = visible
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("CUDA_VISIBLE_DEVICES", None)
        else:
            os.environ["CUDA_VISIBLE_DEVICES"] = before
