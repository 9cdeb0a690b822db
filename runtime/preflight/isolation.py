"""What isolates an agent on this machine: bubblewrap (user namespaces, or setpriv for a root
runtime), cgroup limits, the GPUs and the Docker engine, each probed by starting the least that
answers and removing it.

Why apart from the demo's rows (demo.py): these are what `a2c run`'s pre-flight needs too
(`run_checks`), and each needs a probe of the kernel or an engine rather than a look at files.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from .row import MISSING, OK, WARN, Check, run_probe

CGROUP_PROBE = "doctor"
USERNS_FIXES = (   # (sysctl file, value that forbids unprivileged user namespaces, fix)
    ("/proc/sys/kernel/apparmor_restrict_unprivileged_userns", "1",
     "sysctl -w kernel.apparmor_restrict_unprivileged_userns=0"),
    ("/proc/sys/kernel/unprivileged_userns_clone", "0",
     "sysctl -w kernel.unprivileged_userns_clone=1"),
    ("/proc/sys/user/max_user_namespaces", "0", "sysctl -w user.max_user_namespaces=15000"),
)


# ----------------------------------------------------------------------------- bubblewrap
def _userns_fix() -> str:
    for path, forbids, fix in USERNS_FIXES:
        try:
            if Path(path).read_text().strip() == forbids:
                return fix
        except OSError:
            continue
    return "sysctl -w user.max_user_namespaces=15000"


def bubblewrap_checks(root: bool | None = None) -> list[Check]:
    """bubblewrap as the runtime uses it: as root (no user namespace; setpriv drops to the
    agent's uid) and unprivileged (a user namespace: the runtime as a plain user, and the
    nested namespace an agent may make)."""
    from a2c.runtime.sandbox.local import bwrap_path
    root = os.geteuid() == 0 if root is None else root
    path = bwrap_path()
    if not path:
        missing = Check("bubblewrap", MISSING, "bwrap is not on the PATH: the local backend "
                        "runs the agent unconfined (refused as root)",
                        "apt-get install bubblewrap", required=True)
        return [missing]
    out = []
    probe = [path, "--ro-bind", "/", "/", "--unshare-all", "true"]
    if root:
        works, why = run_probe(probe)
        setpriv = shutil.which("setpriv")
        if works and setpriv:
            out.append(Check("bubblewrap (root)", OK, f"{path}; setpriv {setpriv}",
                             required=True))
        elif works:
            out.append(Check("bubblewrap (root)", MISSING, "setpriv is missing: a root runtime "
                             "cannot drop the agent to its uid", "apt-get install util-linux",
                             required=True))
        else:
            out.append(Check("bubblewrap (root)", MISSING, f"{path} cannot make namespaces: "
                             f"{why}", "run on a host (or a --privileged container) that allows "
                             "namespaces", required=True))
        probe = ([setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", "--", *probe]
                 if setpriv else None)   # as the agent's kind of uid
    if probe is None:
        return out
    works, why = run_probe(probe)
    name = "bubblewrap (unprivileged)"
    # the runtime as a plain user needs it; a root runtime only loses the agent's own nesting
    if works:
        out.append(Check(name, OK, "user namespaces allowed", required=not root))
    else:
        out.append(Check(name, WARN if root else MISSING,
                         f"no unprivileged user namespaces ({why})", _userns_fix(),
                         required=not root))
    return out


# ----------------------------------------------------------------------------- cgroups
def _cgroup_fix(why: str, version: str | None) -> str:
    if "not root" in why or "permission denied" in why:
        return "run a2c as root (or delegate a cgroup v2 subtree to its user)"
    if "read-only" in why:
        return ("mount -o remount,rw /sys/fs/cgroup (a container: docker run --cgroupns=host "
                "-v /sys/fs/cgroup:/sys/fs/cgroup:rw)")
    controller = next((c for c in ("memory", "cpu", "pids") if f"no {c} " in why or
                       f"the {c} controller" in why), None)
    if controller and version == "v2":
        return f"echo +{controller} > /sys/fs/cgroup/cgroup.subtree_control"
    if controller:
        return (f"mkdir -p /sys/fs/cgroup/{controller} && mount -t cgroup -o {controller} "
                f"cgroup /sys/fs/cgroup/{controller}")
    if "no cgroup filesystem" in why:
        return "mount -t cgroup2 none /sys/fs/cgroup"
    return "see docs/runtime.md (resource limits)"


def cgroup_check(root: Path | None = None) -> Check:
    """Which of budget.memory, cpus and pids the local backend can enforce here: a probe cgroup
    with all three is made and removed."""
    from a2c.runtime.sandbox.cgroups import CGROUP_ROOT, AgentCgroup, detect
    root = CGROUP_ROOT if root is None else root
    version, words = detect(root)
    group = AgentCgroup.create(f"{CGROUP_PROBE}-{os.getpid()}", mem_limit="64m", cpus=1.0,
                               pids=64, root=root)
    try:
        record = {k: v for k, v in group.record().items() if isinstance(v, dict)}
    finally:
        group.close()
    held = [k for k, v in record.items() if v["enforced"]]
    lost = {k: v.get("why", "") for k, v in record.items() if not v["enforced"]}
    if not lost:
        return Check("cgroup limits", OK, f"{words}: memory, cpus and pids enforced")
    why = "; ".join(dict.fromkeys(lost.values()))
    detail = (f"{words}: {', '.join(lost)} NOT enforced ({why})"
              + (f"; {', '.join(held)} enforced" if held else ""))
    return Check("cgroup limits", WARN if held else MISSING, detail, _cgroup_fix(why, version))


# ----------------------------------------------------------------------------- GPUs
def _driver_version() -> str | None:
    try:
        text = Path("/proc/driver/nvidia/version").read_text()
    except OSError:
        return None
    match = re.search(r"Kernel Module\s+(?:for \S+\s+)?([0-9][0-9.]+)", text)
    return match.group(1) if match else text.split("\n")[0][:80]


def _gpu_nodes(dev: Path) -> list[tuple[str, str | None]]:
    """(node, model name) of each NVIDIA GPU (runtime/sandbox/gpus.py)."""
    from a2c.runtime.sandbox import gpus
    return [(g.node, g.name) for g in gpus.list_gpus(dev)]


def gpu_check(dev: Path = Path("/dev")) -> Check:
    found = _gpu_nodes(dev)
    driver = _driver_version()
    if not found:
        return Check("GPUs", WARN, "no NVIDIA GPU (/dev/nvidiaN): runs are CPU-only",
                     "install the NVIDIA driver (apt-get install nvidia-driver-550) on a GPU host")
    models = sorted({name for _, name in found if name})
    detail = (f"{len(found)} GPU(s) ({', '.join(n for n, _ in found)})"
              + (f", {', '.join(models)}" if models else ""))
    if driver is None:
        return Check("GPUs", WARN, detail + "; no driver loaded (/proc/driver/nvidia/version)",
                     "modprobe nvidia (or install the NVIDIA driver)")
    return Check("GPUs", OK, f"{detail}, driver {driver}")


# ----------------------------------------------------------------------------- docker
def docker_checks() -> list[Check]:
    """The engine (answers a ping) and its NVIDIA runtime (`docker info`'s Runtimes)."""
    from a2c.errors import RunError
    from a2c.runtime.sandbox.docker_engine import client
    try:
        engine = client()
    except RunError as exc:
        fix = ("pip install 'a2c[docker]'" if "SDK" in str(exc)
               else "bash scripts/docker_engine.sh")
        return [Check("docker engine", MISSING, str(exc).split(": ", 1)[-1], fix),
                Check("docker NVIDIA runtime", MISSING, "no engine to ask",
                      "bash scripts/docker_engine.sh")]
    try:
        info = engine.info()
    except Exception as exc:  # noqa: BLE001 - the engine's own error, in words
        info = {"error": str(exc)}
    out = [Check("docker engine", OK, f"Docker {info.get('ServerVersion', '?')}, "
                 f"{info.get('Driver', '?')} storage, cgroup v{info.get('CgroupVersion', '?')}")]
    runtimes = sorted((info.get("Runtimes") or {}).keys())
    if "nvidia" in runtimes:
        out.append(Check("docker NVIDIA runtime", OK, "runtimes: " + ", ".join(runtimes)))
    else:
        out.append(Check("docker NVIDIA runtime", WARN,
                         "no nvidia runtime (runtimes: " + (", ".join(runtimes) or "none")
                         + "): containers get no GPU",
                         "apt-get install nvidia-container-toolkit && nvidia-ctk runtime "
                         "configure --runtime=docker && systemctl restart docker"))
    try:
        engine.close()
    except Exception:  # noqa: BLE001, S110 - closing only
        pass
    return out
