"""Running one install command of a scaffold's tool (runtime/scaffold_tools.py, and the docker
backend's tools image): its output into one log that outlives a failure, and a failure as one
short line with the command's last lines, never a dump of every line pip or npm printed.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from a2c.errors import RunError

TAIL_LINES = 12              # of a failed command's output, shown first
INSTALL_TIMEOUT = 1800       # seconds for one npm or pip command


class InstallError(RunError):
    """A scaffold's install failed: the failing command, its exit status and its last lines."""

    def __init__(self, message: str, tail: list[str] | None = None, log: Path | None = None):
        super().__init__(message)
        self.tail = tail or []
        self.log = log


@dataclass
class InstallLog:
    """One agent's install log: every command and its output, in one file that outlives a
    failure (PREFIX/lib/a2c-tools/logs/<id>.log)."""

    path: Path
    echo: Callable[[str], None] | None = None     # each command as it starts (verbose)
    started: float = field(default_factory=time.monotonic)

    def run(self, argv: list[str], cwd: Path | None = None, label: str | None = None) -> None:
        """Run ARGV with its output into the log; a failure names it by LABEL (a short form of
        the command, without the staging folder's path), with the output's last lines."""
        line = shlex.join(argv)
        if self.echo:
            self.echo(f"+ {line}")
        mark = self.path.stat().st_size if self.path.exists() else 0
        with self.path.open("a") as handle:
            handle.write(f"+ {line}\n")
            handle.flush()
            try:
                proc = subprocess.run(argv, stdout=handle, stderr=subprocess.STDOUT, cwd=cwd,
                                      stdin=subprocess.DEVNULL, timeout=INSTALL_TIMEOUT,
                                      check=False)
                rc = proc.returncode
            except subprocess.TimeoutExpired:
                rc = "timed out"
            except OSError as exc:
                handle.write(f"{exc}\n")
                rc = "could not start"
        if rc != 0:
            with self.path.open() as handle:
                handle.seek(mark)
                lines = [x.rstrip() for x in handle.read().splitlines()[1:] if x.strip()]
            status = f"exit {rc}" if isinstance(rc, int) else rc
            raise InstallError(f"`{label or line}` failed ({status})", lines[-TAIL_LINES:],
                               self.path)


def npm_install(npm_prefix: Path, packages: list[str], log: InstallLog) -> None:
    """`npm install --prefix` of PACKAGES with the machine's npm (the docker backend's tools
    image is filled the same way)."""
    npm = shutil.which("npm")
    if npm is None:
        raise InstallError("npm is not installed (it comes with Node.js: apt-get install npm)")
    npm_prefix.mkdir(parents=True, exist_ok=True)
    log.run([npm, "install", "--prefix", str(npm_prefix), "--no-audit", "--no-fund",
             "--no-update-notifier", "--loglevel=error", *packages], cwd=npm_prefix,
            label=f"npm install {' '.join(packages)}")


def package_bins(node_modules: Path, spec: str) -> dict[str, str]:
    """The commands an installed npm package declares: {command: path inside the package}."""
    name = spec.rsplit("@", 1)[0] if spec.rfind("@") > 0 else spec
    meta = json.loads((node_modules / name / "package.json").read_text())
    bins = meta.get("bin") or {}
    if isinstance(bins, str):
        bins = {name.rsplit("/", 1)[-1]: bins}
    return {str(k): str(v) for k, v in bins.items()}
