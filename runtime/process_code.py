"""What code a process runs, read from outside its sandbox (the process recorder's eyes).

`targets(exe, argv)` reads an interpreter's arguments for the code they name: Python (`FILE`,
`-m MODULE`, `-c CODE`, its standard input), a shell (`FILE`, `-c CMD`), another interpreter's
script. `Capturer` reads that code in the process's own view of the filesystem: a path is
opened under /proc/PID/root (a relative one from /proc/PID/cwd), one component at a time,
following symbolic links itself so that none leads out of that view; a script a shell still
holds open (or Python's standard input redirected from a file) is read through /proc/PID/fd even
when it was deleted. The bytes are hashed, redacted and kept once each (a2c.contracts.
process_record); a file changed after the process started (its ctime, or that of a symbolic link
on its path, is later) is marked, since what was read may not be what ran. For Python the local
modules a script imports and the interpreter's start-up files are read the same way
(process_imports.py).
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import re
import stat
from collections import deque
from dataclasses import dataclass, field

PYTHON = re.compile(r"^(?:python|pypy)(?:\d+(?:\.\d+)*)?[a-z]*(?:-dbg)?$")
SHELLS = {"bash", "sh", "dash", "zsh", "ksh", "mksh", "ash"}
OTHER = {"node", "nodejs", "perl", "ruby", "Rscript", "lua", "php", "julia", "deno", "bun"}
# library modules that run a file named in their arguments in the same process
IN_PROCESS_RUNNERS = {"pdb", "cProfile", "profile", "trace", "runpy", "code", "IPython",
                      "pytest", "unittest", "doctest", "timeit"}
MAX_CAPTURE_BYTES = 8_000_000       # kept up to this; a bigger file is hashed, not kept
MAX_HASH_BYTES = 256_000_000        # hashed up to this
TEXT_PROBE = 8192
START_SLACK_S = 0.02                # a process's start time is in clock ticks, rounded down
_LONG_WITH_ARG = {"--check-hash-based-pycs"}


@dataclass
class Target:
    how: str                      # script | module | inline | stdin
    language: str                 # python | shell | other
    path: str | None = None
    module: str | None = None
    text: str | None = None
    interactive: bool = False
    rest: list[str] = field(default_factory=list)   # the arguments after the program


def interpreter(exe: str | None, argv: list[str]) -> str | None:
    """python | shell | other | None (a program that is not an interpreter we read), by the
    executable's name (argv[0] can be anything)."""
    for name in (posixpath.basename(exe or ""), posixpath.basename(argv[0]) if argv else ""):
        if PYTHON.match(name):
            return "python"
        if name in SHELLS:
            return "shell"
        if name in OTHER:
            return "other"
    return None


def python_target(args: list[str]) -> Target | None:
    """The program of `python ARGS` (args without argv[0])."""
    interactive = False
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            i += 1
            break
        if arg == "-":
            return Target("stdin", "python", interactive=interactive, rest=args[i + 1:])
        if arg.startswith("--"):
            if arg in ("--help", "--version"):
                return None
            i += 2 if arg in _LONG_WITH_ARG else 1
            continue
        if arg.startswith("-") and len(arg) > 1:
            j = 1
            while j < len(arg):
                flag = arg[j]
                if flag in "cmWX":
                    value = arg[j + 1:]
                    if not value:
                        i += 1
                        value = args[i] if i < len(args) else ""
                    if flag == "c":
                        return Target("inline", "python", text=value, rest=args[i + 1:])
                    if flag == "m":
                        return Target("module", "python", module=value, rest=args[i + 1:])
                    break
                if flag == "i":
                    interactive = True
                if flag in "hV?":
                    return None
                j += 1
            i += 1
            continue
        break
    if i < len(args):
        return Target("script", "python", path=args[i], interactive=interactive,
                      rest=args[i + 1:])
    return Target("stdin", "python", interactive=interactive)


def shell_target(args: list[str]) -> Target | None:
    """The program of `bash ARGS`: `-c CMD` (inline), a script, or standard input."""
    command = False
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            i += 1
            break
        if arg in ("--rcfile", "--init-file"):
            i += 2
            continue
        if arg.startswith("--"):
            i += 1
            continue
        if arg[:1] in ("-", "+") and len(arg) > 1:
            flags = arg[1:]
            command = command or (arg[0] == "-" and "c" in flags)
            i += 2 if ("o" in flags or "O" in flags) else 1
            continue
        break
    if i >= len(args):
        return Target("stdin", "shell") if not command else None
    if command:
        return Target("inline", "shell", text=args[i], rest=args[i + 1:])
    return Target("script", "shell", path=args[i], rest=args[i + 1:])


def targets(exe: str | None, argv: list[str]) -> list[Target]:
    kind = interpreter(exe, argv)
    args = argv[1:]
    if kind == "python":
        found = python_target(args)
    elif kind == "shell":
        found = shell_target(args)
    elif kind == "other":
        script = next((a for a in args if not a.startswith("-")), None)
        found = Target("script", "other", path=script) if script else None
    else:
        return []
    out = [found] if found else []
    if found and found.how == "module" and found.module and \
            found.module.split(".")[0] in IN_PROCESS_RUNNERS:
        # `python -m cProfile -o out train.py`: train.py runs in this process (its first .py
        # argument, else its first operand)
        operands = [a for a in found.rest if not a.startswith("-")]
        script = next((a for a in operands if a.endswith(".py")), operands[0] if operands else
                      None)
        if script:
            out.append(Target("argument", "python", path=script))
    return out


# ---------------------------------------------------------------------------- the view
class View:
    """A process's filesystem as it sees it: /proc/PID/root and /proc/PID/cwd."""

    def __init__(self, pid: int, cwd: str | None):
        self.pid = pid
        self.cwd = cwd

    def open(self, path: str, from_cwd: bool = True) -> tuple[int, str, float]:
        """(fd opened read-only, the path resolved in the view, the latest ctime of a symbolic
        link on the way); OSError when it cannot be opened as a regular file."""
        absolute = path.startswith("/")
        if not absolute and (not from_cwd or ".." in path.split("/")):
            if not self.cwd or not self.cwd.startswith("/"):
                raise FileNotFoundError(path)
            path, absolute = posixpath.join(self.cwd, path), True
        root = os.open(f"/proc/{self.pid}/root", os.O_PATH | os.O_DIRECTORY)
        opened = [root]
        try:
            if absolute:
                stack, where = [root], []
            else:
                cwd = os.open(f"/proc/{self.pid}/cwd", os.O_PATH | os.O_DIRECTORY)
                opened.append(cwd)
                stack, where = [cwd], [p for p in (self.cwd or "").split("/") if p]
            queue = deque(p for p in path.split("/"))
            hops, link_ctime = 0, 0.0
            while queue:
                name = queue.popleft()
                if name in ("", "."):
                    continue
                if name == "..":
                    if len(stack) > 1:
                        stack.pop()
                        where = where[:-1]
                    continue
                st = os.stat(name, dir_fd=stack[-1], follow_symlinks=False)
                if stat.S_ISLNK(st.st_mode):
                    hops += 1
                    if hops > 40:
                        raise OSError("too many symbolic links")
                    link_ctime = max(link_ctime, st.st_ctime)
                    target = os.readlink(name, dir_fd=stack[-1])
                    if target.startswith("/"):
                        stack, where = [root], []
                    queue.extendleft(reversed(target.split("/")))
                    continue
                if queue and any(q not in ("", ".") for q in queue):
                    if not stat.S_ISDIR(st.st_mode):
                        raise NotADirectoryError(name)
                    fd = os.open(name, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW,
                                 dir_fd=stack[-1])
                    opened.append(fd)
                    stack.append(fd)
                    where.append(name)
                    continue
                if stat.S_ISDIR(st.st_mode):
                    raise IsADirectoryError(name)
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK,
                             dir_fd=stack[-1])
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    os.close(fd)
                    raise OSError(f"{name} is not a regular file")
                resolved = "/" + "/".join([*where, name]) if (absolute or where) else path
                return fd, resolved, link_ctime
            raise IsADirectoryError(path)
        finally:
            for fd in opened:
                os.close(fd)

    def is_folder(self, path: str) -> bool:
        try:
            fd, _, _ = self.open(path)
            os.close(fd)
            return False
        except IsADirectoryError:
            return True
        except OSError:
            return False

    def exists(self, path: str) -> bool:
        try:
            fd, _, _ = self.open(path)
            os.close(fd)
            return True
        except OSError:
            return False


@dataclass
class Read:
    """One file as read: content (None past the cap), digest, size, why not kept."""

    path: str | None
    data: bytes | None = None
    sha256: str | None = None
    size: int | None = None
    binary: bool = False
    why: str | None = None
    changed_after_start: bool | None = None


def read_fd(fd: int, start: float | None = None, link_ctime: float = 0.0,
            path: str | None = None) -> Read:
    """Hash the file open at `fd` (from offset 0), keep its bytes up to MAX_CAPTURE_BYTES."""
    st = os.fstat(fd)
    digest, size, kept = hashlib.sha256(), 0, bytearray()
    while size < MAX_HASH_BYTES:
        chunk = os.pread(fd, 1 << 20, size)
        if not chunk:
            break
        digest.update(chunk)
        if size < MAX_CAPTURE_BYTES + 1:
            kept += chunk[:MAX_CAPTURE_BYTES + 1 - size]
        size += len(chunk)
    out = Read(path, size=size)
    if size >= MAX_HASH_BYTES:
        out.why = f"over {MAX_HASH_BYTES} bytes: neither kept nor hashed whole"
        return out
    out.sha256 = digest.hexdigest()
    head = bytes(kept[:TEXT_PROBE])
    out.binary = b"\0" in head or head.startswith(b"\x7fELF")
    if size > MAX_CAPTURE_BYTES:
        out.why = f"over the capture cap ({MAX_CAPTURE_BYTES} bytes): hashed, not kept"
    else:
        out.data = bytes(kept)
    if start is not None:
        out.changed_after_start = max(st.st_ctime, link_ctime) > start + START_SLACK_S
    return out


# ---------------------------------------------------------------------------- /proc helpers
NOT_PLACES = {"proc", "sysfs", "devpts", "mqueue", "cgroup", "cgroup2", "securityfs",
              "debugfs", "tracefs", "bpf", "pstore", "configfs", "fusectl", "hugetlbfs"}


def proc_read(path: str, limit: int = 1 << 20) -> bytes | None:
    try:
        with open(path, "rb") as handle:
            return handle.read(limit)
    except OSError:
        return None


def proc_link(path: str) -> str | None:
    try:
        return os.readlink(path)
    except OSError:
        return None


def mount_table(pid: int) -> list[tuple[str, bool]]:
    """(mount point, writable) of a process's mount namespace."""
    out = []
    for line in (proc_read(f"/proc/{pid}/mountinfo", 4 << 20) or b"").decode(
            "utf-8", "replace").splitlines():
        left, _, right = line.partition(" - ")
        fields = left.split()
        if len(fields) < 6:
            continue
        point = fields[4].replace("\\040", " ").replace("\\011", "\t").replace("\\134", "\\")
        fstype = right.split()[0] if right else ""
        writable = "rw" in fields[5].split(",") and fstype not in NOT_PLACES
        out.append((point, writable))
    return out


def strip_deleted(path: str | None) -> str | None:
    if path and path.endswith(" (deleted)"):
        return path[:-len(" (deleted)")]
    return path


def absolute(path: str | None, cwd: str | None) -> str | None:
    if not path:
        return None
    if path.startswith("/"):
        return posixpath.normpath(path)
    return posixpath.normpath(posixpath.join(cwd or "/", path))


@dataclass
class Proc:
    """What the recorder keeps of one live process between samples."""


    pid: int
    ticks: int
    start: float
    ppid: int
    image: int
    cmdline: bytes
    seen: float
    last_seen: float
    writes: set[str] = field(default_factory=set)
    libraries: set[str] = field(default_factory=set)
    maps_at: float = 0.0
    python: bool = False
    exe_pending: str | None = None   # checked at the next sample, the process settled
    auxv: bytes | None = None        # its auxiliary vector: the same after a fork, not an exec
    exe: str | None = None


@dataclass
class Stat:
    state: str
    ppid: int
    pgid: int
    ticks: int


def read_stat(pid: int) -> Stat | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            raw = handle.read()
    except OSError:
        return None
    fields = raw[raw.rindex(b")") + 2:].split()
    try:
        return Stat(fields[0].decode(), int(fields[1]), int(fields[2]), int(fields[19]))
    except (IndexError, ValueError):
        return None
