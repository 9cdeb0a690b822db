"""What this machine can do for a2c: one small check per capability, each a `Check` row with the
command that fixes it. `a2c doctor` prints them all; `a2c run` and `a2c sweep` run the ones they
need before anything is written (`run_checks`, `sweep_checks`), so a missing piece is one line
with its fix instead of a failure halfway.

Each check only looks (no install, no key made, no model built); the probes that start
something (bubblewrap, a cgroup, the Docker engine) start the least that answers and remove it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

OK, WARN, MISSING = "ok", "warn", "missing"
STATUSES = (OK, WARN, MISSING)
CGROUP_PROBE = "doctor"
PROBE_TIMEOUT_S = 20
USERNS_FIXES = (   # (sysctl file, value that forbids unprivileged user namespaces, fix)
    ("/proc/sys/kernel/apparmor_restrict_unprivileged_userns", "1",
     "sysctl -w kernel.apparmor_restrict_unprivileged_userns=0"),
    ("/proc/sys/kernel/unprivileged_userns_clone", "0",
     "sysctl -w kernel.unprivileged_userns_clone=1"),
    ("/proc/sys/user/max_user_namespaces", "0", "sysctl -w user.max_user_namespaces=15000"),
)


@dataclass(frozen=True)
class Check:
    """One row: what was checked, ok | warn | missing, what was found, the command that fixes
    it (None when nothing needs fixing)."""

    name: str
    status: str
    detail: str
    fix: str | None = None

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"check {self.name}: status {self.status!r} is not one of "
                             f"{', '.join(STATUSES)}")

    @property
    def ok(self) -> bool:
        return self.status == OK

    def as_dict(self) -> dict:
        return asdict(self)

    def line(self) -> str:
        """One line for a pre-flight: `name: detail (fix: command)`."""
        return f"{self.name}: {self.detail}" + (f" (fix: {self.fix})" if self.fix else "")


# ----------------------------------------------------------------------------- bubblewrap
def _probe(argv: list[str]) -> tuple[bool, str]:
    try:
        proc = subprocess.run(argv, capture_output=True, timeout=PROBE_TIMEOUT_S, text=True)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, str(exc)
    first = (proc.stderr or proc.stdout).strip().splitlines()
    return proc.returncode == 0, first[0][:200] if first else f"exit {proc.returncode}"


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
                        "apt-get install bubblewrap")
        return [missing]
    out = []
    probe = [path, "--ro-bind", "/", "/", "--unshare-all", "true"]
    if root:
        works, why = _probe(probe)
        setpriv = shutil.which("setpriv")
        if works and setpriv:
            out.append(Check("bubblewrap (root)", OK, f"{path}; setpriv {setpriv}"))
        elif works:
            out.append(Check("bubblewrap (root)", MISSING, "setpriv is missing: a root runtime "
                             "cannot drop the agent to its uid", "apt-get install util-linux"))
        else:
            out.append(Check("bubblewrap (root)", MISSING, f"{path} cannot make namespaces: "
                             f"{why}", "run on a host (or a --privileged container) that allows "
                             "namespaces"))
        probe = ([setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", "--", *probe]
                 if setpriv else None)   # as the agent's kind of uid
    if probe is None:
        return out
    works, why = _probe(probe)
    name = "bubblewrap (unprivileged)"
    if works:
        out.append(Check(name, OK, "user namespaces allowed"))
    else:
        # the runtime as a plain user needs it; a root runtime only loses the agent's own nesting
        out.append(Check(name, WARN if root else MISSING,
                         f"no unprivileged user namespaces ({why})", _userns_fix()))
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
    """(node, model name) of each NVIDIA GPU (runtime/sandbox/gpus.py where present)."""
    try:
        from a2c.runtime.sandbox import gpus
        return [(g.node, g.name) for g in gpus.list_gpus(dev)]
    except ImportError:   # pragma: no cover - before gpus.py existed
        nodes = sorted(p for p in dev.glob("nvidia*") if re.fullmatch(r"nvidia\d+", p.name))
        return [(str(p), None) for p in nodes]


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


# ----------------------------------------------------------------------------- the rest
def scaffold_checks(agents: Iterable[dict], search_path: str | None = None) -> list[Check]:
    """One row per CLI scaffold among `agents` (resolved specs): its command found or not."""
    from a2c.runtime.run.scaffold import check_command
    out = []
    for agent in agents:
        if agent.get("type") != "cli":
            continue
        command = check_command(agent)
        where = shutil.which(command, path=search_path) if command else None
        if where:
            out.append(Check(f"scaffold {agent['id']}", OK, f"{command} at {where}"))
        else:
            out.append(Check(f"scaffold {agent['id']}", MISSING, f"{command} is not installed",
                             f"a2c agents install {agent['id']}"))
    return out


def model_checks() -> list[Check]:
    from a2c.runtime.models import list_models
    out = []
    for model in list_models():
        name = f"model {model['name']}"
        if model["prepared"]:
            out.append(Check(name, OK, f"prepared at {model['path']}"))
        else:
            out.append(Check(name, WARN, "not prepared (a run prepares it first: minutes)",
                             f"a2c models prepare {model['name']}"))
    return out


def record_key_check() -> Check:
    """The operator's record signing key: present, and private (mode 0600 or stricter)."""
    from a2c.contracts import record_key as rk
    status_of = getattr(rk, "record_key_status", None)
    if status_of is not None:
        status = status_of()
        path, exists, mode_ok = status.path, status.exists, status.mode_ok
        key_id = status.key_id
    else:   # pragma: no cover - before record_key_status
        path, key_id = rk.key_file(), None
        exists = path.is_file()
        mode_ok = exists and not path.stat().st_mode & 0o077
    if not exists:
        return Check("record key", WARN, f"none at {path} (the first run makes it)",
                     "a2c keys --init")
    mode = f"{path.stat().st_mode & 0o777:o}"
    if not mode_ok:
        return Check("record key", MISSING, f"{path} is mode {mode}: others can read it",
                     f"chmod 600 {path}")
    return Check("record key", OK, f"{path} (mode {mode}" + (f", key {key_id})" if key_id
                                                            else ")"))


def ray_check() -> Check:
    try:
        import ray
    except ImportError:
        return Check("Ray", MISSING, "not installed: a2c sweep cannot run",
                     "pip install 'a2c[sweep]'")
    return Check("Ray", OK, f"ray {getattr(ray, '__version__', '?')}")


def environment_check(environ: dict[str, str] | None = None) -> Check:
    """`A2C_*` variables a2c does not read (a2c/settings.py declares every one it does): a
    misspelt name, or one of the agent knobs that became params, would otherwise do nothing."""
    from a2c.settings import unread
    names = unread(environ)
    if not names:
        return Check("A2C_* variables", OK, "every one set is one a2c reads")
    return Check("A2C_* variables", WARN,
                 f"{', '.join(names)}: set, but a2c reads no such variable (docs/settings.md; "
                 "an agent's knobs are its params: a2c agents params ID, then "
                 "a2c run --agent-param NAME=VALUE)", "unset " + " ".join(names))


# ----------------------------------------------------------------------------- sets
def all_checks(agents: Iterable[dict] = (), search_path: str | None = None) -> list[Check]:
    """Every row of `a2c doctor`, in its order."""
    return [*bubblewrap_checks(), cgroup_check(), gpu_check(), *docker_checks(),
            *scaffold_checks(agents, search_path), *model_checks(), record_key_check(),
            ray_check(), environment_check()]


def run_checks(backend: str, use_bwrap: bool | None = None) -> list[Check]:
    """`a2c run`'s pre-flight: the sandbox it will use and whether the limits hold."""
    if backend == "docker":
        return [*docker_checks()[:1], environment_check()]
    checks = [] if use_bwrap is False else bubblewrap_checks()[:1]
    return [*checks, cgroup_check(), environment_check()]


def sweep_checks() -> list[Check]:
    """`a2c sweep`'s pre-flight: Ray (each trial's `a2c run` checks its own sandbox)."""
    return [ray_check(), environment_check()]
