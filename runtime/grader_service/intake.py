"""The grader's own copy of a submission, made at submit: what is hashed and what is evaluated.

The agent keeps write access to its output folder after it submits, so the service never reads
that folder again after `copy_submission` returns. The copy takes regular files only: it walks
the submitted folder by file descriptor (`openat` with `O_NOFOLLOW`, `O_NONBLOCK`, from the output
folder down), opens each file once, checks with `fstat` that it is a regular file, and copies and
hashes it from that descriptor, so a file swapped or turned into a symlink while the copy runs is
either copied as it was read or refused, never followed. A symlink, FIFO, socket or device inside
the folder is refused (`not_regular_file`, or `path_escape` when it points outside the output
folder); so is a sparse file (`sparse_file`: a 20 GiB hole costs nothing to write and a lot to
hash), and a submission over `max_submission_bytes` / `max_submission_files`
(`submission_too_large`). Sizes are checked from `fstat` before any byte is read.

Weights are taken as safetensors only: a file in a pickle format (`PICKLE_SUFFIXES`:
`pytorch_model.bin`, `*.pt`, `*.pth`, `*.ckpt`, `*.pkl`, any `*.bin`) is refused by its name
before it is opened (`pickle_weights`). Loading a pickle runs code in the grader, and weights the
provenance check cannot read (provenance.py reads safetensors) would be scored unchecked.

When the run has a base model whose weights the provenance check reads (`check_weights`), the
copy is then checked as the evaluator will load it (weight_files.py `check_submission_weights`,
the same file resolution as transformers and vLLM): a weight file the loader would not read
(a second `*.safetensors`, a shard the index does not name, a `*.gguf`, an adapter, a
`transformers_weights` redirection, a layout where transformers and vLLM would read different
files) is refused as `unloaded_weights`; a loaded file whose header does not parse, whose
offsets do not tile its data, or that stores a tensor in a dtype the check cannot compare is
refused as `unreadable_weights`. One line each, naming the file; nothing is used up. So every
scored submission's loaded tensors are the ones the check compares, all of them.

Where the file system shares blocks (btrfs, XFS: FICLONE, `cp --reflink` semantics) the copy is
a copy-on-write clone, a snapshot of the file that the agent's later writes never reach, and the
hashes are read from the clone; elsewhere it is a byte copy. A hard link is never used: it would
share the inode, and an agent rewriting its file would rewrite the grader's.

One pass reads every byte once: it writes the copy, computes each file's sha256 (the folder hash,
the same rule as `a2c.canonical.sha256_tree`, so identical folders hash alike) and the tensors'
hashes of safetensors files (`weights.py`: copy detection).
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import shutil
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from a2c.canonical import sha256_json
from a2c.runtime.grader_service.common import Refusal
from a2c.runtime.grader_service.weights import CHUNK, TensorStream, add_weights, is_weight_file

SPARSE_MIN = 1 << 20     # files under this size are never called sparse
SPARSE_RATIO = 8         # allocated bytes under size / 8: sparse
MAX_DEPTH = 32
FICLONE = 0x40049409     # ioctl(dst, FICLONE, src): linux/fs.h
CLONE_ENABLED = True     # tests turn it off to exercise the byte copy on a reflink file system
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle", ".joblib")
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


@dataclass
class Intake:
    path: Path                         # the copy: a folder (or one file)
    folder_hash: str                   # every file's relative path and sha256 (sha256_tree rule)
    weights_hash: str | None           # tensors' content (weights.py); None: no weight files
    files: int = 0
    bytes: int = 0
    elapsed_s: float = 0.0
    entries: list[list[str]] = field(default_factory=list)


class _State:
    def __init__(self, max_bytes: int, max_files: int, shown: str, limit: str,
                 src: Path, output_dir: Path):
        self.max_bytes, self.max_files = max_bytes, max_files
        self.shown, self.limit, self.src, self.output_dir = shown, limit, src, output_dir
        self.bytes = 0
        self.count = 0
        self.entries: list[list[str]] = []
        self.tensors: list[list[Any]] = []
        self.others: list[list[str]] = []
        self.buf = bytearray(CHUNK)


def _refuse(code: str, message: str, limit: Any, status: int = 400) -> Refusal:
    return Refusal(status, code, message, limit=limit)


def copy_submission(src: Path, output_dir: Path, dest: Path, *, shown: str, limit: str,
                    max_bytes: int, max_files: int, check_weights: bool = False) -> Intake:
    """Copy `src` (a real path inside `output_dir`) to `dest` (which must not exist); with
    `check_weights`, refuse a copy whose weights are not exactly what the evaluator loads and
    the provenance check reads (`_check_weights`)."""
    started = time.monotonic()
    state = _State(max_bytes, max_files, shown, limit, src, output_dir)
    rel = os.path.relpath(src, output_dir)
    parts = [] if rel == "." else rel.split(os.sep)
    fds: list[int] = []
    try:
        try:
            fds.append(os.open(output_dir, _DIR_FLAGS))
            for part in parts[:-1]:
                fds.append(os.open(part, _DIR_FLAGS, dir_fd=fds[-1]))
            if parts:
                top = os.open(parts[-1], _FILE_FLAGS, dir_fd=fds[-1])
            else:
                top = os.dup(fds[-1])
        except OSError as exc:
            raise _changed(state, "", exc) from None
        st = os.fstat(top)
        if stat.S_ISDIR(st.st_mode):
            fds.append(top)
            dest.mkdir(mode=0o755)
            _walk(top, "", dest, state, 0)
            folder_hash = sha256_json(sorted(state.entries, key=lambda e: e[0].split("/")))
            if check_weights:
                _check_weights(dest, state)
        elif stat.S_ISREG(st.st_mode):
            try:
                _refuse_pickle(state, parts[-1] if parts else src.name)
            except Refusal:
                os.close(top)
                raise
            _copy_fd(top, parts[-1] if parts else src.name, st, dest, state, single=True)
            folder_hash = state.entries[0][1]
        else:
            os.close(top)
            raise _refuse("not_regular_file", f"{shown} is neither a folder nor a regular file",
                          limit)
    except BaseException:
        _remove(dest)
        raise
    finally:
        for fd in fds:
            os.close(fd)
    from a2c.runtime.grader_service.weights import weights_digest

    return Intake(path=dest, folder_hash=folder_hash,
                  weights_hash=weights_digest(state.tensors, state.others), files=state.count,
                  bytes=state.bytes, elapsed_s=time.monotonic() - started, entries=state.entries)


def _check_weights(copy: Path, state: _State) -> None:
    """The grader's copy (never the agent's folder) as the evaluator loads it: weight_files.py
    `check_submission_weights`; its refusal becomes the agent's /submit answer."""
    from a2c.runtime.grader_service.weight_files import WeightsRefused, check_submission_weights

    try:
        check_submission_weights(copy)
    except WeightsRefused as exc:
        raise _refuse(exc.code, f"{state.shown!r}: {exc.message}", state.limit) from None


def _changed(state: _State, rel: str, exc: OSError) -> Refusal:
    where = f"{rel} in {state.shown}" if rel else state.shown
    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
        return _refuse("not_regular_file", f"{where} became a symlink or changed type while the "
                       "grader copied it; submit a folder you no longer write to", state.limit)
    return _refuse("bad_request", f"{where} could not be read: {exc.strerror}", state.limit)


def _symlink_refusal(state: _State, rel: str) -> Refusal:
    target = Path(os.path.realpath(state.src / rel))
    if target != state.output_dir and state.output_dir not in target.parents:
        return _refuse("path_escape", f"{rel} in {state.shown!r} is a symlink pointing outside "
                       f"the output folder {state.limit}", state.limit)
    return _refuse("not_regular_file", f"{rel} in {state.shown!r} is a symlink; the grader takes "
                   "regular files only (copy the file instead of linking it)", state.limit)


def _refuse_pickle(state: _State, rel: str) -> None:
    if rel.lower().endswith(PICKLE_SUFFIXES):
        raise _refuse("pickle_weights", f"{rel} in {state.shown!r} is a pickle-format file; the "
                      "grader takes weights as safetensors only. Save with "
                      "`model.save_pretrained(folder, safe_serialization=True)` and submit a "
                      "folder without .bin/.pt/.pth/.ckpt/.pkl files (a Trainer checkpoint's "
                      "training_args.bin, optimizer.pt and rng_state.pth included)", state.limit)


def _count(state: _State) -> None:
    state.count += 1
    if state.count > state.max_files:
        raise _refuse("submission_too_large", f"{state.shown} holds more than "
                      f"{state.max_files} files and folders (max_submission_files)",
                      state.max_files, status=413)


def _walk(dfd: int, prefix: str, dest: Path, state: _State, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise _refuse("submission_too_large", f"{state.shown} nests folders deeper than "
                      f"{MAX_DEPTH}", MAX_DEPTH, status=413)
    with os.scandir(dfd) as it:
        entries = sorted(it, key=lambda e: e.name)
    for entry in entries:
        _count(state)
        rel = prefix + entry.name
        if entry.is_symlink():
            raise _symlink_refusal(state, rel)
        if entry.is_dir(follow_symlinks=False):
            try:
                sub = os.open(entry.name, _DIR_FLAGS, dir_fd=dfd)
            except OSError as exc:
                raise _changed(state, rel, exc) from None
            try:
                (dest / entry.name).mkdir(mode=0o755)
                _walk(sub, rel + "/", dest / entry.name, state, depth + 1)
            finally:
                os.close(sub)
        elif entry.is_file(follow_symlinks=False):
            _refuse_pickle(state, rel)
            try:
                fd = os.open(entry.name, _FILE_FLAGS, dir_fd=dfd)
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise _symlink_refusal(state, rel) from None
                raise _changed(state, rel, exc) from None
            _copy_fd(fd, rel, os.fstat(fd), dest / entry.name, state)
        else:
            raise _refuse("not_regular_file", f"{rel} in {state.shown!r} is not a regular file "
                          "(a FIFO, socket or device); the grader takes regular files only",
                          state.limit)


def _copy_fd(fd: int, rel: str, st: os.stat_result, dest: Path, state: _State,
             single: bool = False) -> None:
    """Copy one opened file (closed here) to `dest`, hashing it on the way."""
    try:
        if not stat.S_ISREG(st.st_mode):
            raise _refuse("not_regular_file", f"{rel} in {state.shown!r} is not a regular file "
                          "(it changed while the grader copied it)", state.limit)
        if st.st_size >= SPARSE_MIN and st.st_blocks * 512 < st.st_size // SPARSE_RATIO:
            raise _refuse("sparse_file", f"{rel} in {state.shown!r} is a sparse file "
                          f"({st.st_size} bytes, {st.st_blocks * 512} allocated); write real "
                          "weights", state.limit)
        if state.bytes + st.st_size > state.max_bytes:
            raise _too_large(state)
        if single:
            _count(state)
        os.set_blocking(fd, True)
        digest = hashlib.sha256()
        stream = TensorStream() if rel.endswith(".safetensors") else None
        view = memoryview(state.buf)
        with open(dest, "xb") as out:
            cloned = _clone(fd, out.fileno())   # copy-on-write: hash the clone instead
            if cloned:
                _hash_clone(dest, state, digest, stream)
            while not cloned:
                n = os.readv(fd, [state.buf])
                if n <= 0:
                    break
                state.bytes += n
                if state.bytes > state.max_bytes:   # it grew while being copied
                    raise _too_large(state)
                chunk = view[:n]
                out.write(chunk)
                digest.update(chunk)
                if stream is not None:
                    stream.feed(chunk)
        os.chmod(dest, 0o644)
        sha = digest.hexdigest()
        state.entries.append([rel, sha])
        if is_weight_file(rel.rsplit("/", 1)[-1]):
            add_weights(state.tensors, state.others, rel, sha, stream)
    finally:
        os.close(fd)


def _clone(src_fd: int, dst_fd: int) -> bool:
    """Share the file's blocks copy-on-write (FICLONE: btrfs, XFS, bcachefs, ...): the clone is a
    snapshot of the file at this instant, so a later write by the agent never reaches it, and a
    kept submission costs no extra disk. False where the file system cannot (ext4, tmpfs,
    another device): the caller copies the bytes."""
    if not CLONE_ENABLED:
        return False
    try:
        fcntl.ioctl(dst_fd, FICLONE, src_fd)
        return True
    except OSError:
        return False


def _hash_clone(dest: Path, state: _State, digest, stream: TensorStream | None) -> None:
    """Read the clone once (it is the grader's own file now) for the hashes and the limits."""
    view = memoryview(state.buf)
    with open(dest, "rb", buffering=0) as handle:
        while True:
            n = handle.readinto(state.buf)
            if not n:
                break
            state.bytes += n
            if state.bytes > state.max_bytes:   # it grew between fstat and the clone
                raise _too_large(state)
            digest.update(view[:n])
            if stream is not None:
                stream.feed(view[:n])


def _too_large(state: _State) -> Refusal:
    return _refuse("submission_too_large", f"{state.shown} is larger than "
                   f"{state.max_bytes} bytes (max_submission_bytes)", state.max_bytes,
                   status=413)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        try:
            path.unlink()
        except FileNotFoundError:
            pass
