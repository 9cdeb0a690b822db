"""The evaluator's own bubblewrap, separate from the agent's (the grader service uses it).

When the service runs as root and bubblewrap works, the built-in evaluator of a grader that needs
only the model and the held-out records (`BOXED_KINDS`: exact match, HumanEval) runs in new mount,
network, IPC and UTS namespaces (not pid: see below): the system, the interpreter, the venv and the a2c packages
read-only, the submitted model, the grader configuration and the held-out folder read-only (the
grader's token, service.json and sockets in that folder covered), a fresh /tmp, no network, and
one writable folder of its own (`box_dir`) for its result and its HOME. setpriv makes it the
evaluator's uid (`A2C_EVAL_UID` / `A2C_EVAL_GID`, default 65533, never 0 and never the agent's)
with one capability, CAP_DAC_READ_SEARCH (it reads the operator's 0600 held-out files), which
`evaluate_one` removes from the ambient set at start so that its children (HumanEval's own
bubblewrap for generated code) get none. The host's /proc is bound (a nested
bubblewrap can mount a /proc only where one is fully visible, and a fresh one bubblewrap mounts
has covered parts), so the box keeps the host's pid namespace: in a pid namespace of its own
over the host's /proc, the nested bubblewrap looks up its child by a namespace-local pid in the
host's /proc ("open /proc/10/ns/ns failed" whenever no host process has that number; it passed
only by the luck of the host's pid layout). The generated code still gets its own pid namespace
from that nested bubblewrap, and the box runs as its own uid with no capability but
CAP_DAC_READ_SEARCH, so it can neither signal nor trace the host's processes. Only the grader's
GPUs are bound (the nodes its CUDA_VISIBLE_DEVICES names, which the runtime sets to the run's
grader devices; every GPU when it is unset), with the driver's control nodes and /sys
read-only.

Graders that reach outside (the LLM judge's endpoint, level-3 environments' servers and data) run
unboxed, with the minimal environment only.
"""

from __future__ import annotations

import os
from pathlib import Path

from a2c.errors import RunError
from a2c.runtime.sandbox import bwrap
from a2c.runtime.sandbox.bwrap import SYSTEM_DIRS, Bwrap, bwrap_path, parent_dirs
from a2c.runtime.sandbox.privileges import AgentIds, agent_ids, is_root, setpriv_path
from a2c.settings import get as setting

EVAL_UID_VAR, EVAL_GID_VAR = "A2C_EVAL_UID", "A2C_EVAL_GID"
DEFAULT_EVAL_ID = 65533
BOXED_KINDS = frozenset({"exact_match", "humaneval"})
HIDDEN_NAMES = ("token", "service.json")      # next to the held-out file, never for the evaluator
CAP = "dac_read_search"
_ENV = object()   # box_argv's `visible` default: this process's CUDA_VISIBLE_DEVICES


def eval_ids() -> AgentIds:
    def number(var: str, default: int) -> int:
        value = setting(var)            # an int (a value that is not: one error naming it)
        if value is None:
            return default
        if value < 0:
            raise RunError(f"{var}={value}: expected a number")
        return value
    uid = number(EVAL_UID_VAR, DEFAULT_EVAL_ID)
    ids = AgentIds(uid, number(EVAL_GID_VAR, uid))
    if 0 in (ids.uid, ids.gid):
        raise RunError(f"the evaluator's uid/gid must not be 0 ({ids.uid}/{ids.gid})")
    agent = agent_ids()
    if ids.uid == agent.uid:
        raise RunError(f"the evaluator's uid {ids.uid} must differ from the agent's")
    return ids


def available() -> bool:
    """Root, a working bubblewrap (not turned off: bwrap.available) and setpriv: the box can be
    built here."""
    if not (is_root() and bwrap.available()):
        return False
    try:
        setpriv_path()
    except RunError:
        return False
    return True


def boxed(grader_kind: str | None) -> bool:
    return grader_kind in BOXED_KINDS and available()


def _python_dirs() -> list[str]:
    from a2c.runtime.sandbox import view
    return view.python_binds(SYSTEM_DIRS)


def gpu_nodes(visible: str | None) -> list[str]:
    """The grader's GPU nodes (those CUDA_VISIBLE_DEVICES names; every one when it is unset),
    with the driver's control nodes."""
    from a2c.runtime.sandbox import gpus
    nodes = gpus.nodes_for_visible(visible)
    if not nodes:
        return []
    return nodes + gpus.control_nodes() + (["/dev/dri"] if Path("/dev/dri").exists() else [])


def box_argv(command: list[str], *, model: Path, grader_cfg: Path, heldout: Path,
             box_dir: Path, ids: AgentIds, python_dirs: list[str] | None = None,
             visible: str | None | object = _ENV) -> list[str]:
    """The bubblewrap + setpriv prefix and `command` (pure apart from listing /dev). `visible`:
    the grader's CUDA_VISIBLE_DEVICES (default: this process's), whose nodes alone are bound."""
    box = Bwrap(bwrap_path()).system(SYSTEM_DIRS)
    # /proc read-write: a nested bubblewrap writes its own uid_map (files of other users and
    # /proc/sys stay closed to an unprivileged uid)
    box.dev().bind("/proc").tmpfs("/tmp", perms="1777")
    nodes = gpu_nodes(os.environ.get("CUDA_VISIBLE_DEVICES") if visible is _ENV else visible)
    for node in nodes:
        box.dev_bind(node)
    if nodes and Path("/sys").is_dir():
        box.ro_bind("/sys")
    python_dirs = _python_dirs() if python_dirs is None else python_dirs
    system = tuple(Path(d) for d in (*SYSTEM_DIRS, "/dev", "/proc"))
    inputs = [str(p.parent) for p in (heldout, grader_cfg)   # no held-out file: /dev/null
              if not any(p.parent == s or s in p.parent.parents for s in system)]
    box.add(*parent_dirs(python_dirs + [str(model), *inputs, str(box_dir)]))
    for directory in python_dirs:
        box.ro_bind(directory)
    for folder in dict.fromkeys(inputs):
        box.ro_bind(folder)
        for entry in sorted(Path(folder).iterdir()) if Path(folder).is_dir() else []:
            if entry.name in HIDDEN_NAMES or entry.is_socket():
                box.hide_file(entry)
    box.ro_bind(model).bind(box_dir).unshare("net", "ipc", "uts", "cgroup-try")
    box.die_with_parent().new_session()
    box.caps("CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP", "CAP_DAC_READ_SEARCH").chdir(box_dir)
    return box.command(setpriv_path(), f"--reuid={ids.uid}", f"--regid={ids.gid}",
                       "--clear-groups", f"--inh-caps=-all,+{CAP}",
                       f"--ambient-caps=-all,+{CAP}", f"--bounding-set=-all,+{CAP}", "--",
                       *command)


def prepare_box(box_dir: Path, ids: AgentIds) -> None:
    """The evaluator's one writable folder, owned by its uid and private to it."""
    box_dir.mkdir(parents=True, exist_ok=True)
    os.chown(box_dir, ids.uid, ids.gid)
    os.chmod(box_dir, 0o700)
