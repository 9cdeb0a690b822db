"""One vLLM driver server shared by the runs of one node (a sweep's trials): started by the first
run that needs it, attached to by the others, stopped when the last one leaves.

A sweep of scaffolds × tasks × seeds on one open-weight driver would otherwise load the same
weights once per trial (minutes each for a large model, and the GPU memory of one copy per trial
in flight). Runs given the same folder (`a2c run --share-driver-server DIR`; `a2c sweep` gives
its trials `RUNS/.sweep/driver-servers`) and the same server plan (model, weights' digest,
flags, GPUs, seed: `server_key`) share one server, kept under `DIR/<host>/<key>/`:

- `registry.lock`: an exclusive flock around every start, attach and leave, so two runs never
  start the same server twice and a leaving run never stops one another run is attaching to;
- `leases/<run id>`: each run holds an exclusive flock on its own lease for as long as it uses
  the server. The kernel drops the lock when the run's process dies, however it dies, so a
  crashed run never keeps a server alive: a lease whose lock can be taken is stale;
- `server.json`: the server's pid (its own session: the group id), the pid's start time (a
  recycled pid is never signalled), its URL and what the record says of it.

The server outlives the run that started it (its own session, not a child the run waits for);
the last run to leave stops its process group, unless the folder is held (`SweepHold`, on
`DIR/<host>/hold`): `a2c sweep` holds it while it runs, so trials run one after another reuse
the server instead of each loading the weights again, and stops what is idle when it ends
(`stop_idle`). Per host: the folder may sit on a file system several nodes share, and a
loopback server serves only its own node (on a node other than the sweep's, the last trial in
flight there stops it).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import signal
import socket
import time
from dataclasses import replace
from pathlib import Path

from a2c.canonical import canonical_json
from a2c.contracts.driver_server import ServerPlan, SharedServerState
from a2c.errors import A2CError, RunError
from a2c.fsutil import private_dir

STOP_GRACE_S = 15.0


def server_key(plan: ServerPlan) -> str:
    """The share's key: a digest of what the server is (`ServerPlan.identity`)."""
    return hashlib.sha256(canonical_json(plan.identity())).hexdigest()[:16]


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (/proc/PID/stat field 22); None when
    there is no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def stop_group(pid: int, started: str | None, grace: float = STOP_GRACE_S) -> None:
    """SIGTERM to the server's process group, SIGKILL after `grace` s; nothing when the pid is
    no longer the process that was started (gone, or recycled)."""
    now = _start_time(pid)
    if now is not None and now != started:     # the pid now names another process
        return
    if now is None and not _group_alive(pid):  # leader and group gone (a live group's id is
        return                                 # never handed to another process)
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                os.waitpid(pid, os.WNOHANG)   # reaped here when this process started it
            except ChildProcessError:
                pass
            if not _group_alive(pid):
                return
            time.sleep(0.1)


def _private_folder(folder: Path) -> Path:
    """The share's folders are ours alone: server.json names the URL every attaching run's
    gateway forwards to and meters from, so a folder another local user made or can write in
    would let them serve (and count) in the server's place."""
    try:
        return private_dir(folder, ours=True)
    except A2CError as exc:
        raise RunError(f"--share-driver-server: {exc}") from None


def host_dir(share_dir: str | Path) -> Path:
    return Path(share_dir) / socket.gethostname()


def _held(host: Path) -> bool:
    """Whether a sweep holds the folder (a shared lock on `hold` that an exclusive try fails)."""
    path = host / "hold"
    if not path.exists():
        return False
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


class SweepHold:
    """Held for a sweep's life: servers outlive the gaps between trials, and what is idle is
    stopped when it ends."""

    def __init__(self, share_dir: str | Path):
        self.share_dir = Path(share_dir)
        self._fd: int | None = None

    def __enter__(self) -> SweepHold:
        host = _private_folder(host_dir(self.share_dir))
        self._fd = os.open(host / "hold", os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(self._fd, fcntl.LOCK_SH)
        return self

    def __exit__(self, *exc) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        stop_idle(self.share_dir)


def stop_idle(share_dir: str | Path) -> list[str]:
    """Stop every server of this host's folder that no run holds a lease on (and no sweep
    holds); the keys of those stopped."""
    host = host_dir(share_dir)
    if not host.is_dir() or _held(host):
        return []
    stopped = []
    for state_file in sorted(host.glob("*/server.json")):
        share = SharedServer.__new__(SharedServer)
        share.dir, share.key, share.run_id, share._lease_fd = state_file.parent, \
            state_file.parent.name, "", None
        lock = share._locked()
        try:
            if not share._others_alive() and share._stop():
                stopped.append(share.key)
        finally:
            os.close(lock)
    return stopped


class SharedServer:
    """This run's use of a shared server: `acquire()` attaches (or starts), `release()` leaves
    (and stops it when no other run holds a lease)."""

    def __init__(self, share_dir: str | Path, plan: ServerPlan, run_id: str):
        self.key = server_key(plan)
        self.dir = host_dir(share_dir) / self.key
        self.plan = plan
        self.run_id = run_id
        self._lease_fd: int | None = None

    @property
    def state_file(self) -> Path:
        return self.dir / "server.json"

    def _locked(self):
        _private_folder(self.dir.parent)
        _private_folder(self.dir)
        _private_folder(self.dir / "leases")
        fd = os.open(self.dir / "registry.lock", os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
        return fd

    def _read_state(self) -> SharedServerState | None:
        try:
            state = json.loads(self.state_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return SharedServerState.from_dict(state) if isinstance(state, dict) else None

    def _live_state(self) -> SharedServerState | None:
        """server.json when its server still runs and serves the model; None otherwise (a
        leftover group of a dead one is stopped first)."""
        from a2c.runtime.run.driver_server import _get_json
        state = self._read_state()
        if state is None:
            return None
        pid, started = int(state.pid or 0), state.started
        if pid and _start_time(pid) == started:
            cards = (_get_json(f"{state.url}/v1/models") or {}).get("data") or []
            if any(isinstance(c, dict) and c.get("id") == self.plan.served_model_name
                   for c in cards):
                return state
        if pid:
            stop_group(pid, started)
        self.state_file.unlink(missing_ok=True)
        return None

    def _take_lease(self) -> None:
        fd = os.open(self.dir / "leases" / self.run_id, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise RunError(f"run {self.run_id} already holds a lease on the shared driver "
                           f"server in {self.dir}") from None
        self._lease_fd = fd

    def _others_alive(self) -> list[str]:
        """The runs other than this one whose lease is still held (stale leases removed)."""
        alive = []
        for lease in sorted((self.dir / "leases").iterdir()):
            if lease.name == self.run_id:
                continue
            fd = os.open(lease, os.O_RDWR)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                alive.append(lease.name)
                continue
            finally:
                os.close(fd)
            lease.unlink(missing_ok=True)       # its run died without leaving
        return alive

    def acquire(self, start) -> SharedServerState:
        """Attach to the live server, or start one with `start(log_path) -> (server, info)`;
        returns server.json (`url`, `info`, `started_by`, whether this run `started_it`)."""
        lock = self._locked()
        try:
            self._take_lease()
            state = self._live_state()
            if state is not None:
                return replace(state, started_it=False)
            try:
                server, info = start(self.dir / "server.log")
            except BaseException:
                self._drop_lease()
                raise
            state = SharedServerState(pid=server.process.pid,
                                      started=_start_time(server.process.pid), url=info.url,
                                      info=info, started_by=self.run_id, key=self.key,
                                      plan=self.plan)
            tmp = self.state_file.with_suffix(".tmp")
            tmp.write_text(json.dumps(state.to_dict(), indent=1), encoding="utf-8")
            os.chmod(tmp, 0o600)
            os.replace(tmp, self.state_file)
            return replace(state, started_it=True)
        finally:
            os.close(lock)

    def _drop_lease(self) -> None:
        if self._lease_fd is not None:
            (self.dir / "leases" / self.run_id).unlink(missing_ok=True)
            os.close(self._lease_fd)
            self._lease_fd = None

    def _stop(self) -> bool:
        state = self._read_state()
        if state is None:
            return False
        stop_group(int(state.pid or 0), state.started)
        self.state_file.unlink(missing_ok=True)
        return True

    def release(self) -> bool:
        """Leave; stop the server when no other run holds a lease and no sweep holds the
        folder. True when it was stopped."""
        if self._lease_fd is None:
            return False
        lock = self._locked()
        try:
            self._drop_lease()
            if self._others_alive() or _held(self.dir.parent):
                return False
            return self._stop()
        finally:
            os.close(lock)
