"""NVIDIA GPUs on this machine: which exist, which device nodes a sandbox binds for them, what
CUDA_VISIBLE_DEVICES names them, and which are free (not held by another a2c run here).

A GPU is named by its host index: N of its device node `/dev/nvidiaN` (the driver's minor
number). Names and UUIDs come from `/proc/driver/nvidia/gpus/*/information` where the driver
publishes it ("Device Minor", "Model", "GPU UUID"); nvidia-smi is not needed.

CUDA_VISIBLE_DEVICES names devices by UUID where known (`visible_devices`): a plain index is
CUDA's own enumeration order (fastest first unless CUDA_DEVICE_ORDER=PCI_BUS_ID), which need not
be the order of the /dev/nvidiaN minors, and inside a sandbox that binds only some of the nodes
the indices shift. A UUID names the same device everywhere. Without a published UUID (fake nodes
in tests, an unusual driver) the host indices are used.

Free devices: a run holds a lock file per device (`lock_dir()/nvidiaN.lock`, `flock`) for its
life; a crashed run's locks go with its process.
"""

from __future__ import annotations

import fcntl
import os
import re
from dataclasses import dataclass
from pathlib import Path

from a2c.errors import RunError

DEV = Path("/dev")
PROC_GPUS = Path("/proc/driver/nvidia/gpus")
NODE = re.compile(r"^nvidia(\d+)$")
# what the driver needs besides the per-GPU node (those that exist are bound)
CONTROL_NODES = ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset")
CAPS_DIR = "nvidia-caps"


@dataclass(frozen=True)
class Gpu:
    index: str              # "1" for /dev/nvidia1
    node: str               # "/dev/nvidia1"
    name: str | None = None  # "NVIDIA H100 80GB HBM3"
    uuid: str | None = None  # "GPU-6f1c..."
    bus: str | None = None   # "0000:3b:00.0"


def _information(proc: Path) -> dict[str, dict[str, str]]:
    """{minor: {"name", "uuid", "bus"}} from the driver's per-GPU information files."""
    out: dict[str, dict[str, str]] = {}
    try:
        folders = sorted(proc.iterdir())
    except OSError:
        return out
    for folder in folders:
        try:
            text = (folder / "information").read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        fields = {}
        for line in text.splitlines():
            key, sep, value = line.partition(":")
            if sep:
                fields[key.strip().lower()] = value.strip()
        minor = fields.get("device minor")
        if minor is not None and minor.isdigit():
            out[minor] = {"name": fields.get("model"), "uuid": fields.get("gpu uuid"),
                          "bus": folder.name}
    return out


def list_gpus(dev: Path = DEV, proc: Path = PROC_GPUS) -> list[Gpu]:
    """The GPUs whose device node exists (`/dev/nvidia[0-9]*`), by index."""
    info = _information(proc)
    found = []
    try:
        names = os.listdir(dev)
    except OSError:
        return []
    for name in names:
        match = NODE.match(name)
        if match:
            extra = info.get(match[1], {})
            found.append(Gpu(match[1], str(dev / name), extra.get("name"), extra.get("uuid"),
                             extra.get("bus")))
    return sorted(found, key=lambda g: int(g.index))


def control_nodes(dev: Path = DEV) -> list[str]:
    """The driver's control nodes that exist, and /dev/nvidia-caps (MIG) where present."""
    nodes = [str(dev / n) for n in CONTROL_NODES if (dev / n).exists()]
    if (dev / CAPS_DIR).is_dir():
        nodes.append(str(dev / CAPS_DIR))
    return nodes


def parse_ids(text: str | None, flag: str = "--gpus") -> tuple[str, ...]:
    """"0,1" -> ("0", "1"); "" or "none" -> (). Duplicates and non-numbers are refused."""
    if text is None:
        return ()
    text = str(text).strip()
    if text.lower() in ("", "none"):
        return ()
    ids = [part.strip() for part in text.split(",")]
    bad = [i for i in ids if not i.isdigit()]
    if bad:
        raise RunError(f"{flag} {text}: expected device indices such as 0,1 (not {bad[0]!r})")
    ids = [str(int(i)) for i in ids]
    if len(set(ids)) != len(ids):
        raise RunError(f"{flag} {text}: a device is named twice")
    return tuple(ids)


def check_present(ids: tuple[str, ...], gpus: list[Gpu], flag: str = "--gpus") -> None:
    """Every id names a device node on this machine (one line otherwise)."""
    have = {g.index for g in gpus}
    missing = [i for i in ids if i not in have]
    if missing:
        where = ", ".join(g.node for g in gpus) or "no /dev/nvidia* device"
        raise RunError(f"{flag}: GPU {','.join(missing)} is not on this machine ({where})")


def visible_devices(ids: tuple[str, ...] | list[str], gpus: list[Gpu] | None = None) -> str:
    """CUDA_VISIBLE_DEVICES for `ids`: their UUIDs where all are known, else the indices."""
    by_index = {g.index: g for g in (list_gpus() if gpus is None else gpus)}
    uuids = [by_index[i].uuid if i in by_index else None for i in ids]
    if ids and all(uuids):
        return ",".join(u for u in uuids if u)
    return ",".join(ids)


def nodes_for_visible(visible: str | None, gpus: list[Gpu] | None = None) -> list[str]:
    """The device nodes a CUDA_VISIBLE_DEVICES value names (indices or UUIDs); None (unset):
    every GPU's; "" : none."""
    gpus = list_gpus() if gpus is None else gpus
    if visible is None:
        return [g.node for g in gpus]
    wanted = {v.strip() for v in visible.split(",") if v.strip()}
    return [g.node for g in gpus if g.index in wanted or (g.uuid and g.uuid in wanted)]


# ------------------------------------------------------------------ locks: which are free

def lock_dir() -> Path:
    from a2c.paths import cache_dir
    path = cache_dir() / "gpu-locks"
    path.mkdir(parents=True, exist_ok=True)
    return path


class GpuLease:
    """Locks held on devices for one run's life (`release()`, or the process's end)."""

    def __init__(self, directory: Path | None = None):
        self.directory = directory or lock_dir()
        self.held: dict[str, int] = {}     # index -> fd

    def try_take(self, index: str) -> bool:
        if index in self.held:
            return True
        fd = os.open(self.directory / f"nvidia{index}.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self.held[index] = fd
        return True

    def take(self, ids: tuple[str, ...], flag: str = "--gpus") -> None:
        """All of `ids` or none (one line naming the busy device)."""
        taken = []
        for index in ids:
            if not self.try_take(index):
                for t in taken:
                    self.drop(t)
                raise RunError(f"{flag}: GPU {index} is in use by another a2c run on this "
                               f"machine ({self.directory / f'nvidia{index}.lock'})")
            taken.append(index)

    def choose(self, count: int, gpus: list[Gpu], exclude=()) -> tuple[str, ...]:
        """`count` free devices (lowest indices first), taken; () when fewer are free."""
        chosen: list[str] = []
        for gpu in gpus:
            if len(chosen) == count:
                break
            if gpu.index not in exclude and gpu.index not in self.held and \
                    self.try_take(gpu.index):
                chosen.append(gpu.index)
        if len(chosen) < count:
            for index in chosen:
                self.drop(index)
            return ()
        return tuple(chosen)

    def drop(self, index: str) -> None:
        fd = self.held.pop(index, None)
        if fd is not None:
            os.close(fd)   # closing the only descriptor releases the flock

    def release(self) -> None:
        for index in list(self.held):
            self.drop(index)


def bwrap_args(ids: tuple[str, ...] | list[str], dev: Path = DEV) -> list[str]:
    """bubblewrap arguments (after its fresh /proc and /dev) for a sandbox given the GPUs `ids`:
    their /dev/nvidiaN nodes and the driver's control nodes (device binds), the driver's
    /proc/driver/nvidia and /sys read-only (NVML and CUDA read the PCI topology there). Nothing
    for no GPU: no node of any other device is bound."""
    if not ids:
        return []
    argv: list[str] = []
    for node in [str(dev / f"nvidia{i}") for i in ids] + control_nodes(dev):
        argv += ["--dev-bind", node, node]
    for folder in ("/proc/driver/nvidia", "/sys"):
        if Path(folder).is_dir():
            argv += ["--ro-bind", folder, folder]
    return argv
