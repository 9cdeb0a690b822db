"""Reading the code one of the agent's processes runs: the process recorder's half that looks at
a single process (runtime/process_record.py samples and decides which processes are the agent's).

`CodeCapture._code` is called once per program image of a process: for an interpreter
(runtime/process_code.py says which and reads its arguments) it records the inline code, the
script (through the process's own open descriptor when it holds one, else by path in its view),
the `-m` module when the agent's own (the working folder, PYTHONPATH, the user's site folder),
the standard input when it is a file, and (process_imports.py) the local modules the script
imports and the interpreter's start-up files; for any other program run from a place the agent
can write, that it is a compiled program. Every file is hashed, redacted and kept once
(a2c.contracts.process_record.RecordWriter.store). `_libraries` records compiled libraries a
Python process loaded from such a place (its /proc/PID/maps, build caches aside).
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import re
from typing import Any

from a2c.contracts.process_record import CodeSeen
from a2c.runtime.process_code import (
    Proc,
    View,
    absolute,
    mount_table,
    proc_link,
    proc_read,
    read_fd,
    strip_deleted,
    targets,
)
from a2c.runtime.process_imports import ImportCapture
from a2c.runtime.redact import redact_bytes

# build caches an honest run loads compiled code from (torch.compile, triton, extensions)
COMPILE_CACHES = re.compile(r"torchinductor|triton|torch_extensions|/\.cache/|__pycache__|"
                            r"/vllm/|/flashinfer/")


class CodeCapture(ImportCapture):
    """The per-process half of ProcessRecorder (a mixin: it uses the recorder's writer,
    secrets, places and counters)."""

    def _code(self, proc: Proc, argv: list[str], cwd: str | None, exe: str | None,
              kind: str | None, title_only: bool = False) -> None:
        """The code of one program image; `title_only`: a rewritten command line of the same
        program (what its arguments name is read; no program from standard input is implied)."""
        view = View(proc.pid, cwd)
        proc.exe_pending = strip_deleted(exe) if exe and kind is None and not title_only \
            else None
        env = self._environ(proc.pid) if kind == "python" else {}
        python_path = [p for p in env.get("PYTHONPATH", "").split(":") if p.startswith("/")]
        for target in targets(exe, argv):
            if target.how == "inline":
                data = (target.text or "").encode("utf-8", "surrogateescape")
                self._keep(proc, data, how="inline", language=target.language, path=None)
                if target.language == "python":
                    self._imports(proc, view, data, None, [cwd or "/", *python_path])
            elif target.how in ("script", "argument"):
                read = self._read_script(proc, view, target.path or "")
                if read is None:
                    self._code_line(proc, how=target.how, language=target.language,
                                    path=target.path, captured=False,
                                    why="not there when the process was first seen (deleted, "
                                        "moved or never a file)",
                                    agent_place=self._agent_place(proc.pid, absolute(target.path,
                                                                                 cwd)))
                    continue
                self._kept(proc, read, how=target.how, language=target.language)
                if target.language == "python" and read.data is not None:
                    roots = [posixpath.dirname(read.path or "") or "/", *python_path]
                    self._imports(proc, view, read.data, read.path, roots)
            elif target.how == "module":
                self._module(proc, view, target.module or "", [cwd or "/", *python_path], env)
            elif target.how == "stdin" and not title_only:
                self._stdin(proc, target.language)
        if kind == "python" and not title_only:
            self._startup(proc, view, env, python_path, exe)

    def _program(self, proc: Proc, exe: str) -> None:
        """A compiled program run from a place the agent can write: recorded (hashed), a gap.
        Read one sample after first sight: a sandbox being set up shows its mounts unfinished."""
        if not self._agent_place(proc.pid, exe):
            return
        try:
            fd = os.open(f"/proc/{proc.pid}/exe", os.O_RDONLY)
        except OSError as exc:
            self._code_line(proc, how="exe", language="binary", path=exe, captured=False,
                            why=f"could not be read: {exc.strerror}", agent_place=True)
            return
        try:
            read = read_fd(fd, proc.start, path=exe)
        finally:
            os.close(fd)
        self._code_line(proc, how="exe", language="binary", path=exe, captured=False,
                        sha256=read.sha256, size=read.size, agent_place=True,
                        why="a compiled program from a place the agent can write: what it does "
                            "cannot be read")

    def _read_script(self, proc: Proc, view: View, path: str):
        """The script: through an open descriptor of the process when it holds one (the inode
        that runs, even deleted), else by path in its view."""
        want = absolute(path, view.cwd)
        for fd_name, target in self._fds(proc.pid):
            if strip_deleted(target) == want:
                try:
                    fd = os.open(f"/proc/{proc.pid}/fd/{fd_name}", os.O_RDONLY)
                except OSError:
                    break
                try:
                    return read_fd(fd, proc.start, path=want)
                finally:
                    os.close(fd)
        try:
            fd, resolved, link_ctime = view.open(path)
        except OSError:
            return None
        try:
            return read_fd(fd, proc.start, link_ctime, path=resolved)
        finally:
            os.close(fd)

    def _module(self, proc: Proc, view: View, module: str, roots: list[str],
                env: dict[str, str]) -> None:
        """`python -m MODULE`: its file when it is the agent's (the working folder, PYTHONPATH,
        the user's site folder), else an installed module (the analysis reads it)."""
        for root in [*roots, *self._user_sites(proc.pid, view, env)]:
            found, _ = self._package_chain(proc, view, module, root, how="module", main=True)
            if found:
                return
        self._code_line(proc, how="module", language="python", module=module, captured=False,
                        why="not in the working folder, on PYTHONPATH or in the user's site "
                            "folder: an installed module")

    def _read_path(self, proc: Proc, view: View, path: str):
        try:
            fd, resolved, link_ctime = view.open(path)
        except OSError:
            return None
        try:
            return read_fd(fd, proc.start, link_ctime, path=resolved)
        finally:
            os.close(fd)

    def _stdin(self, proc: Proc, language: str) -> None:
        target = proc_link(f"/proc/{proc.pid}/fd/0") or ""
        if target.startswith("/") and not target.startswith("/dev/"):
            try:
                fd = os.open(f"/proc/{proc.pid}/fd/0", os.O_RDONLY)
            except OSError:
                fd = None
            if fd is not None:
                try:
                    read = read_fd(fd, proc.start, path=strip_deleted(target))
                finally:
                    os.close(fd)
                self._kept(proc, read, how="stdin", language=language)
                return
        what = "a pipe" if target.startswith("pipe:") else target or "unknown"
        self._code_line(proc, how="stdin", language=language, captured=False, path=None,
                        why=f"its program comes from standard input ({what})")

    # ------------------------------------------------------------------ keeping
    def _kept(self, proc: Proc, read, how: str, language: str, module: str | None = None,
              by: str | None = None) -> None:
        if read.data is not None:
            stored, redacted = self._store(read.data)
        else:
            stored, redacted = None, None
        captured = read.data is not None and not read.binary
        why = read.why or ("binary content" if read.binary else None)
        self._code_line(proc, how=how, language="binary" if read.binary else language,
                        path=read.path, module=module, captured=captured,
                        sha256=read.sha256, size=read.size, file=stored if captured else None,
                        why=why, agent_place=self._agent_place(proc.pid, read.path),
                        changed_after_start=read.changed_after_start, redacted=redacted, by=by)
        if captured and read.path:
            self._note_ran(read.path)

    def _keep(self, proc: Proc, data: bytes, how: str, language: str, path: str | None) -> None:
        stored, redacted = self._store(data)
        self._code_line(proc, how=how, language=language, path=path, captured=True,
                        sha256=hashlib.sha256(data).hexdigest(), size=len(data), file=stored,
                        redacted=redacted)

    def _store(self, data: bytes) -> tuple[str, bool | None]:
        clean = redact_bytes(data, self.secrets) if self.secrets else data
        return self.writer.store(clean), (True if clean != data else None)

    def _code_line(self, proc: Proc, **fields: Any) -> None:
        if fields.get("captured"):
            self.captured += 1
        self.writer.write(CodeSeen(pid=proc.pid, start=proc.start, image=proc.image,
                                   **fields))

    def _note_ran(self, path: str) -> None:
        """A workspace file seen running: every later snapshot keeps it (runtime/snapshots.py)."""
        if self.ran_file is None:
            return
        for view in self.workspace_views:
            if path.startswith(view + "/"):
                rel = path[len(view) + 1:]
                if rel and rel not in self.ran and "\n" not in rel:
                    self.ran.add(rel)
                    try:
                        self.ran_file.parent.mkdir(parents=True, exist_ok=True)
                        with open(self.ran_file, "a", encoding="utf-8") as handle:
                            handle.write(rel + "\n")
                    except OSError:
                        pass
                return

    # ------------------------------------------------------------------ files open
    def _fds(self, pid: int) -> list[tuple[str, str]]:
        folder = f"/proc/{pid}/fd"
        try:
            names = os.listdir(folder)
        except OSError:
            return []
        out = []
        for name in names:
            target = proc_link(f"{folder}/{name}")
            if target and target.startswith("/"):
                out.append((name, target))
        return out

    def _libraries(self, proc: Proc) -> None:
        """Compiled libraries loaded from a place the agent can write (not a build cache): the
        file's digest (through /proc/PID/map_files, so a copy deleted once loaded is read too;
        else by path), or without either the digests of its executable segments (what the
        analysis compares with an installed library of that name)."""
        raw = proc_read(f"/proc/{proc.pid}/maps", 16 << 20) or b""
        maps: dict[str, list[list[str]]] = {}
        for line in raw.decode("utf-8", "surrogateescape").splitlines():
            parts = line.split(None, 5)
            path = strip_deleted(parts[5].strip()) if len(parts) == 6 else ""
            if path.startswith("/") and ".so" in path and path not in proc.libraries and \
                    not COMPILE_CACHES.search(path):
                maps.setdefault(path, []).append(parts)
        for path, regions in maps.items():
            proc.libraries.add(path)
            if not self._agent_place(proc.pid, path):
                continue
            read = segments = None
            try:
                fd = os.open(f"/proc/{proc.pid}/map_files/{regions[0][0]}", os.O_RDONLY)
                try:
                    read = read_fd(fd, path=path)
                finally:
                    os.close(fd)
            except OSError:
                read = self._read_path(proc, View(proc.pid, None), path)
            if read is None:
                segments = _segments(proc.pid, regions)
            self._code_line(proc, how="library", language="binary", path=path,
                            captured=False, agent_place=True,
                            sha256=read.sha256 if read else None,
                            size=read.size if read else None, segments=segments,
                            why="a compiled library from a place the agent can write was "
                                "loaded: what it does cannot be read")

    # ------------------------------------------------------------------ places
    def _agent_place(self, pid: int, path: str | None) -> bool | None:
        """Whether the agent can write `path` (as the process sees it): a read-write mount of
        its sandbox (its mount table read now), or on an unconfined run one of `places`."""
        if not path or not path.startswith("/"):
            return None
        mnt = proc_link(f"/proc/{pid}/ns/mnt")
        if mnt is None:
            return None
        if mnt == self.own_mnt:
            return any(path == p or path.startswith(p + "/") for p in self.places)
        best, writable = "", None
        for point, rw in mount_table(pid):
            if (path == point or path.startswith(point.rstrip("/") + "/")) and \
                    len(point) >= len(best):
                best, writable = point, rw
        return writable

    def _redact_text(self, text: str) -> str:
        if not self.secrets:
            return text
        data = text.encode("utf-8", "surrogateescape")
        clean = redact_bytes(data, self.secrets)
        return text if clean == data else clean.decode("utf-8", "surrogateescape")


def _segments(pid: int, regions: list[list[str]], limit: int = 64 << 20) -> list | None:
    """[[file offset, size, sha256]] of a library's executable segments (its code: file pages
    the loader never relocates), read from the process's memory, up to `limit` bytes; None when
    unreadable."""
    out, total = [], 0
    try:
        with open(f"/proc/{pid}/mem", "rb", buffering=0) as mem:
            for region in regions:
                if "x" not in region[1] or "w" in region[1]:
                    continue
                start, end = (int(x, 16) for x in region[0].split("-"))
                total += end - start
                if total > limit:
                    return None
                mem.seek(start)
                out.append([int(region[2], 16), end - start,
                            hashlib.sha256(mem.read(end - start)).hexdigest()])
    except (OSError, ValueError):
        return None
    return out or None
