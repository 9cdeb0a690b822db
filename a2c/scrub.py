"""What a record that leaves the machine must not hold: host folders, and secrets in any of
their usual encodings.

Host folders are named symbolically: the run directory is `$RUNS/<id>`, the runs folder `$RUNS`,
a2c's cache (models, baselines) `$A2C_CACHE`, the project checkout `$PROJECT`, the installed a2c
package `$A2C`, the Python prefix `$PYTHON`, the operator's home `$HOME` (`host_roots`,
`symbolize`, `host_paths_in`). A root is replaced only as a whole path component ("/root/x"
becomes "$HOME/x", "/rootfs" stays; a one-component root like "/root" only with a path under it),
longest root first, in one pass. At write time the run names
its base model folder the same way (`record_path`: `$A2C_CACHE/...` or `$HOME/...`, the two roots
that are the operator's own and stable across its commands), and `expand_path` gives the folder
back to the runtime (`a2c run --resume`, the sandbox's bind).

A secret is looked for, and redacted, in its encoded forms too (`encoded_forms`): reversed, hex,
URL-encoded and base64 at every alignment (runtime/redact.py redacts a run's logs and snapshots
with them; `a2c export --public` scans with them).
"""

from __future__ import annotations

import base64
import os
import re
import sys
from pathlib import Path
from urllib.parse import quote_plus

CACHE, HOME, RUNS, PROJECT, PACKAGE, PYTHON = ("$A2C_CACHE", "$HOME", "$RUNS", "$PROJECT",
                                               "$A2C", "$PYTHON")
_NAME = rb"[\w.\-]"


def _forms(path: Path) -> set[str]:
    """The absolute spellings of `path`: as given (made absolute) and resolved."""
    out = {os.path.abspath(path)}
    try:
        out.add(str(Path(path).resolve()))
    except OSError:
        pass
    return {p.rstrip("/") for p in out if len(Path(p).parts) > 1}   # never "/" itself


def _cache_dir() -> Path | None:
    from a2c.paths import cache_dir
    try:
        return cache_dir()
    except OSError:
        return None


def host_roots(run_dir: str | Path | None = None) -> list[tuple[str, str]]:
    """(absolute host folder, symbol), longest folder first: the run directory and its runs
    folder (when `run_dir` is given), a2c's cache, the project checkout (only a real one), the
    installed package, the Python prefix, the home folder."""
    from a2c.paths import PACKAGE_ROOT, project_root
    named: list[tuple[Path | None, str]] = []
    if run_dir is not None:
        run_dir = Path(run_dir)
        named += [(run_dir, f"{RUNS}/{Path(os.path.abspath(run_dir)).name}"),
                  (Path(os.path.abspath(run_dir)).parent, RUNS)]
    project = project_root()
    named += [(_cache_dir(), CACHE),
              (project if (project / "pyproject.toml").is_file() else None, PROJECT),
              (PACKAGE_ROOT, PACKAGE), (Path(sys.prefix), PYTHON), (Path.home(), HOME)]
    roots: dict[str, str] = {}
    for path, symbol in named:
        if path is None:
            continue
        for form in _forms(path):
            roots.setdefault(form, symbol)
    return sorted(roots.items(), key=lambda kv: (-len(kv[0]), kv[0]))


def _pattern(roots: list[tuple[str, str]]) -> re.Pattern[bytes] | None:
    """One pattern for every root, as a whole path component; a root of one component ("/root",
    "/data") only with a path under it ("/root/x": a bare "/root" is too common a word to be one
    host's folder)."""
    if not roots:
        return None
    alternatives = b"|".join(re.escape(os.fsencode(path)) + (b"(?=/)" if path.count("/") < 2
                                                              else b"")
                             for path, _ in roots)
    return re.compile(rb"(?<!" + _NAME + rb")(?:" + alternatives + rb")(?!" + _NAME + rb")")


def symbolize_bytes(data: bytes, roots: list[tuple[str, str]]) -> bytes:
    """`data` with every host root replaced by its symbol."""
    pattern = _pattern(roots)
    if pattern is None:
        return data
    table = {os.fsencode(path): symbol.encode() for path, symbol in roots}
    return pattern.sub(lambda m: table[m.group(0)], data)


def symbolize(text: str, roots: list[tuple[str, str]]) -> str:
    return symbolize_bytes(text.encode("utf-8", "surrogateescape"), roots).decode(
        "utf-8", "surrogateescape")


def host_paths_in(data: bytes, roots: list[tuple[str, str]]) -> list[str]:
    """The symbols of the host roots that occur in `data` (sorted, once each)."""
    pattern = _pattern(roots)
    if pattern is None:
        return []
    table = {os.fsencode(path): symbol for path, symbol in roots}
    return sorted({table[m.group(0)] for m in pattern.finditer(data)})


def record_path(path: str | Path) -> str:
    """How a run records a host folder it will use again (its base model): under a2c's cache as
    `$A2C_CACHE/...`, else under the home folder as `$HOME/...`, else absolute."""
    path = Path(os.path.abspath(path))
    for root, symbol in ((_cache_dir(), CACHE), (Path.home(), HOME)):
        if root is None:
            continue
        for form in sorted(_forms(root), key=len, reverse=True):
            if path == Path(form):
                return symbol
            if Path(form) in path.parents:
                return f"{symbol}/{path.relative_to(form).as_posix()}"
    return str(path)


def expand_path(recorded: str | Path) -> Path:
    """The host folder a `record_path` names (an absolute path is returned as it is)."""
    text = str(recorded)
    for symbol, root in ((CACHE, _cache_dir), (HOME, Path.home)):
        if text == symbol or text.startswith(symbol + "/"):
            base = root()
            if base is not None:
                return Path(str(base) + text[len(symbol):])
    return Path(text)


MIN_FORM_LEN = 8   # an encoded form shorter than this is not looked for (too many false hits)


def _base64_cores(value: bytes, encode) -> list[tuple[str, bytes]]:
    """The part of `encode(...)` of any text holding `value` that depends on `value` alone, at
    each alignment (value starting at byte 0, 1 or 2 of a 3-byte group): the 4-character groups
    that hold only its bytes, padding stripped."""
    out = []
    for shift in range(3):
        text = encode(b"\0" * shift + value)
        head = 4 if shift else 0
        tail = 4 if (shift + len(value)) % 3 else 0
        core = text[head:len(text) - tail].rstrip(b"=")
        if len(core) >= MIN_FORM_LEN:
            out.append((f"base64@{shift}", core))
    return out


def encoded_forms(value: bytes) -> list[tuple[str, bytes]]:
    """(form name, bytes) of `value` as it may be written encoded: raw, reversed, hex (lower and
    upper), URL-encoded (every byte %XX in both cases, and quote_plus) and base64 (standard and
    URL-safe, every alignment). Forms shorter than MIN_FORM_LEN, and repeats, are left out."""
    forms: list[tuple[str, bytes]] = [("", value), ("reversed", value[::-1]),
                                      ("hex", value.hex().encode()),
                                      ("hex", value.hex().upper().encode()),
                                      ("url", "".join(f"%{b:02x}" for b in value).encode()),
                                      ("url", "".join(f"%{b:02X}" for b in value).encode()),
                                      ("url", quote_plus(value).encode())]
    forms += _base64_cores(value, base64.b64encode)
    forms += [(name + "-urlsafe", core) for name, core in
              _base64_cores(value, base64.urlsafe_b64encode)]
    seen: set[bytes] = set()
    out = []
    for name, form in forms:
        if form and form not in seen and (not name or len(form) >= MIN_FORM_LEN):
            seen.add(form)
            out.append((name, form))
    return out
