"""Images for the docker backend: the offline base, the task bundle's image, the agent layer.

    a2c-debian:bookworm-<key>        Debian's packages only (mmdebstrap from apt's mirror)
    a2c-base:bookworm-py311-<key>    + a Python venv holding the bundle's pinned requirements
    a2c-<task>:<task digest>         the bundle's own Dockerfile, built on the pinned base
    a2c-<task>-<agent>:<t12>-<a12>   + the agent bundle's files at /opt/a2c/agent (what runs)
                                     and a scaffold's packages (a2c-tools:<key>, docker_scaffolds;
                                     this layer: docker_agent_layer.py)

The bundle's Dockerfile starts `ARG A2C_BASE_IMAGE=<pinned ref>` / `FROM ${A2C_BASE_IMAGE}`. Where
the pinned base is present or can be pulled it is used as is. Where it cannot (no registry is
reachable from these machines), the runtime makes a base offline and passes it as the build
argument, so the bundle's Dockerfile builds on it unchanged:

- the root filesystem is made by `mmdebstrap --variant=minbase` from Debian's own mirror (the one
  apt uses; `A2C_DEBIAN_MIRROR`) and imported (`docker import`);
- Python is Debian's own python3 (3.11 in bookworm, the same minor version and wheel tags as the
  pinned `python:3.11.x` image), in a virtual environment at /opt/a2c/python that is first on
  PATH, so `python` and `python -m pip` are that venv's, as `/usr/local/bin/python` is the
  official image's. A venv rather than a copied interpreter: Debian marks its python
  EXTERNALLY-MANAGED (PEP 668), and a venv is the way it sanctions; the interpreter stays one
  apt can update, and nothing of the host's pyenv prefix is copied into an image;
- the bundle's pinned requirements are resolved on the host with the host's own pip
  configuration (`pip wheel` into a wheelhouse: here that finds the CPU build of torch in
  /opt/wheels, where PyPI would serve a multi-GB CUDA build) and installed `--no-index` from it in a
  container with network `none`; the container is committed as the base. The bundle's `RUN
  python -m pip install NAME==VERSION ...` is then satisfied with nothing downloaded.

Images are keyed by what went into them (SWE-bench's base -> environment -> instance), built
once and reused: an image already tagged is never rebuilt. Builds run with network `host` (the
daemon runs without a bridge), so package installs reach the registries the host reaches.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import re
import shlex
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from a2c.contracts.bundle import MANIFESTS, BundleManifest
from a2c.contracts.spec import SoftwareSpec, TaskSpec
from a2c.errors import BundleError, RunError
from a2c.runtime.sandbox.docker_engine import engine_error
from a2c.settings import get as setting
from a2c.settings import get_path

Report = Callable[[str], None]

SUITE = "bookworm"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
DEB_PACKAGES = ("ca-certificates", "passwd", "python3", "python3-venv")
PYTHON_PREFIX = "/opt/a2c/python"
RECIPE = 1                      # bump when the recipe below changes what an image holds
BASE_ARG = "A2C_BASE_IMAGE"
PATH_IN_BASE = f"{PYTHON_PREFIX}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
AGENT_DIR = "/opt/a2c/agent"


@dataclass
class Built:
    """What an `ensure_*` call did: the tag, whether it built anything, how long it took."""
    tag: str
    built: bool
    seconds: float
    how: str = ""               # "present", "pulled", "built", "offline base"
    steps: dict[str, float] = field(default_factory=dict)


def image_cache() -> Path:
    """Rootfs tarballs (removed after import) and the wheelhouse: $A2C_IMAGE_CACHE, else
    ~/.cache/a2c/images (never inside the repository, never a test's temporary cache)."""
    path = get_path("A2C_IMAGE_CACHE") or Path.home() / ".cache" / "a2c" / "images"
    path.mkdir(parents=True, exist_ok=True)
    return path


_held = threading.local()


@contextlib.contextmanager
def build_lock():
    """One image build at a time on this machine (a file lock in the image cache): two runs,
    trials of a sweep or CI's early `a2c images build` beside the tests, asking for the same
    missing image wait for the first build and then find it present, instead of building it twice
    side by side. Re-entrant within a process (ensure_run_image, docker_agent_layer.py, calls
    ensure_task_image)."""
    if getattr(_held, "depth", 0):
        _held.depth += 1
        try:
            yield
        finally:
            _held.depth -= 1
        return
    with open(image_cache() / "build.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        _held.depth = 1
        try:
            yield
        finally:
            _held.depth = 0
            fcntl.flock(handle, fcntl.LOCK_UN)


def mirror() -> str:
    return setting("A2C_DEBIAN_MIRROR") or DEFAULT_MIRROR


def _key(*parts) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


def rootfs_tag() -> str:
    return f"a2c-debian:{SUITE}-{_key(RECIPE, SUITE, DEB_PACKAGES)}"


def base_tag(requirements: list[str]) -> str:
    return f"a2c-base:{SUITE}-py311-{_key(RECIPE, rootfs_tag(), sorted(requirements))}"


def _name(text: str) -> str:
    return re.sub(r"[^a-z0-9._-]+", "-", str(text or "bundle").lower()).strip("-._") or "bundle"


def manifest(root: Path | None, kind: str = "Task") -> BundleManifest | None:
    """The bundle's manifest, typed; None without a readable one (a per-run image then)."""
    if root is None:
        return None
    try:
        found = json.loads((Path(root) / MANIFESTS[kind]).read_text(encoding="utf-8"))
        return BundleManifest.from_dict(found) if isinstance(found, dict) else None
    except (OSError, ValueError, BundleError):
        return None


def _digest(found: BundleManifest | None) -> str | None:
    digest = found.digest if found else None
    return digest if digest and re.fullmatch(r"[0-9a-f]{64}", digest) else None


def task_tag(bundle_root: Path | None) -> str | None:
    """`a2c-<task>:<bundle digest>`, or None without a manifest."""
    found = manifest(bundle_root)
    digest = _digest(found)
    return f"a2c-{_name(found.id)}:{digest}" if found and digest else None


def agent_tag(bundle_root: Path | None, agent_root: Path | None) -> str | None:
    """`a2c-<task>-<agent>:<task digest 12>-<agent digest 12>`, or None without both manifests."""
    task, agent = manifest(bundle_root), manifest(agent_root, "Agent")
    td, ad = _digest(task), _digest(agent)
    if not (task and agent and td and ad):
        return None
    return f"a2c-{_name(task.id)}-{_name(agent.id)}:{td[:12]}-{ad[:12]}"


def _software(bundle_root: Path) -> SoftwareSpec:
    """The task's `environment:` (its image and packages) from the bundle's manifest."""
    found = manifest(bundle_root)
    task = found.body if found else None
    return task.environment if isinstance(task, TaskSpec) and \
        isinstance(task.environment, SoftwareSpec) else SoftwareSpec()


def pinned_base(bundle_root: Path) -> str:
    """The bundle's pinned base reference (its manifest's environment.base_image)."""
    ref = _software(bundle_root).base_image
    if not ref:
        raise RunError(f"docker backend: {bundle_root} names no base image "
                       "(task.environment.base_image)")
    return str(ref)


def requirements(bundle_root: Path) -> list[str]:
    return sorted(str(p) for p in _software(bundle_root).packages or [])


def has_image(client, tag: str) -> bool:
    try:
        client.images.get(tag)
    except Exception:  # noqa: BLE001 - ImageNotFound, or an engine error: not usable as is
        return False
    return True


def _split(tag: str) -> tuple[str, str]:
    repository, _, version = tag.rpartition(":")
    return repository, version


# ---------------------------------------------------------------------- the offline base
def make_rootfs(client, report: Report = print) -> Built:
    """`a2c-debian:bookworm-<key>`: Debian minbase + python3 and venv, from apt's mirror."""
    tag, start = rootfs_tag(), time.monotonic()
    if has_image(client, tag):
        return Built(tag, False, time.monotonic() - start, "present")
    tool = shutil.which("mmdebstrap")
    if not tool:
        raise RunError("offline base image: mmdebstrap is not installed (apt-get install "
                       "mmdebstrap); it makes the root filesystem from Debian's packages")
    tarball = image_cache() / f"rootfs-{tag.rpartition(':')[2]}.tar"
    excludes = [f"--dpkgopt=path-exclude={p}" for p in
                ("/usr/share/doc/*", "/usr/share/man/*", "/usr/share/info/*",
                 "/usr/share/locale/*")]
    argv = [tool, "--variant=minbase", "--include=" + ",".join(DEB_PACKAGES), *excludes,
            "--format=tar", SUITE, str(tarball), mirror()]
    report(f"offline base: making a Debian {SUITE} root filesystem (mmdebstrap, {mirror()})")
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=1800)
    except (OSError, subprocess.TimeoutExpired) as exc:
        tarball.unlink(missing_ok=True)
        raise RunError(f"offline base image: mmdebstrap did not run: {exc}") from exc
    if proc.returncode != 0:
        tarball.unlink(missing_ok=True)
        last = [line for line in (proc.stderr or proc.stdout).splitlines() if line.strip()]
        raise RunError(f"offline base image: mmdebstrap failed (exit {proc.returncode}) with "
                       f"mirror {mirror()}: {last[-1][:300] if last else 'no output'}")
    repository, version = _split(tag)
    try:
        client.api.import_image_from_file(str(tarball), repository=repository, tag=version,
                                          changes=["ENV LANG=C.UTF-8", 'CMD ["bash"]'])
    except Exception as exc:  # noqa: BLE001 - the engine's own reason, one line
        raise RunError(f"offline base image: docker import failed: {engine_error(exc)}") from exc
    finally:
        tarball.unlink(missing_ok=True)
    return Built(tag, True, time.monotonic() - start, "built")


def wheelhouse(reqs: list[str], report: Report = print) -> Path:
    """The requirements and their dependencies as wheels, resolved by the host's pip with the
    host's configuration (its indexes, find-links and constraints), into a shared folder."""
    folder = image_cache() / "wheels"
    folder.mkdir(parents=True, exist_ok=True)
    if not reqs:
        return folder
    report(f"offline base: resolving {len(reqs)} pinned requirement(s) into {folder}")
    argv = [sys.executable, "-m", "pip", "wheel", "--quiet", "--wheel-dir", str(folder), *reqs]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=3600)
    if proc.returncode != 0:
        last = [line for line in (proc.stderr or proc.stdout).splitlines()
                if line.strip() and not line.startswith("WARNING")]
        raise RunError("offline base image: the host's pip could not get the bundle's "
                       f"requirements ({' '.join(reqs)}): {last[-1][:300] if last else 'no output'}")
    return folder


def install_script(reqs: list[str]) -> str:
    """What runs in the rootfs container (network none) to make the base's Python."""
    steps = [f"python3 -m venv {PYTHON_PREFIX}"]
    if reqs:
        steps.append(f"{PYTHON_PREFIX}/bin/python -m pip install --no-index --find-links /wheels "
                     "--no-cache-dir --disable-pip-version-check --quiet "
                     + " ".join(shlex.quote(r) for r in reqs))
    steps.append("rm -rf /root/.cache")
    return " && ".join(steps)


def make_base(client, reqs: list[str], report: Report = print) -> Built:
    """`a2c-base:bookworm-py311-<key>`: the offline stand-in for the pinned python base."""
    with build_lock():
        return _make_base(client, reqs, report)


def _make_base(client, reqs: list[str], report: Report) -> Built:
    tag, start = base_tag(reqs), time.monotonic()
    if has_image(client, tag):
        return Built(tag, False, time.monotonic() - start, "present")
    rootfs = make_rootfs(client, report)
    steps = {"rootfs_s": round(rootfs.seconds, 1)}
    mark = time.monotonic()
    wheels = wheelhouse(reqs, report)
    steps["wheels_s"] = round(time.monotonic() - mark, 1)
    mark = time.monotonic()
    report(f"offline base: installing Python and {len(reqs)} requirement(s) (no network)")
    container = None
    try:
        container = client.containers.run(
            rootfs.tag, ["sh", "-c", install_script(reqs)], detach=True, user="0:0",
            network_mode="none", volumes={str(wheels): {"bind": "/wheels", "mode": "ro"}})
        rc = int(container.wait().get("StatusCode", -1))
        if rc != 0:
            tail = container.logs(tail=5).decode("utf-8", "replace").strip().splitlines()
            raise RunError(f"offline base image: installing the requirements failed (exit {rc}): "
                           f"{tail[-1][:300] if tail else 'no output'}")
        repository, version = _split(tag)
        label = json.dumps({"requirements": reqs, "rootfs": rootfs.tag}, sort_keys=True)
        container.commit(repository=repository, tag=version, changes=[
            f"ENV PATH={PATH_IN_BASE}", f"ENV VIRTUAL_ENV={PYTHON_PREFIX}", "ENV LANG=C.UTF-8",
            f"LABEL a2c.base={shlex.quote(label)}", 'CMD ["python3"]'])
    except RunError:
        raise
    except Exception as exc:  # noqa: BLE001 - the engine's own reason, one line
        raise RunError(f"offline base image: {engine_error(exc)}") from exc
    finally:
        if container is not None:
            try:
                container.remove(force=True)
            except Exception:  # noqa: BLE001 - a leftover stopped container is harmless
                pass
    steps["install_s"] = round(time.monotonic() - mark, 1)
    return Built(tag, True, time.monotonic() - start, "built", steps)


def resolve_base(client, bundle_root: Path, report: Report = print) -> Built:
    """The base the bundle's Dockerfile builds on: the pinned one where it is present or can be
    pulled, else the offline base for the bundle's requirements."""
    ref, start = pinned_base(bundle_root), time.monotonic()
    if has_image(client, ref):
        return Built(ref, False, time.monotonic() - start, "present")
    try:
        client.images.pull(ref)
        return Built(ref, True, time.monotonic() - start, "pulled")
    except Exception as exc:  # noqa: BLE001 - no registry: the offline base takes its place
        report(f"the pinned base {ref.split('@')[0]} cannot be pulled ({engine_error(exc)[:120]});"
               " using the offline base")
    built = make_base(client, requirements(bundle_root), report)
    built.how = "offline base"
    return built


# ---------------------------------------------------------------------- bundle images
def _build(client, tag: str, what: str, **kwargs) -> None:
    import docker
    try:
        client.images.build(tag=tag, rm=True, forcerm=True, pull=False, network_mode="host",
                            **kwargs)
    except docker.errors.BuildError as exc:
        lines = [str(entry.get("stream") or entry.get("error") or "").strip()
                 for entry in (exc.build_log or [])]
        lines = [line for line in lines if line]
        raise RunError(f"docker backend: building {what} ({tag}) failed: "
                       f"{lines[-1][:300] if lines else engine_error(exc)}") from exc
    except Exception as exc:  # noqa: BLE001 - the engine's own reason, one line
        raise RunError(f"docker backend: building {what} ({tag}) failed: "
                       f"{engine_error(exc)}") from exc


def ensure_task_image(client, bundle_root: Path, report: Report = print,
                      tag: str | None = None) -> Built:
    """The task bundle's image, built from its Dockerfile once per bundle digest."""
    with build_lock():
        return _ensure_task_image(client, bundle_root, report, tag)


def _ensure_task_image(client, bundle_root: Path, report: Report, tag: str | None) -> Built:
    start = time.monotonic()
    tag = tag or task_tag(bundle_root)
    if tag is None:
        raise RunError(f"docker backend: {bundle_root} has no bundle manifest to tag an image by")
    if has_image(client, tag):
        return Built(tag, False, time.monotonic() - start, "present")
    base = resolve_base(client, bundle_root, report)
    report(f"building {tag} from {bundle_root}/Dockerfile on {base.tag}")
    mark = time.monotonic()
    buildargs = {} if base.tag == pinned_base(bundle_root) else {BASE_ARG: base.tag}
    task = manifest(bundle_root)
    _build(client, tag, "the task image", path=str(bundle_root), buildargs=buildargs,
           labels={"a2c.task": str(task.id if task else None), "a2c.base": base.tag})
    steps = {**base.steps, "base_s": round(base.seconds, 1),
             "bundle_s": round(time.monotonic() - mark, 1)}
    return Built(tag, True, time.monotonic() - start, "built", steps)


def list_images(client) -> list[dict]:
    """Every a2c image the engine holds: tag, size, created (for `a2c images list`)."""
    out = []
    for image in client.images.list():
        for tag in image.tags:
            if tag.startswith("a2c-"):
                out.append({"tag": tag, "id": image.short_id.split(":")[-1],
                            "size_mb": round((image.attrs.get("Size") or 0) / 1e6, 1),
                            "created": str(image.attrs.get("Created", ""))[:19]})
    return sorted(out, key=lambda row: row["tag"])
