"""A scaffold's packages for the docker backend: `a2c-tools:<key>`, copied into the agent layer.

An LLM scaffold (specs/agents/*.yaml, `install:`) is an npm CLI or a pip package. The local
backend runs the host's install (`a2c agents install`); a container sees only its image, so the
agent layer carries the scaffold itself, at /opt/a2c/tools:

    bin/          node and the scaffold's own commands (links), last on the image's PATH
    npm/          `npm install --prefix` of the spec's pinned npm packages and of node itself
    venvs/<id>/   a virtual environment per pip scaffold (Debian's python3, as in the base)

Node comes from npm's `node-linux-<arch>` package (the official binaries, pinned in
runtime/scaffold_tools.py, as for the local backend's tool prefix): Debian bookworm's nodejs is
18, and Claude Code's pinned release asks for node 22 or newer. The npm
install runs on the host with the host's npm and registry configuration (as the base's wheels
are resolved with the host's pip); the pip scaffold's wheels are resolved by the host's pip and
installed `--no-index` in a container with network `none`. That container, started from the
offline Debian root filesystem (so a venv's python is /usr/bin/python3, which every offline base
has), is committed as `a2c-tools:<key>`, keyed by the install lines, the node release and the
recipe: built once, and each agent layer copies it (`COPY --from`) without reinstalling.

Install `commands:` (OpenHands' `uv tool install ... --python 3.12`) are not run here: they
fetch an interpreter at install time; `unsupported` names them for the refusal.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from a2c.contracts.spec import AgentSpec, InstallSpec
from a2c.errors import RunError
from a2c.runtime.sandbox.docker_engine import engine_error
from a2c.runtime.scaffold_tools import (
    NODE_VERSION,
    InstallError,
    InstallLog,
    node_package,
    npm_install,
    package_bins,
)

TOOLS_DIR = "/opt/a2c/tools"
TOOLS_REPOSITORY = "a2c-tools"
TOOLS_RECIPE = 2                # bump when what a tools image holds changes
TOOLS_LABEL = "a2c.tools"       # on an agent layer: the tools image it copied


@dataclass(frozen=True)
class Installs:
    """The agent spec's pinned npm and pip packages (sorted: the tools image's key), and its
    install commands (in order; the docker backend refuses them)."""

    npm: tuple[str, ...] = ()
    pip: tuple[str, ...] = ()
    commands: tuple[str, ...] = ()

    @classmethod
    def of(cls, agent: AgentSpec) -> Installs:
        install = agent.install if isinstance(agent.install, InstallSpec) else InstallSpec()
        commands = [c.get("run") if isinstance(c, dict) else c for c in install.commands or []]
        return cls(npm=tuple(sorted(str(p) for p in install.npm or [])),
                   pip=tuple(sorted(str(p) for p in install.pip or [])),
                   commands=tuple(str(c) for c in commands if c))

    def label(self) -> str:
        """What the tools image's label says it holds (with the node release)."""
        return json.dumps({"npm": list(self.npm), "pip": list(self.pip),
                           "commands": list(self.commands), "node": NODE_VERSION},
                          sort_keys=True)


def installs(agent: AgentSpec) -> Installs:
    """The agent spec's pinned npm and pip packages, and its install commands."""
    return Installs.of(agent)


def unsupported(agent: AgentSpec) -> list[str]:
    """Install lines the docker backend cannot put into an image (empty: it can run the agent)."""
    return list(installs(agent).commands)


def tools_tag(agent: AgentSpec, rootfs: str) -> str | None:
    """`a2c-tools:<key>` for the agent's packages, or None when it installs none."""
    found = installs(agent)
    if not (found.npm or found.pip):
        return None
    from a2c.runtime.sandbox.docker_images import _key
    key = _key(TOOLS_RECIPE, rootfs, node_package() if found.npm else None,
               list(found.npm), list(found.pip))
    return f"{TOOLS_REPOSITORY}:{key}"


def npm_tree(packages: list[str], dest: Path, report) -> None:
    """DEST/npm: node and PACKAGES installed by the host's npm; DEST/bin: links to their commands."""
    if not shutil.which("npm"):
        raise RunError("docker backend: the scaffold's npm packages are installed with the host's "
                       "npm, which is not here (install nodejs and npm)")
    prefix = dest / "npm"
    wanted = [node_package(), *packages]
    report(f"scaffold tools: npm install {' '.join(wanted)}")
    with tempfile.TemporaryDirectory() as scratch:
        try:
            npm_install(prefix, wanted, InstallLog(Path(scratch) / "npm.log"))
        except InstallError as exc:
            last = exc.tail[-1][:300] if exc.tail else str(exc)
            raise RunError(f"docker backend: npm install {' '.join(packages)} failed: "
                           f"{last}") from exc
    bin_dir = dest / "bin"
    bin_dir.mkdir(exist_ok=True)
    for spec in wanted:
        name = spec.rsplit("@", 1)[0]
        for command, rel in package_bins(prefix / "node_modules", spec).items():
            link = bin_dir / command
            link.unlink(missing_ok=True)
            link.symlink_to(Path("..", "npm", "node_modules", name, rel))


# Run by the venv's python: links in bin/ to the console scripts of the named distributions
# only (not those of their dependencies: litellm's, hf's, tqdm's stay inside the venv).
LINK_SCRIPTS = """
import importlib.metadata as md, os, sys
venv, names = sys.argv[1], sys.argv[2:]
for name in names:
    for ep in md.distribution(name).entry_points.select(group="console_scripts"):
        link = os.path.join("{tools}/bin", ep.name)
        if not os.path.lexists(link):
            os.symlink(os.path.relpath(os.path.join(venv, "bin", ep.name), "{tools}/bin"), link)
""".replace("{tools}", TOOLS_DIR)


def pip_script(agent_id: str, packages: list[str]) -> str:
    """Shell run in the tools container: the scaffold's venv, offline, and links to its commands."""
    venv = f"{TOOLS_DIR}/venvs/{agent_id}"
    pkgs = " ".join(shlex.quote(p) for p in packages)
    names = " ".join(shlex.quote(re.split(r"[=<>!~\[; ]", p, maxsplit=1)[0]) for p in packages)
    return (f"python3 -m venv {venv} && "
            f"{venv}/bin/python -m pip install --no-index --find-links /wheels --no-cache-dir "
            f"--disable-pip-version-check --quiet {pkgs} && "
            f"{venv}/bin/python -c {shlex.quote(LINK_SCRIPTS)} {venv} {names}")


def ensure_tools(client, agent: AgentSpec, report=print) -> tuple[str | None, float]:
    """The agent's tools image, built once (under the image build lock); (tag, seconds)."""
    from a2c.runtime.sandbox.docker_images import build_lock, has_image, make_rootfs, rootfs_tag
    start = time.monotonic()
    tag = tools_tag(agent, rootfs_tag())
    if tag is None or has_image(client, tag):
        return tag, time.monotonic() - start
    bad = unsupported(agent)
    if bad:
        raise RunError(f"agent {agent.id}: the docker backend does not run install "
                       f"commands ({'; '.join(bad)}); use --backend local")
    with build_lock():
        if has_image(client, tag):
            return tag, time.monotonic() - start
        rootfs = make_rootfs(client, report).tag
        _build_tools(client, agent, tag, rootfs, report)
    seconds = time.monotonic() - start
    report(f"scaffold tools image {tag} built ({seconds:.1f} s)")
    return tag, seconds


def _build_tools(client, agent: AgentSpec, tag: str, rootfs: str, report) -> None:
    from a2c.runtime.sandbox.docker_images import _split, image_cache, wheelhouse
    found = installs(agent)
    work = image_cache() / f"tools-{tag.rpartition(':')[2]}"
    shutil.rmtree(work, ignore_errors=True)
    (work / "bin").mkdir(parents=True)
    try:
        if found.npm:
            npm_tree(list(found.npm), work, report)
        wheels = wheelhouse(list(found.pip), report)
        steps = [f"mkdir -p {TOOLS_DIR}", f"cp -a /src/. {TOOLS_DIR}/"]
        if found.pip:
            steps.append(pip_script(str(agent.id), list(found.pip)))
        steps.append(f"chmod -R a+rX,go-w {TOOLS_DIR}")
        _commit(client, rootfs, " && ".join(steps), tag,
                {str(work): {"bind": "/src", "mode": "ro"},
                 str(wheels): {"bind": "/wheels", "mode": "ro"}}, agent, _split)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _commit(client, rootfs: str, script: str, tag: str, volumes: dict, agent: AgentSpec,
            split) -> None:
    container = None
    try:
        container = client.containers.run(rootfs, ["sh", "-c", script], detach=True,
                                          user="0:0", network_mode="none", volumes=volumes)
        rc = int(container.wait().get("StatusCode", -1))
        if rc != 0:
            tail = container.logs(tail=5).decode("utf-8", "replace").strip().splitlines()
            raise RunError(f"docker backend: installing {agent.id}'s packages failed "
                           f"(exit {rc}): {tail[-1][:300] if tail else 'no output'}")
        repository, version = split(tag)
        label = installs(agent).label()
        container.commit(repository=repository, tag=version,
                         changes=[f"LABEL {TOOLS_LABEL}={json.dumps(label)}"])
    except RunError:
        raise
    except Exception as exc:  # noqa: BLE001 - the engine's own reason, one line
        raise RunError(f"docker backend: the scaffold tools image: {engine_error(exc)}") from exc
    finally:
        if container is not None:
            try:
                container.remove(force=True)
            except Exception:  # noqa: BLE001 - a leftover stopped container is harmless
                pass


def layer_lines(tools: str | None) -> list[str]:
    """The agent layer's Dockerfile lines that bring the tools in (none without tools)."""
    if not tools:
        return []
    return [f"COPY --from={tools} {TOOLS_DIR} {TOOLS_DIR}",
            f"ENV PATH=$PATH:{TOOLS_DIR}/bin",     # last: the task's own commands come first
            f"LABEL {TOOLS_LABEL}={json.dumps(tools)}"]


def layer_has_tools(client, tag: str, tools: str | None) -> bool:
    """Whether the agent layer TAG was built with TOOLS (an older layer without them is rebuilt)."""
    if not tools:
        return True
    try:
        labels = client.images.get(tag).labels or {}
    except Exception:  # noqa: BLE001 - not there: not built with them
        return False
    return labels.get(TOOLS_LABEL) == tools


__all__ = ["TOOLS_DIR", "ensure_tools", "installs", "layer_has_tools", "layer_lines",
           "node_package", "tools_tag", "unsupported"]
