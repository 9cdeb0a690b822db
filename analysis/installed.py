"""What this machine has installed, for the process evidence (analysis/processes.py): whether a
compiled file the agent ran is a byte-for-byte copy of an installed one (then it is no code of
the agent's), and whether a module the agent imported or ran exists here (found, never
imported). The answers are about the analysing machine, which is why they live apart.
"""

from __future__ import annotations

import posixpath

_BINARIES: dict[str, list[str]] = {}


def installed_copy(path: str, sha256: str | None, segments: list | None = None) -> bool:
    """Whether a compiled file of the agent's is a byte-for-byte copy of one this machine has
    installed under the same name (a library that copies its .so to a temporary folder, as
    jericho's libfrotz.so does; a program copied from PATH): by the whole file's digest, or by
    its executable segments' as the process mapped them (`segments`: [[offset, size, sha256]])."""
    if not sha256 and not segments:
        return False
    import hashlib
    import os
    import shutil
    import sys
    name = posixpath.basename(path)
    if not _BINARIES:
        _BINARIES["_"] = []
        for root in {p for p in sys.path if p and os.path.isdir(p) and "site-packages" in p}:
            for folder, _dirs, files in os.walk(root):
                for file in files:
                    if ".so" in file:
                        _BINARIES.setdefault(file, []).append(os.path.join(folder, file))
    candidates = list(_BINARIES.get(name, []))
    if shutil.which(name):
        candidates.append(shutil.which(name))
    for candidate in candidates:
        try:
            with open(candidate, "rb") as handle:
                if sha256:
                    digest = hashlib.sha256()
                    for chunk in iter(lambda: handle.read(1 << 20), b""):
                        digest.update(chunk)
                    if digest.hexdigest() == sha256:
                        return True
                    continue
                same = True
                for offset, size, want in segments or []:
                    handle.seek(int(offset))
                    data = handle.read(int(size))
                    data += b"\0" * (int(size) - len(data))   # the last page, zero-filled
                    same = same and hashlib.sha256(data).hexdigest() == want
                if same:
                    return True
        except (OSError, TypeError, ValueError):
            continue
    return False


def installed_module(module: str) -> bool:
    """Whether this machine has the top-level module `module` (found, never imported)."""
    import importlib.util
    try:
        return importlib.util.find_spec(module.split(".")[0]) is not None
    except (ImportError, ValueError):
        return False
