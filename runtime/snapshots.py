"""Code snapshots of the agent's workspace into a git repository outside the workspace.

The recorder keeps what the agent's code looked like at each submission and every few minutes, so
a result can be traced to the code that produced it. The repository (`RUN/snapshots.git`) is bare
and lives outside the workspace; git is driven with `--git-dir`/`--work-tree`, so the agent never
sees it and cannot rewrite it. Weights, data files, the output folder, caches and anything over
`max_file_bytes` are excluded by rule: a snapshot is code and small text, not checkpoints.

Several processes may snapshot the same workspace (the grader service at each submission, the
runtime periodically); an exclusive `flock` on a lock file in the repository serialises them. A
snapshot of an unchanged workspace makes no commit and returns the previous one.
"""

from __future__ import annotations

import fnmatch
import os
import stat
import subprocess
import time
from pathlib import Path
from typing import Any

from a2c.fsutil import file_lock

MAX_FILE_BYTES = 1_000_000

# Directory names never descended into (matched against the name at any depth).
EXCLUDED_DIRS = (
    ".git", "__pycache__", ".cache", ".pytest_cache", ".mypy_cache", ".ruff_cache",
    ".ipynb_checkpoints",
    "node_modules", ".venv", "venv", ".tox", ".nox", "wandb", "mlruns", "runs", "checkpoints",
    "hf_cache", ".huggingface", ".triton", "site-packages",
)
# Top-level folders of the workspace never snapshotted (output/ holds the checkpoints).
EXCLUDED_TOP = ("output",)
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
                 excluded_top: tuple[str, ...] = EXCLUDED_TOP):
        self.repo_dir = Path(repo_dir).resolve()
        self.workspace = Path(workspace).resolve()
        self.max_file_bytes = max_file_bytes
        self.excluded_files = excluded_files
        self.excluded_dirs = set(excluded_dirs)
        self.excluded_top = set(excluded_top)
        if event_log is not None and not hasattr(event_log, "append"):
            from a2c.contracts.events import EventLog
            event_log = EventLog(event_log)
        self.event_log = event_log
        self._env = {**os.environ, **_GIT_ENV,
                     "GIT_DIR": str(self.repo_dir), "GIT_WORK_TREE": str(self.workspace),
                     "GIT_INDEX_FILE": str(self.repo_dir / "a2c-index")}
        self._env.pop("GIT_OBJECT_DIRECTORY", None)
        self._env.pop("GIT_ALTERNATE_OBJECT_DIRECTORIES", None)

    # ---------------------------------------------------------------- git helpers
    def _git(self, *args: str, input: bytes | None = None) -> str:
        proc = subprocess.run(["git", f"--git-dir={self.repo_dir}", f"--work-tree={self.workspace}",
                               *args], input=input, capture_output=True, env=self._env,
                              cwd=self.workspace)
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
        excluded by a rule."""
        files: list[str] = []
        total = 0
        excluded = 0
        root = str(self.workspace)
        for dirpath, dirnames, filenames in os.walk(root):
            rel_dir = os.path.relpath(dirpath, root)
            keep = []
            for d in dirnames:
                if d in self.excluded_dirs or (rel_dir == "." and d in self.excluded_top):
                    excluded += 1
                    continue
                keep.append(d)
            dirnames[:] = sorted(keep)
            for name in filenames:
                rel = name if rel_dir == "." else f"{rel_dir}/{name}"
                if self._excluded_name(name) or "\n" in rel:
                    excluded += 1
                    continue
                try:
                    st = os.lstat(os.path.join(dirpath, name))
                except OSError:
                    continue
                if stat.S_ISLNK(st.st_mode):
                    size = len(os.readlink(os.path.join(dirpath, name)))
                elif stat.S_ISREG(st.st_mode):
                    size = st.st_size
                    if size > self.max_file_bytes:
                        excluded += 1
                        continue
                else:
                    continue  # sockets, fifos, devices
                files.append(rel)
                total += size
        files.sort()
        return files, total, excluded

    # ---------------------------------------------------------------- snapshot
    def snapshot(self, reason: str, submission_id: int | str | None = None) -> dict[str, Any]:
        """Commit the workspace's code; return {commit, files, bytes, changed, reason, ...}."""
        started = time.monotonic()
        self.repo_dir.mkdir(parents=True, exist_ok=True)
        with file_lock(self.repo_dir / "a2c-snapshot.lock"):
            self._ensure_repo()
            info = self._snapshot_locked(reason, submission_id)
        info["elapsed_s"] = round(time.monotonic() - started, 4)
        if self.event_log is not None and (info["changed"] or reason in ("submission", "final")):
            self.event_log.append("snapshot", {k: info[k] for k in (
                "commit", "reason", "submission_id", "files", "bytes", "changed", "excluded")})
        return info

    def _snapshot_locked(self, reason: str, submission_id: int | str | None) -> dict[str, Any]:
        files, total, excluded = self.select()
        parent = self.head()
        indexed = set(filter(None, self._git("ls-files", "-z").split("\0")))
        wanted = set(files)
        gone = sorted(indexed - wanted)
        if gone:
            self._git("update-index", "-z", "--force-remove", "--stdin",
                      input=b"\0".join(p.encode() for p in gone) + b"\0")
        if files:
            # Files that vanished between the walk and here are simply dropped.
            present = [p for p in files if os.path.lexists(self.workspace / p)]
            self._git("update-index", "-z", "--add", "--remove", "--stdin",
                      input=b"\0".join(p.encode() for p in present) + b"\0")
        tree = self._git("write-tree").strip()
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
