"""The code snapshots of a public export (analysis/export.py): `snapshots.bundle`, a git bundle
of the files the export may share, and its check by `a2c verify`.

The bundle holds only the files the contamination scan reads (`contamination.blob_text`: not
binary, not too large) and in which the export's scan (`scan(data) -> why or None`) finds no
held-out item, no secret and no host folder. A commit that lost a file is rewritten — its raw
commit object with the tree lacking the file and its parents rewritten, so message, author and
dates are kept — in a scratch repository that borrows the run's objects (git alternates); only
what the rewritten refs reach is bundled. `bundle_snapshots` returns the map from each recorded
commit to the commit the bundle holds for it (only those that changed) and the files left out;
`snapshot_problems` checks that every snapshot event's commit (or its mapped one) is in the bundle.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from a2c.errors import A2CError

from .contamination import blob_text
from .export_manifest import SnapshotBundle
from .record import RunRecord

SNAPSHOT_BUNDLE = "snapshots.bundle"


def _git(git_dir: Path, *args: str, input: bytes | None = None,
         env: dict[str, str] | None = None) -> bytes:
    proc = subprocess.run(["git", f"--git-dir={git_dir}", *args], input=input,
                          capture_output=True, env=env)
    if proc.returncode:
        raise A2CError(f"git {args[0]} on {git_dir.name}: "
                       f"{proc.stderr.decode(errors='replace').strip()[:300]}")
    return proc.stdout


class _SnapshotFilter:
    """The snapshot repository rewritten to hold only the files the export may share."""

    def __init__(self, source: Path, work: Path, scan: Callable[[bytes], str | None]):
        self.source, self.work, self.scan = source, work, scan
        self.verdicts: dict[str, str | None] = {}     # blob id -> why it is left out
        self.left_out: dict[str, str] = {}            # path -> why (the first reason)
        self.mapping: dict[str, str] = {}             # commit -> the bundle's commit
        self.batch = subprocess.Popen(["git", f"--git-dir={source}", "cat-file", "--batch"],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=subprocess.DEVNULL)

    def close(self) -> None:
        if self.batch.stdin:
            self.batch.stdin.close()
        self.batch.wait(timeout=10)

    def _read(self, oid: str) -> bytes:
        self.batch.stdin.write(oid.encode() + b"\n")
        self.batch.stdin.flush()
        header = self.batch.stdout.readline().split()
        if len(header) != 3:
            raise A2CError(f"snapshots.git: object {oid} missing")
        data = self.batch.stdout.read(int(header[2]))
        self.batch.stdout.read(1)
        return data

    def _verdict(self, oid: str) -> str | None:
        if oid not in self.verdicts:
            data = self._read(oid)
            if blob_text(data) is None:
                why = "the contamination scan does not read it (binary, or too large)"
            else:
                why = self.scan(data)
            self.verdicts[oid] = why
        return self.verdicts[oid]

    def _tree(self, commit: str) -> str | None:
        """The commit's tree without the files left out; None when it leaves none out."""
        listing = _git(self.source, "ls-tree", "-r", "-z", "--full-tree", commit)
        keep, dropped = [], False
        for entry in listing.split(b"\0"):
            if not entry:
                continue
            meta, path = entry.split(b"\t", 1)
            mode, kind, oid = meta.decode().split()
            name = path.decode("utf-8", "surrogateescape")
            why = "not a file (a submodule)" if kind != "blob" else self._verdict(oid)
            if why:
                self.left_out.setdefault(name, why)
                dropped = True
            else:
                keep.append(f"{mode} {oid}\t".encode() + path + b"\0")
        if not dropped:
            return None
        env = {**os.environ, "GIT_INDEX_FILE": str(self.work.parent / "export.index")}
        Path(env["GIT_INDEX_FILE"]).unlink(missing_ok=True)
        _git(self.work, "update-index", "-z", "--index-info", input=b"".join(keep), env=env)
        return _git(self.work, "write-tree", env=env).decode().strip()

    def commit(self, commit: str) -> str:
        """The bundle's commit for `commit` (itself when neither its tree nor a parent
        changed)."""
        raw = _git(self.source, "cat-file", "commit", commit)
        head, _, message = raw.partition(b"\n\n")
        tree = self._tree(commit)
        lines, changed = [], tree is not None
        for line in head.split(b"\n"):
            if line.startswith(b"tree ") and tree is not None:
                line = b"tree " + tree.encode()
            elif line.startswith(b"parent "):
                parent = line[7:].decode().strip()
                changed |= self.mapping.get(parent, parent) != parent
                line = b"parent " + self.mapping.get(parent, parent).encode()
            lines.append(line)
        new = commit if not changed else _git(
            self.work, "hash-object", "-t", "commit", "-w", "--stdin",
            input=b"\n".join(lines) + b"\n\n" + message).decode().strip()
        self.mapping[commit] = new
        return new


def bundle_snapshots(git: Path, out: Path, scan: Callable[[bytes], str | None]
                     ) -> SnapshotBundle:
    """Write `out`, a bundle of the snapshot repository `git` holding only the files `scan`
    passes and the scan reads, and say which commits it rewrote and which files it left out;
    not bundled, with why, when git cannot; not bundled when there is nothing to bundle."""
    if not git.is_dir():
        return SnapshotBundle()
    try:
        commits = _git(git, "rev-list", "--all", "--topo-order", "--reverse").decode().split()
    except A2CError as exc:
        return SnapshotBundle(why=f"git could not read the snapshots ({exc})")
    if not commits:
        return SnapshotBundle()
    with tempfile.TemporaryDirectory(prefix="a2c-export-git-") as tmp:
        work = Path(tmp) / "bundle.git"
        subprocess.run(["git", "init", "-q", "--bare", str(work)], check=True,
                       capture_output=True)
        (work / "objects" / "info").mkdir(parents=True, exist_ok=True)
        (work / "objects" / "info" / "alternates").write_text(
            str((git / "objects").resolve()) + "\n")
        keeper = _SnapshotFilter(git, work, scan)
        try:
            for commit in commits:
                keeper.commit(commit)
        finally:
            keeper.close()
        refs = _git(git, "for-each-ref", "--format=%(objectname) %(objecttype) %(refname)")
        for line in refs.decode().splitlines():
            oid, kind, ref = line.split(" ", 2)
            if kind == "commit" and oid in keeper.mapping:
                _git(work, "update-ref", ref, keeper.mapping[oid])
        done = subprocess.run(["git", f"--git-dir={work}", "bundle", "create", "-q", str(out),
                               "--all"], capture_output=True)
        if done.returncode:
            out.unlink(missing_ok=True)
            return SnapshotBundle(why="git could not bundle the snapshots: "
                                  + done.stderr.decode(errors="replace").strip()[:200])
    return SnapshotBundle(bundled=True,
                          commits={c: n for c, n in keeper.mapping.items() if c != n},
                          left_out=dict(sorted(keeper.left_out.items())))


def snapshot_problems(root: Path, record: RunRecord, mapping: dict[str, str]
                      ) -> tuple[list[str], int]:
    """Every snapshot event's commit (or the commit the signed manifest maps it to) must be in
    snapshots.bundle."""
    bundle = root / SNAPSHOT_BUNDLE
    commits = [s.commit for s in record.snapshot_taken]
    with tempfile.TemporaryDirectory(prefix="a2c-verify-") as tmp:
        git = ["git", f"--git-dir={tmp}"]
        subprocess.run([*git, "init", "-q", "--bare"], check=True, capture_output=True)
        fetched = subprocess.run([*git, "fetch", "-q", str(bundle), "refs/*:refs/*"],
                                 capture_output=True, text=True)
        if fetched.returncode:
            return [f"{SNAPSHOT_BUNDLE}: unreadable ({fetched.stderr.strip()[:200]})"], 0
        missing = [c for c in commits if subprocess.run(
            [*git, "cat-file", "-e", f"{mapping.get(c, c)}^{{commit}}"],
            capture_output=True).returncode]
    return [f"{SNAPSHOT_BUNDLE}: snapshot commit {c} missing" for c in missing], len(commits)
