"""Who the agent runs as: never root.

When the runtime is root, bubblewrap (started by root, so it can bind every path the agent needs
without the run directory being open to anyone) builds the sandbox in new mount, pid, network,
IPC and UTS namespaces (no user namespace: a uid 0 mapped into one would still be root on the
host), and the first program inside is `setpriv`, which becomes the agent's unprivileged host
uid/gid with no supplementary groups, clears every capability set (bounding, inheritable,
ambient; permitted and effective go with the uid change) and execs the agent's command. bwrap
sets no_new_privs, so no setuid binary gives anything back. Then an unprivileged bubblewrap, run
as that uid, makes one user namespace mapping the uid to itself with nesting disabled
(`nested_userns_argv`): the agent cannot make a user namespace of its own. An escape from the namespaces is an
unprivileged process: it cannot read the run directory (0700 root), the grader's token or the
operator's files.

The agent's uid is `A2C_AGENT_UID` (a number or a user name) and gid `A2C_AGENT_GID` (default:
that user's primary group, else the uid), else the `nobody` user (65534:65534 where it has no
passwd entry). A host that runs other services as `nobody`, or several runs at once for several
operators, should set a dedicated uid.

When the runtime is not root, bubblewrap runs unprivileged in a user namespace with every
capability dropped; the agent is then the operator's own uid outside the namespace.

The only paths the agent uid may write are the ones it must: the workspace (chowned to it), the
command log (chowned), and the grader's, the driver gateway's and the environment service
proxies' sockets (their group becomes the agent's gid, group read-write, so a socket kept 0660
still accepts the agent). The run's read-only trees the agent sees (data/, agent/, bundle/hooks/)
get the agent's group with group read, so a run directory written 0700/0600 still shows them to
the agent; the base model (often a shared cache) is left as it is and must be world-readable at
the file level.

Running the agent as root without bubblewrap is refused (`RunError`) unless
`A2C_UNSAFE_ROOT_AGENT=1` is set, for debugging only, with a loud warning on every start.
"""

from __future__ import annotations

import grp
import os
import pwd
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path

from a2c.errors import RunError
from a2c.runtime.sandbox.bwrap import Bwrap
from a2c.settings import get as setting
from a2c.settings import get_bool

UID_VAR, GID_VAR = "A2C_AGENT_UID", "A2C_AGENT_GID"
UNSAFE_ROOT_VAR = "A2C_UNSAFE_ROOT_AGENT"
DEFAULT_USER = "nobody"
NOBODY_ID = 65534


@dataclass(frozen=True)
class AgentIds:
    uid: int
    gid: int


def is_root() -> bool:
    return os.geteuid() == 0


def _uid(value: str) -> tuple[int, int | None]:
    """(uid, primary gid or None) for a number or a user name."""
    try:
        entry = pwd.getpwnam(value) if not value.isdigit() else pwd.getpwuid(int(value))
        return entry.pw_uid, entry.pw_gid
    except KeyError:
        if value.isdigit():
            return int(value), None
        raise RunError(f"{UID_VAR}={value}: no such user") from None


def _gid(value: str) -> int:
    if value.isdigit():
        return int(value)
    try:
        return grp.getgrnam(value).gr_gid
    except KeyError:
        raise RunError(f"{GID_VAR}={value}: no such group") from None


def agent_ids(environ: dict[str, str] | None = None) -> AgentIds:
    """The agent's host uid/gid by the rule above; never 0."""
    environ = os.environ if environ is None else environ
    named = setting(UID_VAR, environ) or ""
    if named:
        uid, primary = _uid(named)
    else:
        try:
            uid, primary = _uid(DEFAULT_USER)
        except RunError:
            uid, primary = NOBODY_ID, NOBODY_ID
    gid_value = setting(GID_VAR, environ) or ""
    gid = _gid(gid_value) if gid_value else (primary if primary is not None else uid)
    if uid == 0 or gid == 0:
        raise RunError(f"the agent's uid/gid must not be 0 ({UID_VAR}/{GID_VAR} = {uid}/{gid})")
    return AgentIds(uid, gid)


def unsafe_root_allowed() -> bool:
    return get_bool(UNSAFE_ROOT_VAR)


def refuse_root_without_sandbox() -> None:
    """The local backend without bubblewrap as root would run the agent as root."""
    if is_root() and not unsafe_root_allowed():
        raise RunError("refusing to run the agent as root without bubblewrap (the runtime runs "
                       "as root): install bubblewrap, use --backend docker, or run a2c as an "
                       f"unprivileged user ({UNSAFE_ROOT_VAR}=1 allows it for debugging only)")


def setpriv_path() -> str:
    """setpriv (util-linux), from a system folder so the sandbox sees the same binary."""
    for candidate in ("/usr/bin/setpriv", "/bin/setpriv", shutil.which("setpriv") or ""):
        if candidate and Path(candidate).is_file() and candidate.startswith(("/usr/", "/bin/")):
            return candidate
    raise RunError("setpriv (util-linux) is needed to run the agent unprivileged inside "
                   "bubblewrap when the runtime is root: apt-get install util-linux")


def drop_argv(ids: AgentIds, setpriv: str) -> list[str]:
    """The command prefix that becomes `ids` with no capability left, then execs the rest."""
    return [setpriv, f"--reuid={ids.uid}", f"--regid={ids.gid}", "--clear-groups",
            "--inh-caps=-all", "--ambient-caps=-all", "--bounding-set=-all", "--"]


def nested_userns_argv(bwrap: str) -> list[str]:
    """The agent's command prefix, run after setpriv, that takes user namespaces away from it:
    an unprivileged bubblewrap makes one user namespace that maps the agent's uid to itself
    (uid 65534 inside is 65534 on the host, unlike a user namespace made by root, where it would
    be root outside), drops every capability, and caps further nesting
    (`--disable-userns`): `unshare -Ur` and a nested `bwrap --unshare-user` fail inside. Its
    view is the outer sandbox's own (`--bind / /`, recursive: read-only binds stay read-only)."""
    return (Bwrap(bwrap).unshare("user").disable_userns().caps().bind("/").dev_bind("/dev")
            .die_with_parent().command())


_NESTED: dict[tuple, bool] = {}


def nested_userns_works(bwrap: str, setpriv: str, ids: AgentIds) -> bool:
    """Whether the agent's uid may make the one user namespace above here (hosts that forbid
    unprivileged user namespaces refuse it; the agent could not make one there either)."""
    key = (bwrap, setpriv, ids)
    if key not in _NESTED:
        import subprocess
        argv = [*drop_argv(ids, setpriv),
                *Bwrap(bwrap).unshare("user").disable_userns().ro_bind("/").command("true")]
        try:
            _NESTED[key] = subprocess.run(argv, capture_output=True, timeout=20).returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            _NESTED[key] = False
    return _NESTED[key]


def _chown_tree(root: Path, ids: AgentIds) -> None:
    os.chown(root, ids.uid, ids.gid, follow_symlinks=False)
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            os.chown(os.path.join(folder, name), ids.uid, ids.gid, follow_symlinks=False)


def _open_to_group(path: Path, ids: AgentIds, bits: int) -> None:
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode):
        return
    os.chown(path, -1, ids.gid, follow_symlinks=False)
    os.chmod(path, stat.S_IMODE(info.st_mode) | bits)


def _readable_tree(root: Path, ids: AgentIds) -> None:
    """Group `ids.gid` may read the tree (files g+r, folders g+rx), whatever else its modes say."""
    _open_to_group(root, ids, 0o050)
    for folder, dirs, files in os.walk(root):
        for name in dirs:
            _open_to_group(Path(folder, name), ids, 0o050)
        for name in files:
            _open_to_group(Path(folder, name), ids, 0o040)


def grant_agent(ids: AgentIds, *, writable_trees: list[Path], writable_files: list[Path],
                sockets: list[Path], socket_dirs: list[Path],
                readable_trees: list[Path] = ()) -> None:
    """Give the agent uid what it must write, nothing else; and group read on the run's own
    read-only trees it sees (its split, its agent folder, the hooks), whatever their modes."""
    for tree in readable_trees:
        if tree.is_dir():
            _readable_tree(tree, ids)
    for tree in writable_trees:
        if tree.exists():
            _chown_tree(tree, ids)
    for path in writable_files:
        if path.exists():
            os.chown(path, ids.uid, ids.gid, follow_symlinks=False)
    for path in sockets:
        if path.exists():
            _open_to_group(path, ids, 0o060)
    for folder in socket_dirs:
        if folder.is_dir():
            _open_to_group(folder, ids, 0o050)
            for entry in folder.iterdir():
                if entry.is_socket():
                    _open_to_group(entry, ids, 0o060)
