"""The bundle contract: what the compiler writes and the runtime and the analysis read.

A bundle is a folder with a manifest (`bundle.json` for a task, `agent.json` for an agent,
`suite.json` for a suite) listing every file's sha256 and one digest over them. `bundle_digest`
is the digest rule the compiler uses to write a manifest and `load_bundle` the one verification
everyone uses to read one: every listed file must be there with its hash, no file may be added
(task and suite bundles; a run adds `prompt.rendered.md` to its copy of the agent), and the digest
must match, so a run can state exactly what it ran and a tampered bundle is refused.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar

from a2c.canonical import sha256_file, sha256_json
from a2c.errors import BundleError

from .spec import SPEC_CLASSES, AgentSpec, SuiteSpec, TaskSpec

BUNDLE_FORMAT = "a2c-bundle/1"
KINDS = ("Task", "Agent", "Suite")
MANIFESTS = {"Task": "bundle.json", "Agent": "agent.json", "Suite": "suite.json"}
MANIFEST = MANIFESTS["Task"]
# Kinds whose folder may hold nothing but the listed files.
CLOSED_KINDS = ("Task", "Suite")


def bundle_digest(spec_hash: str, files: dict[str, str]) -> str:
    """The one number that names a bundle: a hash over the spec hash and every file's hash."""
    return sha256_json({"spec_hash": spec_hash, "files": files})


def write_agent_manifest(folder: Path, agent: dict, compiler_version: str,
                         files: tuple[str, ...] = ("launch.sh", "prompt.md")) -> dict:
    """agent.json for an agent bundle made by hand (a test's or a benchmark's one-off agent)
    over its resolved spec `agent` and `files`, by the compiler's own digest rule."""
    from a2c.canonical import sha256_file
    hashes = {rel: sha256_file(folder / rel) for rel in files}
    spec_hash = sha256_json(agent)
    manifest = {"format": BUNDLE_FORMAT, "compiler_version": compiler_version, "kind": "Agent",
                "id": agent["id"], "spec_hash": spec_hash, "agent": agent, "files": hashes,
                "digest": bundle_digest(spec_hash, hashes)}
    (folder / MANIFESTS["Agent"]).write_text(json.dumps(manifest, indent=2))
    return manifest


class BundleVerificationError(BundleError):
    """A bundle whose files do not match its manifest. `problems` holds (path, what) pairs,
    paths relative to the bundle folder."""

    def __init__(self, root: Path, kind: str, problems: list[tuple[str, str]]):
        self.root, self.kind, self.problems = root, kind, list(problems)
        what = "bundle" if kind == "Task" else f"{kind.lower()} bundle"
        super().__init__(f"{root}: {what} failed verification:\n  "
                         + "\n  ".join(f"{path}: {msg}" for path, msg in self.problems))


@dataclass(frozen=True)
class BundleManifest:
    """The fields every manifest has; `body` is the resolved spec under the kind's key, typed
    (a2c.contracts.spec: TaskSpec, AgentSpec, SuiteSpec), written back exactly as resolved."""

    KIND: ClassVar[str] = ""
    id: str
    spec_hash: str
    files: dict[str, str]
    digest: str
    body: TaskSpec | AgentSpec | SuiteSpec = field(default_factory=TaskSpec)
    compiler_version: str | None = None
    format: str = BUNDLE_FORMAT

    @property
    def kind(self) -> str:
        return self.KIND

    @property
    def key(self) -> str:
        return self.KIND.lower()

    @classmethod
    def create(cls, ident: str, resolved: dict[str, Any], hashes: dict[str, str],
               compiler_version: str) -> BundleManifest:
        """A new manifest for `resolved` and its files' hashes (the compiler's writer)."""
        spec_hash = sha256_json(resolved)
        hashes = dict(sorted(hashes.items()))
        return cls(id=ident, spec_hash=spec_hash, files=hashes,
                   digest=bundle_digest(spec_hash, hashes),
                   body=SPEC_CLASSES[cls.KIND].from_dict(resolved),
                   compiler_version=compiler_version)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"format": self.format, "kind": self.KIND, "id": self.id,
                               "spec_hash": self.spec_hash, "files": dict(self.files),
                               "digest": self.digest}
        if self.compiler_version is not None:
            out["compiler_version"] = self.compiler_version
        out[self.key] = self.body.to_dict()
        return out

    @staticmethod
    def from_dict(data: dict[str, Any]) -> BundleManifest:
        kind = data.get("kind")
        cls = MANIFEST_CLASSES.get(kind) if isinstance(kind, str) else None
        if cls is None:
            raise BundleError(f"unknown bundle kind {kind!r} (one of {', '.join(KINDS)})")
        files = data.get("files") or {}
        if not isinstance(files, dict):
            raise BundleError("manifest 'files' is not an object")
        body = data.get(cls.KIND.lower())
        return cls(id=str(data.get("id", "")), spec_hash=str(data.get("spec_hash", "")),
                   files={str(k): str(v) for k, v in files.items()},
                   digest=str(data.get("digest", "")),
                   body=SPEC_CLASSES[cls.KIND].from_dict(body if isinstance(body, dict)
                                                         else {}),
                   compiler_version=data.get("compiler_version"),
                   format=str(data.get("format", "")))


@dataclass(frozen=True)
class TaskBundle(BundleManifest):
    KIND: ClassVar[str] = "Task"


@dataclass(frozen=True)
class AgentBundle(BundleManifest):
    KIND: ClassVar[str] = "Agent"


@dataclass(frozen=True)
class SuiteBundle(BundleManifest):
    KIND: ClassVar[str] = "Suite"


MANIFEST_CLASSES: dict[str, type[BundleManifest]] = {
    "Task": TaskBundle, "Agent": AgentBundle, "Suite": SuiteBundle}


@dataclass(frozen=True)
class Bundle:
    """A bundle folder and its manifest (`manifest` is the JSON as read, `record` the typed
    manifest, parsed once)."""

    root: Path
    manifest: dict[str, Any]

    @cached_property
    def record(self) -> BundleManifest:
        return BundleManifest.from_dict(self.manifest)

    @property
    def id(self) -> str:
        return self.record.id

    @property
    def kind(self) -> str:
        return self.record.kind

    @property
    def digest(self) -> str:
        return self.record.digest

    @property
    def spec_hash(self) -> str:
        return self.record.spec_hash

    @property
    def task(self) -> TaskSpec:
        """The resolved task, typed (a2c.contracts.spec.TaskSpec)."""
        if self.kind != "Task":
            raise BundleError(f"{self.root}: is an {self.kind} bundle, not a task bundle")
        return TaskSpec.from_dict(self.manifest["task"])

    @property
    def agent(self) -> AgentSpec:
        """The resolved agent, typed (an old manifest without an `agent` key is its own agent)."""
        if self.kind != "Agent":
            raise BundleError(f"{self.root}: is a {self.kind} bundle, not an agent bundle")
        return AgentSpec.from_dict(self.manifest.get("agent", self.manifest))

    @property
    def spec(self) -> TaskSpec | AgentSpec | SuiteSpec:
        """The resolved spec of whichever kind the bundle is, typed (a2c.contracts.spec)."""
        if self.kind == "Task":
            return self.task
        if self.kind == "Agent":
            return self.agent
        body = self.manifest.get(self.kind.lower())
        return SPEC_CLASSES[self.kind].from_dict(body if isinstance(body, dict) else {})

    def path(self, relative: str) -> Path:
        return self.root / relative

    @classmethod
    def load(cls, root: str | Path, verify: bool = True) -> Bundle:
        return load_bundle(root, verify=verify)

    def problems(self) -> list[tuple[str, str]]:
        """(path, what) for every file that is missing, changed or (closed kinds) unlisted."""
        files = self.record.files
        out = []
        for relative, expected in sorted(files.items()):
            path = self.root / relative
            if not path.is_file():
                out.append((relative, "missing"))
            elif sha256_file(path) != expected:
                out.append((relative, "content differs from the manifest"))
        if self.kind in CLOSED_KINDS:
            listed = set(files) | {MANIFESTS[self.kind]}
            for path in sorted(p for p in self.root.rglob("*") if p.is_file()):
                relative = path.relative_to(self.root).as_posix()
                if relative not in listed and "__pycache__" not in relative:
                    out.append((relative, "not in the manifest"))
        if bundle_digest(self.spec_hash, files) != self.digest:
            out.append((MANIFESTS[self.kind], "digest does not match the files"))
        return out

    def verify(self) -> None:
        """Raise BundleVerificationError naming every file that is missing, changed or unlisted."""
        problems = self.problems()
        if problems:
            raise BundleVerificationError(self.root, self.kind, problems)


def _manifest_path(root: Path, kind: str | None) -> Path:
    if kind is not None:
        if kind not in MANIFESTS:
            raise BundleError(f"unknown bundle kind {kind!r} (one of {', '.join(KINDS)})")
        return root / MANIFESTS[kind]
    for name in MANIFESTS.values():
        if (root / name).is_file():
            return root / name
    return root / MANIFEST


def is_bundle(folder: str | Path, kind: str = "Task") -> bool:
    """Whether `folder` holds a bundle of `kind` (its manifest file is there)."""
    return (Path(folder) / MANIFESTS[kind]).is_file()


def read_manifest(root: str | Path, kind: str = "Task") -> dict[str, Any]:
    """A bundle folder's manifest as written, unchecked (no format, kind or file check: for
    readers of a run's own copy, which `load_bundle` verified when the run was prepared).
    OSError or ValueError when it is missing or not a JSON object."""
    path = _manifest_path(Path(root), kind)
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"{path}: not a JSON object")
    return data


def parse_manifest(text: str | bytes) -> BundleManifest:
    """A manifest held in memory (a build's artifact before it is written), typed; unchecked
    like `read_manifest`. ValueError when it is not JSON, BundleError when not a manifest."""
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError("manifest: not a JSON object")
    return BundleManifest.from_dict(data)


def load_bundle(root: str | Path, kind: str | None = None, verify: bool = True) -> Bundle:
    """Read (and by default verify) the bundle at `root`: the one bundle check.

    `kind` ("Task", "Agent", "Suite") picks the manifest file and refuses another kind; without
    it the manifest found first (bundle.json, agent.json, suite.json) is read. Raises BundleError
    (BundleVerificationError for files that do not match) with a message naming the problem.
    """
    root = Path(root)
    manifest_path = _manifest_path(root, kind)
    if not manifest_path.is_file():
        raise BundleError(f"{root}: not a bundle (no {manifest_path.name}); build one with "
                          "`a2c build`")
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise BundleError(f"{manifest_path}: unreadable manifest: {exc}") from exc
    if not isinstance(manifest, dict):
        raise BundleError(f"{manifest_path}: unreadable manifest: not a JSON object")
    if manifest.get("format") != BUNDLE_FORMAT:
        raise BundleError(f"{manifest_path}: format {manifest.get('format')!r}, "
                          f"this a2c reads {BUNDLE_FORMAT!r}")
    found = manifest.get("kind")
    expected = kind or next(k for k, name in MANIFESTS.items() if name == manifest_path.name)
    if found != expected:
        raise BundleError(f"{manifest_path}: is a {found!r} bundle, not {expected!r}")
    if not isinstance(manifest.get("files", {}), dict):
        raise BundleError(f"{manifest_path}: unreadable manifest: 'files' is not an object")
    bundle = Bundle(root=root, manifest=manifest)
    if verify:
        bundle.verify()
    return bundle
