"""Python's own ways to more code, read for the process recorder: the local modules a script
imports (found beside it, in its working folder or on its PYTHONPATH, followed up to
MAX_IMPORTS files a process; a top-level import found nowhere of the agent's is recorded so the
analysis can tell an installed library from a folder added at run time), the `-m` module's
package chain, and the start-up files the interpreter runs by itself (sitecustomize,
usercustomize and the `.pth` files of the user's site folder).
"""

from __future__ import annotations

import ast
import os
import posixpath
import sys

from a2c.runtime.process_code import PYTHON, Proc, View, proc_read

MAX_IMPORTS = 64                    # local modules followed per process


def imported_modules(source: bytes) -> list[tuple[str, int]]:
    """(module, level) of every import in a Python source; `from a import b` gives a and a.b
    (b may be a module), relative imports their level."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    out: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(alias.name, 0) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            out.append((base, node.level))
            out += [(f"{base}.{alias.name}" if base else alias.name, node.level)
                    for alias in node.names if alias.name != "*"]
    return out


class ImportCapture:
    """A mixin of the recorder's per-process half (process_capture.CodeCapture)."""

    def _package_chain(self, proc: Proc, view: View, module: str, root: str, how: str,
                       main: bool = False, by: str | None = None) -> tuple[list, bool]:
        """Read `module` under `root` (its packages' __init__ files, then the module, or for
        `-m` a package's __main__; a folder without __init__.py is a namespace package): (the
        files read, whether its first part is there at all)."""
        parts = [p for p in module.split(".") if p]
        found: list = []
        top = False
        for i in range(len(parts)):
            base = posixpath.join(root, *parts[:i + 1])
            last = i == len(parts) - 1
            names = [posixpath.join(base, "__init__.py")]
            if last:
                names = [base + ".py", *names]
                if main:
                    names.append(posixpath.join(base, "__main__.py"))
            got = False
            for name in names:
                read = self._read_path(proc, view, name)
                if read is not None:
                    got = True
                    found.append(read)
                    self._kept(proc, read, how=how if last else "import", language="python",
                               module=module if last else None, by=by)
                    if name.endswith("__init__.py") and not (last and main):
                        break
            if not got and not view.is_folder(base):
                break
            top = top or i == 0
        return found, top

    def _imports(self, proc: Proc, view: View, source: bytes, path: str | None,
                 roots: list[str]) -> None:
        """The local modules a script imports (beside it, in its roots), followed up to
        MAX_IMPORTS files for this process."""
        budget = [MAX_IMPORTS]
        done: set[str] = set()
        queue = [(source, path)]
        while queue and budget[0] > 0:
            text, where = queue.pop(0)
            for module, level in imported_modules(text):
                if level:
                    if not where:
                        continue
                    base = posixpath.dirname(where)
                    for _ in range(level - 1):
                        base = posixpath.dirname(base)
                    search = [base]
                else:
                    search = roots
                there = False
                for root in search:
                    key = f"{root}:{module}"
                    if key in done or budget[0] <= 0:
                        continue
                    done.add(key)
                    found, there = self._package_chain(proc, view, module, root, how="import",
                                                       by=where)
                    for read in found:
                        budget[0] -= 1
                        if read.data is not None and read.path not in done:
                            done.add(read.path)
                            queue.append((read.data, read.path))
                    if there:
                        break
                top = module.split(".")[0]
                if there:
                    done.add(f"top:{top}")
                elif top and f"top:{top}" not in done and (
                        level or top not in sys.stdlib_module_names):
                    done.add(f"top:{top}")
                    self._code_line(proc, how="import", language="python", module=top,
                                    captured=False, by=where,
                                    why="relative import not found beside it" if level else
                                    "not beside it, in its working folder or on PYTHONPATH")

    def _startup(self, proc: Proc, view: View, env: dict[str, str], python_path: list[str],
                 exe: str | None) -> None:
        """Files the interpreter runs before the program: sitecustomize/usercustomize on
        PYTHONPATH or in the user's site folder, and that folder's .pth files."""
        for root in [*python_path, *self._user_sites(proc.pid, view, env, exe)]:
            for name in ("sitecustomize.py", "usercustomize.py"):
                read = self._read_path(proc, view, posixpath.join(root, name))
                if read is not None:
                    self._kept(proc, read, how="startup", language="python")
        for site in self._user_sites(proc.pid, view, env, exe):
            for name in self._list(proc.pid, site):
                if name.endswith(".pth"):
                    read = self._read_path(proc, view, posixpath.join(site, name))
                    if read is not None:
                        self._kept(proc, read, how="startup", language="python")

    def _user_sites(self, pid: int, view: View, env: dict[str, str],
                    exe: str | None = None) -> list[str]:
        if env.get("PYTHONNOUSERSITE"):
            return []
        base = env.get("PYTHONUSERBASE") or (posixpath.join(env["HOME"], ".local")
                                              if env.get("HOME", "").startswith("/") else None)
        if not base:
            return []
        lib = posixpath.join(base, "lib")
        names = [n for n in self._list(pid, lib) if PYTHON.match(n)]
        return [posixpath.join(lib, n, "site-packages") for n in names]

    def _list(self, pid: int, folder: str) -> list[str]:
        """Names in a folder of the process's view (its mount namespace, its root)."""
        try:
            return sorted(os.listdir(f"/proc/{pid}/root{folder}"))[:200] \
                if not os.path.islink(f"/proc/{pid}/root{folder}") else []
        except OSError:
            return []

    def _environ(self, pid: int) -> dict[str, str]:
        raw = proc_read(f"/proc/{pid}/environ", 1 << 20) or b""
        env = {}
        for item in raw.split(b"\0"):
            key, sep, value = item.partition(b"=")
            if sep and key in (b"PYTHONPATH", b"HOME", b"PYTHONUSERBASE", b"PYTHONNOUSERSITE",
                               b"PYTHONSTARTUP"):
                env[key.decode()] = value.decode("utf-8", "surrogateescape")
        return env
