"""Secret values kept out of the run's record: keys passed to the agent (`launch.pass_env`), the
per-run grader token (A2C_TOKEN) and the driver gateway key (A2C_DRIVER_KEY).

The rule for passed keys: a passed variable is a secret when its value has at least 8 characters,
or when its name looks like one (KEY, TOKEN, SECRET, PASSWORD, CREDENTIAL, AUTH) and the value has
at least 4. The runner adds the grader token and the gateway key, whatever their names. Each value
is replaced by `[redacted:NAME]` in logs/agent.log, logs/commands.log and the transcript copy at
the end of the run, in every code snapshot (runtime/snapshots.py reads the values from
`snapshots.git/a2c-redact.json`, 0600, which the runner writes before the agent starts and removes
once the final snapshot is taken), and in the files the run keeps of the agent's own folders
(`redact_tree`: the workspace, its HOME and /tmp), so a token the agent wrote into a 0644 file
does not outlive the run in its record.

Each value is redacted in its encoded forms too (`encoded_forms`): reversed, hex (both cases),
URL-encoded (every byte as %XX, both cases, and `quote_plus`), and base64 (standard and URL-safe, at
each of the three byte alignments a value can take inside a longer encoded text, so the encoding
of "token: VALUE" is caught as well as that of VALUE alone). A form is replaced by
`[redacted:NAME:FORM]`. The run's own secrets (the grader token, the gateway key) are dead once
the run ends: the grader service and the gateway stop with it, so a value that escaped is no
longer accepted anywhere; the public export (analysis/export.py) scans for the same forms.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Mapping
from pathlib import Path

from a2c.contracts.spec import AgentSpec, LaunchSpec
from a2c.scrub import encoded_forms

SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH", re.IGNORECASE)
MIN_LEN = 8
MIN_LEN_NAMED = 4
REDACT_FILE = "a2c-redact.json"
CHUNK = 1 << 20
TREE_MAX_FILE = 256 << 20   # `redact_tree` leaves larger files (checkpoints) alone


def passed_secrets(agent: AgentSpec, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """{name: value} of the agent's pass_env variables that the rule calls secrets."""
    environ = os.environ if environ is None else environ
    out: dict[str, str] = {}
    launch = agent.launch if isinstance(agent.launch, LaunchSpec) else LaunchSpec()
    for key in launch.pass_env or []:
        key = str(key)
        value = environ.get(key)
        if not value or key.startswith("A2C_"):
            continue
        if len(value) >= MIN_LEN or (SECRET_NAME.search(key) and len(value) >= MIN_LEN_NAMED):
            out[key] = value
    return out


def _pairs(secrets: Mapping[str, str]) -> list[tuple[bytes, bytes]]:
    pairs = []
    for k, v in secrets.items():
        if not v:
            continue
        for form, data in encoded_forms(v.encode()):
            pairs.append((data, f"[redacted:{k}{':' + form if form else ''}]".encode()))
    return sorted(pairs, key=lambda p: -len(p[0]))   # longest first: a value inside another


def redact_bytes(data: bytes, secrets: Mapping[str, str]) -> bytes:
    for value, mark in _pairs(secrets):
        data = data.replace(value, mark)
    return data


def contains(data: bytes, secrets: Mapping[str, str]) -> bool:
    return any(value in data for value, _ in _pairs(secrets))


def redact_file(path: str | Path, secrets: Mapping[str, str]) -> int:
    """Rewrite a runtime-owned log in place (streamed, atomic); returns how many values it held.

    A symlink or anything but a regular file at `path` is left alone (returns -1)."""
    path = Path(path)
    pairs = _pairs(secrets)
    if not pairs:
        return 0
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return -1
    overlap = max(len(v) for v, _ in pairs) - 1
    found = 0
    tmp = path.with_name(f".{path.name}.redact.tmp")
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return -1
        with open(fd, "rb", closefd=False) as src, open(tmp, "wb") as dst:
            carry = b""
            while True:
                chunk = src.read(CHUNK)
                buf = carry + chunk
                for value, mark in pairs:
                    found += buf.count(value)
                    buf = buf.replace(value, mark)
                if not chunk:
                    dst.write(buf)
                    break
                # keep a tail that could hold the start of a value split across chunks
                cut = max(0, len(buf) - overlap)
                dst.write(buf[:cut])
                carry = buf[cut:]
        if found:
            os.chmod(tmp, os.stat(path).st_mode & 0o777)
            os.replace(tmp, path)
        return found
    finally:
        os.close(fd)
        tmp.unlink(missing_ok=True)


def write_redact_file(repo_dir: Path, secrets: Mapping[str, str]) -> None:
    repo_dir.mkdir(parents=True, exist_ok=True)
    path = repo_dir / REDACT_FILE
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with open(fd, "w", encoding="utf-8") as f:
        os.fchmod(fd, 0o600)
        json.dump(dict(secrets), f)


def read_redact_file(repo_dir: Path) -> dict[str, str]:
    try:
        return dict(json.loads((Path(repo_dir) / REDACT_FILE).read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError):
        return {}


def remove_redact_file(repo_dir: Path) -> None:
    (Path(repo_dir) / REDACT_FILE).unlink(missing_ok=True)


def redact_tree(root: str | Path, secrets: Mapping[str, str],
                max_bytes: int = TREE_MAX_FILE) -> tuple[int, list[str]]:
    """Redact every regular file under `root` (the agent's folders, once it has stopped): no
    symlink followed, files over `max_bytes` left alone. Returns (values replaced, files
    changed, relative to root)."""
    root = Path(root)
    if not _pairs(secrets) or not root.is_dir() or root.is_symlink():
        return 0, []
    total, changed = 0, []
    for dirpath, _dirs, files in os.walk(root, followlinks=False):
        for name in files:
            path = Path(dirpath) / name
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if not stat.S_ISREG(st.st_mode) or st.st_size > max_bytes or \
                    name.endswith(".redact.tmp"):
                continue
            try:
                found = redact_file(path, secrets)
            except OSError:
                continue
            if found > 0:
                total += found
                changed.append(path.relative_to(root).as_posix())
    return total, changed
