"""What copy detection compares: the weights' content, not the folder.

`weights_fingerprint(folder)` hashes every tensor of every `*.safetensors` file by (name, dtype,
shape, bytes), whatever the shards, the tensor order or the file's `__metadata__`; other weight
files (`*.bin`, `*.gguf`, `*.pt`, `*.pth`, or a safetensors file that does not parse) count by
their whole content. Config, tokenizer, README and generation_config do not count: a copy of the
base minus a metadata file is still the base's weights.

`TensorStream` hashes a safetensors file from its bytes as they stream by, so the grader's copy
at submit (intake.py) hashes the tensors in the same single pass that copies and hashes files.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from a2c.canonical import sha256_json

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".gguf", ".pt", ".pth")
MAX_HEADER = 100 << 20   # safetensors' own limit on the JSON header
CHUNK = 8 << 20


class TensorStream:
    """Fed one safetensors file's bytes in order; `finish()` gives {name: [dtype, shape, sha256]}
    or None when the file is not a well-formed safetensors file (then its bytes count as a whole)."""

    def __init__(self) -> None:
        self.head: bytearray | None = bytearray()
        self.header_len: int | None = None
        self.tensors: list[tuple[str, str, list, int, int]] = []
        self.ok = True
        self.pos = 0           # offset inside the data region
        self.idx = 0
        self.hasher = hashlib.sha256()
        self.digests: dict[str, list[Any]] = {}

    def feed(self, chunk: bytes | memoryview) -> None:
        if not self.ok:
            return
        if self.head is not None:
            self.head += chunk
            if self.header_len is None and len(self.head) >= 8:
                self.header_len = int.from_bytes(self.head[:8], "little")
                if self.header_len > MAX_HEADER:
                    self.ok = False
                    return
            if self.header_len is None or len(self.head) < 8 + self.header_len:
                return
            rest = bytes(self.head[8 + self.header_len:])
            self._parse(bytes(self.head[8:8 + self.header_len]))
            self.head = None
            if self.ok:
                self._data(memoryview(rest))
            return
        self._data(memoryview(chunk))

    def _parse(self, raw: bytes) -> None:
        try:
            header = json.loads(raw)
            if not isinstance(header, dict):
                raise ValueError("header is not an object")
            for name, info in header.items():
                if name == "__metadata__":
                    continue
                begin, end = info["data_offsets"]
                shape = [int(d) for d in info["shape"]]
                if not (isinstance(begin, int) and isinstance(end, int) and 0 <= begin <= end):
                    raise ValueError(f"bad offsets for {name}")
                self.tensors.append((str(name), str(info["dtype"]), shape, begin, end))
        except (ValueError, KeyError, TypeError):
            self.ok = False
            return
        self.tensors.sort(key=lambda t: (t[3], t[4]))
        last = 0
        for t in self.tensors:
            if t[3] < last:   # overlapping tensors: not a file safetensors writes
                self.ok = False
                return
            last = t[4]

    def _data(self, mv: memoryview) -> None:
        while self.idx < len(self.tensors):
            name, dtype, shape, begin, end = self.tensors[self.idx]
            if self.pos < begin:
                if not len(mv):
                    return
                skip = min(begin - self.pos, len(mv))
                mv, self.pos = mv[skip:], self.pos + skip
                continue
            if self.pos < end:
                if not len(mv):
                    return
                take = min(end - self.pos, len(mv))
                self.hasher.update(mv[:take])
                mv, self.pos = mv[take:], self.pos + take
            if self.pos >= end:
                self.digests[name] = [dtype, shape, self.hasher.hexdigest()]
                self.hasher = hashlib.sha256()
                self.idx += 1

    def finish(self) -> dict[str, list[Any]] | None:
        if not self.ok or self.head is not None or self.idx < len(self.tensors):
            return None
        return self.digests


def weights_digest(tensors: list[list[Any]], files: list[list[str]]) -> str | None:
    """The fingerprint from [name, dtype, shape, sha256] per tensor and [relpath, sha256] per
    other weight file; None when the folder holds no weights at all."""
    if not tensors and not files:
        return None
    return sha256_json({"tensors": sorted(tensors), "files": sorted(files)})


def is_weight_file(name: str) -> bool:
    return name.endswith(WEIGHT_SUFFIXES)


def weights_fingerprint(path: str | Path) -> str | None:
    """The weights fingerprint of a trusted folder (the base model), read from disk."""
    path = Path(path)
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    tensors: list[list[Any]] = []
    others: list[list[str]] = []
    for p in files:
        if not is_weight_file(p.name):
            continue
        rel = p.name if p == path else p.relative_to(path).as_posix()
        stream = TensorStream() if p.name.endswith(".safetensors") else None
        digest = hashlib.sha256()
        with open(p, "rb") as fh:
            while chunk := fh.read(CHUNK):
                digest.update(chunk)
                if stream is not None:
                    stream.feed(chunk)
        add_weights(tensors, others, rel, digest.hexdigest(), stream)
    return weights_digest(tensors, others)


def add_weights(tensors: list[list[Any]], others: list[list[str]], rel: str, sha: str,
                stream: TensorStream | None) -> None:
    """Record one weight file: its tensors when it parsed as safetensors, else its content."""
    parsed = stream.finish() if stream is not None else None
    if parsed is None:
        others.append([rel, sha])
    else:
        tensors.extend([name, *info] for name, info in parsed.items())
