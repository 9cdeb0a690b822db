"""Reading a compiled bundle: the runtime's only source of truth about a task.

A bundle is checked before it is used: every file's sha256 must match the manifest and the digest
must match the files, so a run can state exactly what it ran and a tampered bundle is refused.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from a2c.canonical import sha256_file, sha256_json
from a2c.errors import BundleError

BUNDLE_FORMAT = "a2c-bundle/1"
MANIFEST = "bundle.json"


def bundle_digest(spec_hash: str, files: dict[str, str]) -> str:
    """The one number that names a bundle: a hash over the spec hash and every file's hash."""
    return sha256_json({"spec_hash": spec_hash, "files": files})


@dataclass(frozen=True)
class Bundle:
    root: Path
    manifest: dict[str, Any]

    @property
    def id(self) -> str:
        return self.manifest["id"]

    @property
    def kind(self) -> str:
        return self.manifest["kind"]

    @property
    def digest(self) -> str:
        return self.manifest["digest"]

    @property
    def spec_hash(self) -> str:
        return self.manifest["spec_hash"]

    @property
    def task(self) -> dict[str, Any]:
        if self.kind != "Task":
            raise BundleError(f"{self.root}: is an {self.kind} bundle, not a task bundle")
        return self.manifest["task"]

    @property
    def agent(self) -> dict[str, Any]:
        if self.kind != "Agent":
            raise BundleError(f"{self.root}: is a {self.kind} bundle, not an agent bundle")
        return self.manifest["agent"]

    def path(self, relative: str) -> Path:
        return self.root / relative

    @classmethod
    def load(cls, root: str | Path, verify: bool = True) -> Bundle:
        root = Path(root)
        manifest_path = root / MANIFEST
        if not manifest_path.is_file():
            raise BundleError(f"{root}: not a bundle (no {MANIFEST}); build one with `a2c build`")
        try:
            manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError) as exc:
            raise BundleError(f"{manifest_path}: unreadable manifest: {exc}") from exc
        if manifest.get("format") != BUNDLE_FORMAT:
            raise BundleError(f"{manifest_path}: format {manifest.get('format')!r}, "
                              f"this a2c reads {BUNDLE_FORMAT!r}")
        bundle = cls(root=root, manifest=manifest)
        if verify:
            bundle.verify()
        return bundle

    def verify(self) -> None:
        """Raise BundleError naming the first file that is missing, changed or unlisted."""
        files: dict[str, str] = self.manifest.get("files", {})
        problems = []
        for relative, expected in sorted(files.items()):
            path = self.root / relative
            if not path.is_file():
                problems.append(f"{relative}: missing")
            elif sha256_file(path) != expected:
                problems.append(f"{relative}: content differs from the manifest")
        listed = set(files) | {MANIFEST}
        for path in sorted(p for p in self.root.rglob("*") if p.is_file()):
            relative = path.relative_to(self.root).as_posix()
            if relative not in listed and "__pycache__" not in relative:
                problems.append(f"{relative}: not in the manifest")
        if bundle_digest(self.manifest.get("spec_hash", ""), files) != self.manifest.get("digest"):
            problems.append("digest does not match the files")
        if problems:
            raise BundleError(f"{self.root}: bundle failed verification:\n  " + "\n  ".join(problems))
