"""One bubblewrap command builder, and the one probe that says whether bubblewrap is usable here.

Three sandboxes are built with bubblewrap: the agent's (local.py), the evaluator's box
(evaluator_box.py) and the throw-away box of generated code (graders/code_exec.py). Each says
what it binds, in order, through `Bwrap`; each asks `available()` whether it can be built at
all, so the documented override (`a2c run --no-bwrap`, `A2C_NO_BWRAP=1` for tests) turns every
one of them off alike, and a host whose bubblewrap cannot make namespaces is found once. A run's
`--no-bwrap` reaches the grader service as service.json `use_bwrap: false` (no evaluator box)
and its evaluator child as `--no-bwrap`, which calls `turn_off()` (no code-execution box).

    argv = (Bwrap(bwrap_path()).system(SYSTEM_DIRS).proc().dev().tmpfs("/tmp", perms="1777")
            .ro_bind(model).bind(box_dir).unshare("net", "ipc").die_with_parent()
            .new_session().chdir(box_dir).command("python", "-m", "x"))

The order of the calls is the order of bubblewrap's options, which matters (a later mount hides
an earlier one beneath it): the builder adds nothing and reorders nothing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from collections.abc import Iterable
from pathlib import Path

from a2c.settings import get_bool

# The host's system folders every sandbox shows read-only (a symlink stays a symlink).
SYSTEM_DIRS = ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc")

_lock = threading.Lock()
_works: dict[str, bool] = {}
_off = False     # this process was told to go without bubblewrap (turn_off)


def turn_off() -> None:
    """No bubblewrap in this process from now on: the evaluator child of a run started with
    `--no-bwrap` (its own process, so nothing else is affected)."""
    global _off
    _off = True


def bwrap_path() -> str | None:
    """bubblewrap on the PATH, or None where there is none or the override says so."""
    if _off or get_bool("A2C_NO_BWRAP"):   # a test switch; a run says --no-bwrap
        return None
    return shutil.which("bwrap")


def bwrap_works(path: str | None = None) -> bool:
    """Whether bubblewrap (`path`, default the one found) can create its namespaces here:
    probed once per program path."""
    path = path or bwrap_path()
    if not path:
        return False
    with _lock:
        if path not in _works:
            try:
                proc = subprocess.run([path, "--ro-bind", "/", "/", "--unshare-all", "true"],
                                      capture_output=True, timeout=20)
                _works[path] = proc.returncode == 0
            except (OSError, subprocess.TimeoutExpired):
                _works[path] = False
        return _works[path]


def size_works(path: str | None = None) -> bool:
    """Whether this bubblewrap takes `--size` for a tmpfs (0.5 and later; its --help says)."""
    path = path or bwrap_path()
    if not path:
        return False
    key = f"{path}#size"
    with _lock:
        if key not in _works:
            try:
                proc = subprocess.run([path, "--help"], capture_output=True, text=True,
                                      timeout=20)
                _works[key] = "--size" in proc.stdout + proc.stderr
            except (OSError, subprocess.TimeoutExpired):
                _works[key] = False
        return _works[key]


def available() -> bool:
    """bubblewrap is present, not turned off, and works: the one test every sandbox uses."""
    path = bwrap_path()
    return bool(path) and bwrap_works(path)


def parent_dirs(destinations: Iterable[str], covered: Iterable[str] = SYSTEM_DIRS) -> list[str]:
    """`--dir` for the folders above each bind, world-searchable: bubblewrap would create them
    0700 root, which an unprivileged process cannot cross (a venv under /root/.pyenv)."""
    argv, done = [], set()
    # Bound from the host, so every folder under them exists already. Not /tmp: it is a fresh
    # tmpfs, so a checkout or venv under /tmp needs its folders made (/tmp itself stays 1777).
    tops = tuple(Path(d) for d in covered)
    for dest in destinations:
        for parent in reversed(Path(dest).parents):
            if parent in (Path("/"), Path("/tmp")) or parent in done:
                continue
            if any(parent == c or c in parent.parents for c in tops):
                continue
            done.add(parent)
            argv += ["--perms", "0755", "--dir", str(parent)]
    return argv


class Bwrap:
    """A bubblewrap command line, option by option (see the module doc). Every method returns
    the builder; `command(...)` ends it with `--` and the program to run."""

    def __init__(self, program: str | None = None):
        self.argv: list[str] = [program or "bwrap"]

    def add(self, *args: str | os.PathLike) -> Bwrap:
        self.argv += [str(a) for a in args]
        return self

    def system(self, dirs: Iterable[str] = SYSTEM_DIRS, *, dirs_only: bool = False) -> Bwrap:
        """The host's system folders read-only; one that is a symlink (/lib -> usr/lib) is made
        the same symlink; one that does not exist is left out."""
        for directory in dirs:
            path = Path(directory)
            if path.is_symlink():
                self.symlink(os.readlink(path), directory)
            elif path.is_dir() if dirs_only else path.exists():
                self.ro_bind(directory)
        return self

    def ro_bind(self, src, dest=None) -> Bwrap:
        return self.add("--ro-bind", src, src if dest is None else dest)

    def bind(self, src, dest=None) -> Bwrap:
        return self.add("--bind", src, src if dest is None else dest)

    def dev_bind(self, src, dest=None) -> Bwrap:
        return self.add("--dev-bind", src, src if dest is None else dest)

    def hide_file(self, path) -> Bwrap:
        """Cover a file with an empty one (/dev/null bound read-only over it)."""
        return self.ro_bind("/dev/null", path)

    def tmpfs(self, path, perms: str | None = None, size: int | None = None) -> Bwrap:
        """A fresh tmpfs; `size` bytes bound it in the kernel (bubblewrap 0.5+: `size_works`)."""
        if perms:
            self.add("--perms", perms)
        if size:
            self.add("--size", str(int(size)))
        return self.add("--tmpfs", path)

    def dir(self, path, perms: str | None = None) -> Bwrap:
        return (self.add("--perms", perms) if perms else self).add("--dir", path)

    def symlink(self, target, path) -> Bwrap:
        return self.add("--symlink", target, path)

    def remount_ro(self, path) -> Bwrap:
        return self.add("--remount-ro", path)

    def proc(self, path: str = "/proc") -> Bwrap:
        """A fresh /proc of the sandbox's own pid namespace."""
        return self.add("--proc", path)

    def dev(self, path: str = "/dev") -> Bwrap:
        """A minimal /dev (null, zero, random, tty, shm, ...), no device of the host's."""
        return self.add("--dev", path)

    def unshare(self, *namespaces: str) -> Bwrap:
        """`--unshare-<ns>` for each name ("all", "pid", "net", "ipc", "uts", "user",
        "cgroup-try")."""
        return self.add(*(f"--unshare-{ns}" for ns in namespaces))

    def disable_userns(self) -> Bwrap:
        return self.add("--disable-userns")

    def caps(self, *added: str) -> Bwrap:
        """Drop every capability, then add back `added` (CAP_* names) only."""
        self.add("--cap-drop", "ALL")
        for cap in added:
            self.add("--cap-add", cap)
        return self

    def die_with_parent(self) -> Bwrap:
        return self.add("--die-with-parent")

    def new_session(self) -> Bwrap:
        """A new terminal session: no TIOCSTI into the caller's terminal."""
        return self.add("--new-session")

    def chdir(self, path) -> Bwrap:
        return self.add("--chdir", path)

    def command(self, *argv: str) -> list[str]:
        """The finished command line: the options, `--`, then `argv`."""
        return [*self.argv, "--", *[str(a) for a in argv]]
