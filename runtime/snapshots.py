"""Code snapshots of the agent's workspace into a git repository outside the workspace.

The recorder keeps what the agent's code looked like at each submission and every few minutes, so
a result can be traced to the code that produced it. The repository (`RUN/snapshots.git`) is bare
and lives outside the workspace, so the agent never sees it and cannot rewrite it. Weights, data
files, the output folder, caches and anything over `max_file_bytes` are excluded by rule: a
snapshot is code and small text, not checkpoints.

The workspace is the agent's: it is read with an fd-relative walk that follows no symlink and
opens no FIFO or device, within a file-count and time budget (past either the snapshot is skipped
and the reason recorded), and the values of passed secrets are redacted from what was read; git
then commits a private staging copy of exactly those bytes, never the live workspace.

Code the agent keeps outside the workspace is kept too (`outside`: the agent's /tmp and HOME,
RUN/agent-tmp and RUN/agent-home; a2c/contracts/outside.py): their files, by the same rules plus
text only (a file with a NUL byte in its first 8 KiB is binary), go under `.a2c-outside/<name>/`
in the same tree, so a script run from /tmp is in the record next to the workspace it left. The
workspace's own top-level `.a2c-outside` is never taken (excluded), so that prefix always means
"from outside".

Snapshot exclusions never hide a workspace file that ran: the process recorder
(runtime/process_record.py) appends each workspace file it saw running to `RUN/snapshots.git/
a2c-ran`, and every snapshot takes those files whatever their folder, suffix or size (up to
`MAX_RAN_BYTES`), read the same way (no symlink followed). The recorder's own copy
(logs/processes/) is the evidence; this keeps the snapshots' timeline and diffs honest too.

Several processes may snapshot the same workspace (the grader service at each submission, the
runtime periodically); an exclusive `flock` on a lock file in the repository serialises them. A
snapshot of an unchanged workspace makes no commit and returns the previous one.
"""

from __future__ import annotations

import fnmatch
import json
import os
import shutil
import stat
import subprocess
import time
from pathlib import Path
from typing import Any

from a2c.contracts.outside import OUTSIDE_PREFIX
from a2c.fsutil import file_lock
from a2c.runtime.redact import read_redact_file, redact_bytes

MAX_FILE_BYTES = 1_000_000
MAX_RAN_BYTES = 8_000_000   # a file seen running is kept up to this, whatever the rules
RAN_FILE = "a2c-ran"        # in the repository: workspace files the process recorder saw run
MAX_FILES = 20_000          # past this many files a snapshot is skipped (reason recorded)
TIME_BUDGET_S = 20.0        # ... or past this long reading the workspace

# Directory names never descended into (matched against the name at any depth).
EXCLUDED_DIRS = (
    ".git", "__pycache__", ".cache", ".pytest_cache", ".mypy_cache", ".ruff_cache",
    ".ipynb_checkpoints",
    "node_modules", ".venv", "venv", ".tox", ".nox", "wandb", "mlruns", "runs", "checkpoints",
    "hf_cache", ".huggingface", ".triton", "site-packages", ".npm", "_cacache", ".nv",
)
# Top-level folders of the workspace never snapshotted (output/ holds the checkpoints).
EXCLUDED_TOP = ("output", OUTSIDE_PREFIX)
TEXT_PROBE = 8192           # outside files: a NUL byte in this many first bytes means binary
MAX_OUTSIDE_FILES = 2_000   # per outside folder: past this many its walk stops (never the snapshot)
# File name patterns never snapshotted: weights, data, archives, binaries.
EXCLUDED_FILES = (
    "*.safetensors", "*.bin", "*.pt", "*.pth", "*.gguf", "*.ckpt", "*.onnx", "*.h5", "*.msgpack",
    "*.npy", "*.npz", "*.pkl", "*.pickle", "*.joblib",
    "*.jsonl", "*.parquet", "*.arrow", "*.csv", "*.tsv", "*.feather", "*.sqlite", "*.db",
    "*.zip", "*.tar", "*.gz", "*.tgz", "*.bz2", "*.xz", "*.zst", "*.7z",
    "*.pyc", "*.pyo", "*.so", "*.o", "*.a", "*.lock.tmp", "*.swp",
)

_GIT_ENV = {
    "GIT_AUTHOR_NAME": "a2c recorder", "GIT_AUTHOR_EMAIL": "recorder@a2c.invalid",
    "GIT_COMMITTER_NAME": "a2c recorder", "GIT_COMMITTER_EMAIL": "recorder@a2c.invalid",
    "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0",
}
_REF = "refs/heads/main"


class SnapshotError(RuntimeError):
    pass


class Snapshotter:
    """`Snapshotter(repo_dir=RUN/"snapshots.git", workspace=RUN/"workspace").snapshot("periodic")`.

    `event_log` (an `EventLog` or a path to events.jsonl), when given, receives a `snapshot` event
    for every commit made and for every submission/final snapshot (even when nothing changed, so
    each submission names the code it came from).
    """

    def __init__(self, repo_dir: str | Path, workspace: str | Path, *, event_log: Any = None,
                 max_file_bytes: int = MAX_FILE_BYTES,
                 excluded_files: tuple[str, ...] = EXCLUDED_FILES,
                 excluded_dirs: tuple[str, ...] = EXCLUDED_DIRS,
                 excluded_top: tuple[str, ...] = EXCLUDED_TOP,
                 max_files: int = MAX_FILES, time_budget_s: float = TIME_BUDGET_S,
                 secrets: dict[str, str] | None = None,
                 outside: dict[str, str | Path] | None = None):
        self.repo_dir = Path(repo_dir).resolve()
        self.workspace = Path(workspace).resolve()
        self.outside = {name: Path(p) for name, p in (outside or {}).items()}
        self.max_file_bytes = max_file_bytes
        self.excluded_files = excluded_files
        self.excluded_dirs = set(excluded_dirs)
        self.excluded_top = set(excluded_top)
        self.max_files = max_files
        self.time_budget_s = time_budget_s
        # values to redact: given, else what the runner left for this run (runtime/redact.py)
        self.secrets = dict(secrets) if secrets is not None else read_redact_file(self.repo_dir)
        if event_log is not None and not hasattr(event_log, "append"):
            from a2c.contracts.events import EventLog
            event_log = EventLog(event_log)
        self.event_log = event_log
        self._env = {**os.environ, **_GIT_ENV,
                     "GIT_DIR": str(self.repo_dir), "GIT_WORK_TREE": str(self.repo_dir / "a2c-stage"),
                     "GIT_INDEX_FILE": str(self.repo_dir / "a2c-index")}
        self._env.pop("GIT_OBJECT_DIRECTORY", None)
        self._env.pop("GIT_ALTERNATE_OBJECT_DIRECTORIES", None)

    # ---------------------------------------------------------------- git helpers
    def _git(self, *args: str, input: bytes | None = None, cwd: Path | None = None) -> str:
        proc = subprocess.run(["git", f"--git-dir={self.repo_dir}", *args], input=input,
                              capture_output=True, env=self._env, cwd=cwd or self.repo_dir)
        if proc.returncode != 0:
            raise SnapshotError(f"git {' '.join(args[:2])} failed: "
                                f"{proc.stderr.decode(errors='replace').strip()}")
        return proc.stdout.decode(errors="replace")

    def _ensure_repo(self) -> None:
        if (self.repo_dir / "HEAD").exists():
            return
        self.repo_dir.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "init", "--quiet", "--bare", str(self.repo_dir)], check=True,
                       capture_output=True, env={**os.environ, **_GIT_ENV})
        subprocess.run(["git", f"--git-dir={self.repo_dir}", "symbolic-ref", "HEAD", _REF],
                       check=True, capture_output=True, env={**os.environ, **_GIT_ENV})
        # Large-object safety: never compress huge deltas; keep gc out of the agent's way.
        for key, value in (("gc.auto", "0"), ("core.bigFileThreshold", "1m"),
                           ("core.autocrlf", "false"), ("core.symlinks", "true")):
            subprocess.run(["git", f"--git-dir={self.repo_dir}", "config", key, value],
                           check=True, capture_output=True, env={**os.environ, **_GIT_ENV})

    def head(self) -> str | None:
        if not (self.repo_dir / "HEAD").exists():
            return None
        proc = subprocess.run(["git", f"--git-dir={self.repo_dir}", "rev-parse", "--verify",
                               "--quiet", _REF], capture_output=True, env=self._env)
        return proc.stdout.decode().strip() or None

    # ---------------------------------------------------------------- selection
    def _excluded_name(self, name: str) -> bool:
        return any(fnmatch.fnmatchcase(name, pattern) for pattern in self.excluded_files)

    def select(self) -> tuple[list[str], int, int]:
        """Files to snapshot (workspace-relative, sorted), their total bytes, and how many were
        excluded by a rule (see `collect` for the budgets)."""
        entries, excluded, _ = self.collect()
        return sorted(entries), sum(len(v[1]) for v in entries.values()), excluded

    def collect(self) -> tuple[dict[str, tuple[str, bytes]], int, str | None]:
        """{rel: (kind "file"|"exec"|"link", content)} read from the workspace (and the outside
        folders, under OUTSIDE_PREFIX) with an fd-relative walk that follows no symlink and opens
        no FIFO or device, redacted; the rule-excluded count; and why the snapshot is skipped
        (past `max_files` or `time_budget_s`), else None."""
        entries: dict[str, tuple[str, bytes]] = {}
        deadline = time.monotonic() + self.time_budget_s
        excluded, skipped = self._walk(self.workspace, "", entries, deadline, text_only=False)
        if skipped:
            return entries, excluded, skipped
        self._take_ran(entries)
        for name, root in sorted(self.outside.items()):
            if not root.is_dir():
                continue
            more, skipped = self._walk(root, f"{OUTSIDE_PREFIX}/{name}/", entries, deadline,
                                       text_only=True, limit=len(entries) + MAX_OUTSIDE_FILES)
            excluded += more
            if skipped:
                return entries, excluded, skipped
        return entries, excluded, None

    def _walk(self, root: Path, prefix: str, entries: dict[str, tuple[str, bytes]],
              deadline: float, text_only: bool, limit: int | None = None
              ) -> tuple[int, str | None]:
        """Add `root`'s files to `entries` under `prefix`. An outside folder (`limit`) stops at
        `limit` entries and never skips the snapshot: a huge HOME must not cost the workspace its
        record (what it did not keep is a gap for the analysis if it ran)."""
        excluded = 0
        try:
            top = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError as exc:
            if prefix:
                return 0, None   # an outside folder that is gone: nothing to keep
            return 0, f"workspace not readable as a folder: {exc}"
        try:
            walk = os.fwalk(".", dir_fd=top, follow_symlinks=False)
            for dirpath, dirnames, filenames, dfd in walk:
                rel_dir = os.path.normpath(dirpath)
                keep = []
                for d in dirnames:
                    if d in self.excluded_dirs or (rel_dir == "." and not prefix
                                                   and d in self.excluded_top):
                        excluded += 1
                        continue
                    keep.append(d)
                dirnames[:] = sorted(keep)
                for name in filenames:
                    rel = prefix + (name if rel_dir == "." else f"{rel_dir}/{name}")
                    if self._excluded_name(name) or "\n" in rel:
                        excluded += 1
                        continue
                    if limit is not None and len(entries) >= limit:
                        return excluded + 1, None
                    if len(entries) >= self.max_files:
                        return excluded, f"more than {self.max_files} files to snapshot"
                    if time.monotonic() > deadline:
                        return excluded, None if limit is not None else (
                            f"reading the workspace took over {self.time_budget_s:g}s")
                    entry = self._read_entry(name, dfd)
                    if entry == "excluded" or (text_only and entry is not None and
                                               entry[0] != "link" and
                                               b"\0" in entry[1][:TEXT_PROBE]):
                        excluded += 1
                    elif entry is not None:
                        entries[rel] = entry
        finally:
            os.close(top)
        return excluded, None

    def ran(self) -> list[str]:
        """Workspace files the process recorder saw running (RAN_FILE), in order."""
        try:
            text = (self.repo_dir / RAN_FILE).read_text(encoding="utf-8", errors="replace")
        except OSError:
            return []
        return list(dict.fromkeys(line for line in text.splitlines() if line))

    def _take_ran(self, entries: dict[str, tuple[str, bytes]]) -> None:
        """Add the files seen running that the rules left out (never under OUTSIDE_PREFIX),
        opened component by component without following a symlink."""
        for rel in self.ran()[:self.max_files]:
            parts = rel.split("/")
            if rel in entries or parts[0] == OUTSIDE_PREFIX or ".." in parts or "" in parts:
                continue
            try:
                fd = os.open(self.workspace, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
            except OSError:
                return
            try:
                for part in parts[:-1]:
                    nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
                    os.close(fd)
                    fd = nxt
                entry = self._read_entry(parts[-1], fd, limit=MAX_RAN_BYTES)
            except OSError:
                continue
            finally:
                os.close(fd)
            if entry is not None and entry != "excluded":
                entries[rel] = entry

    def _read_entry(self, name: str, dfd: int, limit: int | None = None):
        limit = limit or self.max_file_bytes
        try:
            st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
            if stat.S_ISLNK(st.st_mode):
                return ("link", redact_bytes(os.fsencode(os.readlink(name, dir_fd=dfd)),
                                             self.secrets))
            if not stat.S_ISREG(st.st_mode):
                return None  # sockets, fifos, devices
            if st.st_size > limit:
                return "excluded"
            kind = "exec" if st.st_mode & 0o100 else "file"
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dfd)
            try:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    return None
                data = os.read(fd, limit + 1)
            finally:
                os.close(fd)
        except OSError:
            return None   # vanished or swapped meanwhile
        if len(data) > limit:
            return "excluded"
        return (kind, redact_bytes(data, self.secrets) if self.secrets else data)

    # ---------------------------------------------------------------- snapshot
    def snapshot(self, reason: str, submission_id: int | str | None = None) -> dict[str, Any]:
        """Commit the workspace's code; return {commit, files, bytes, changed, reason, ...}.

        What is committed is what this process read (into a private staging tree, redacted), not
        the live workspace, so a file swapped meanwhile cannot slip in. Past the file-count or
        time budget nothing is committed: `skipped` says why (also in `a2c-skipped.jsonl`)."""
        started = time.monotonic()
        self.repo_dir.mkdir(parents=True, exist_ok=True)
        with file_lock(self.repo_dir / "a2c-snapshot.lock"):
            self._ensure_repo()
            info = self._snapshot_locked(reason, submission_id)
        info["elapsed_s"] = round(time.monotonic() - started, 4)
        if info.get("skipped"):
            with open(self.repo_dir / "a2c-skipped.jsonl", "a", encoding="utf-8") as f:
                f.write(json.dumps({"reason": reason, "submission_id": submission_id,
                                    "skipped": info["skipped"], "at": time.time()}) + "\n")
        if self.event_log is not None and (info["changed"] or reason in ("submission", "final")):
            self.event_log.append("snapshot", {k: info[k] for k in (
                "commit", "reason", "submission_id", "files", "bytes", "changed", "excluded")})
        return info

    def _stage(self, entries: dict[str, tuple[str, bytes]]) -> Path:
        """A fresh private tree holding exactly `entries` (folders created here, never followed)."""
        stage = self.repo_dir / "a2c-stage"
        if stage.exists():
            shutil.rmtree(stage)
        stage.mkdir(mode=0o700)
        for rel, (kind, content) in entries.items():
            target = stage / rel
            target.parent.mkdir(parents=True, exist_ok=True)  # only ever folders made here
            if kind == "link":
                os.symlink(os.fsdecode(content), target)
            else:
                target.write_bytes(content)
                if kind == "exec":
                    target.chmod(0o755)
        return stage

    def _snapshot_locked(self, reason: str, submission_id: int | str | None) -> dict[str, Any]:
        entries, excluded, skipped = self.collect()
        parent = self.head()
        files = sorted(entries)
        total = sum(len(v[1]) for v in entries.values())
        if skipped:
            return {"commit": parent, "tree": None, "files": len(files), "bytes": total,
                    "excluded": excluded, "changed": False, "reason": reason,
                    "submission_id": submission_id, "skipped": skipped}
        stage = self._stage(entries)
        self._env["GIT_WORK_TREE"] = str(stage)
        try:
            self._git("read-tree", "--empty")
            if files:
                self._git("update-index", "-z", "--add", "--stdin",
                          input=b"\0".join(p.encode() for p in files) + b"\0", cwd=stage)
            tree = self._git("write-tree").strip()
        finally:
            shutil.rmtree(stage, ignore_errors=True)
        if parent is not None:
            parent_tree = self._git("rev-parse", f"{parent}^{{tree}}").strip()
            if parent_tree == tree:
                return {"commit": parent, "tree": tree, "files": len(files), "bytes": total,
                        "excluded": excluded, "changed": False, "reason": reason,
                        "submission_id": submission_id}
        message = reason if submission_id is None else f"{reason} submission {submission_id}"
        args = ["commit-tree", tree, "-m", message]
        if parent is not None:
            args += ["-p", parent]
        commit = self._git(*args).strip()
        self._git("update-ref", _REF, commit)
        return {"commit": commit, "tree": tree, "files": len(files), "bytes": total,
                "excluded": excluded, "changed": True, "reason": reason,
                "submission_id": submission_id}

    def tag_submission(self, submission_id: int | str, commit: str) -> None:
        """Point `refs/tags/submission-<id>` at the code a submission came from."""
        self._git("update-ref", f"refs/tags/submission-{submission_id}", commit)

    def files_at(self, commit: str) -> list[str]:
        return sorted(filter(None, self._git("ls-tree", "-r", "-z", "--name-only", commit)
                             .split("\0")))
