"""Reading the code snapshots (``RUN/snapshots.git``) quickly.

One long-lived ``git cat-file --batch`` process serves every object the analysis needs (commits,
trees, blobs), and trees and blobs are cached by object id, so a run with hundreds of snapshots
costs one process and a few reads per *changed* file, not a ``git`` call per question.
Diffs are computed here with ``difflib`` between the flattened trees of two commits.
"""

from __future__ import annotations

import difflib
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from .values import clip

MAX_TEXT_BYTES = 512_000
EXCERPT_LINES = 24
EXCERPT_WIDTH = 160


class SnapshotRepo:
    def __init__(self, git_dir: str | Path):
        self.git_dir = Path(git_dir)
        self._proc: subprocess.Popen | None = None
        self._trees: dict[str, dict[str, str]] = {}
        self._blobs: dict[str, str | None] = {}
        self._commit_tree: dict[str, str | None] = {}
        self.available = (self.git_dir / "HEAD").is_file() or (self.git_dir / "objects").is_dir()

    # ------------------------------------------------------------------ process
    def _batch(self) -> subprocess.Popen:
        if self._proc is None:
            self._proc = subprocess.Popen(
                ["git", f"--git-dir={self.git_dir}", "cat-file", "--batch"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        return self._proc

    def close(self) -> None:
        if self._proc is not None:
            try:
                self._proc.stdin.close()
                self._proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):  # pragma: no cover - best effort
                self._proc.kill()
            self._proc = None

    def read(self, name: str) -> tuple[str, str, bytes] | None:
        """(object id, type, content) of any object name git understands; None if missing."""
        if not self.available or not name or "\n" in name:
            return None
        proc = self._batch()
        proc.stdin.write(name.encode() + b"\n")
        proc.stdin.flush()
        header = proc.stdout.readline()
        if not header:
            return None
        parts = header.split()
        if len(parts) != 3:
            return None  # "<name> missing" / "ambiguous"
        oid, kind, size = parts[0].decode(), parts[1].decode(), int(parts[2])
        content = proc.stdout.read(size)
        proc.stdout.read(1)  # trailing newline
        return oid, kind, content

    # ------------------------------------------------------------------ trees
    def tree_of(self, commit: str) -> str | None:
        if commit not in self._commit_tree:
            obj = self.read(commit)
            tree = None
            if obj and obj[1] == "commit":
                first = obj[2].split(b"\n", 1)[0]
                if first.startswith(b"tree "):
                    tree = first[5:].decode().strip()
            self._commit_tree[commit] = tree
        return self._commit_tree[commit]

    def _flatten(self, tree_id: str) -> dict[str, str]:
        if tree_id in self._trees:
            return self._trees[tree_id]
        files: dict[str, str] = {}
        obj = self.read(tree_id)
        if obj and obj[1] == "tree":
            raw = obj[2]
            hash_len = len(obj[0]) // 2
            pos = 0
            while pos < len(raw):
                space = raw.index(b" ", pos)
                nul = raw.index(b"\0", space)
                mode = raw[pos:space]
                name = raw[space + 1:nul].decode("utf-8", "replace")
                oid = raw[nul + 1:nul + 1 + hash_len].hex()
                pos = nul + 1 + hash_len
                if mode in (b"40000", b"040000"):
                    for sub, blob in self._flatten(oid).items():
                        files[f"{name}/{sub}"] = blob
                elif mode in (b"100644", b"100755", b"120000"):
                    files[name] = oid
        self._trees[tree_id] = files
        return files

    def files(self, commit: str | None) -> dict[str, str]:
        """{path: blob id} of a commit's tree; {} for None or an unknown commit."""
        if not commit:
            return {}
        tree = self.tree_of(commit)
        return dict(self._flatten(tree)) if tree else {}

    def text(self, blob: str) -> str | None:
        """A blob's text, or None when it is binary or too large to read as code."""
        if blob not in self._blobs:
            obj = self.read(blob)
            text = None
            if obj and obj[1] == "blob" and len(obj[2]) <= MAX_TEXT_BYTES and b"\0" not in obj[2]:
                text = obj[2].decode("utf-8", "replace")
            self._blobs[blob] = text
        return self._blobs[blob]

    def resolve(self, name: str) -> str | None:
        obj = self.read(name)
        return obj[0] if obj and obj[1] == "commit" else None


@dataclass
class FileChange:
    path: str
    status: str  # added | removed | modified
    added: int
    removed: int


@dataclass
class Diff:
    files: list[FileChange] = field(default_factory=list)
    excerpt: list[str] = field(default_factory=list)
    truncated: bool = False

    @property
    def added(self) -> int:
        return sum(f.added for f in self.files)

    @property
    def removed(self) -> int:
        return sum(f.removed for f in self.files)


def diff_trees(repo: SnapshotRepo, old: dict[str, str], new: dict[str, str],
               excerpt_lines: int = EXCERPT_LINES, old_text: dict[str, str] | None = None
               ) -> Diff:
    """Changes from `old` to `new` ({path: blob id}); `old_text` ({path: text}) stands for files
    outside the repository (the workspace as the bundle shipped it)."""
    out = Diff()
    if old_text:
        old = {**{p: f"text:{p}" for p in old_text}, **old}
    code_first = (".py", ".sh", ".ipynb", ".yaml", ".yml", ".toml", ".cfg")
    for path in sorted(set(old) | set(new), key=lambda p: (not p.endswith(code_first), p)):
        a, b = old.get(path), new.get(path)
        if a == b:
            continue
        status = "added" if a is None else "removed" if b is None else "modified"
        a_text = (old_text[path] if a.startswith("text:") else repo.text(a)) if a else ""
        b_text = repo.text(b) if b else ""
        if a is not None and a.startswith("text:") and a_text == b_text:
            continue
        if a_text is None or b_text is None:  # binary
            out.files.append(FileChange(path, status, 0, 0))
            if len(out.excerpt) < excerpt_lines:
                out.excerpt.append(f"Binary file {path} {status}")
            continue
        lines = list(difflib.unified_diff(a_text.splitlines(), b_text.splitlines(),
                                          f"a/{path}", f"b/{path}", n=1, lineterm=""))
        added = sum(1 for line in lines if line.startswith("+") and not line.startswith("+++"))
        removed = sum(1 for line in lines if line.startswith("-") and not line.startswith("---"))
        out.files.append(FileChange(path, status, added, removed))
        for line in lines:
            if len(out.excerpt) >= excerpt_lines:
                out.truncated = True
                break
            out.excerpt.append(clip(line, EXCERPT_WIDTH))
    return out
