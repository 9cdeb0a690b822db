"""The built wheel holds every subpackage and data file of the six source folders, under `a2c`.

pyproject.toml remaps `compiler/ runtime/ agents/ analysis/ templates/ specs/` (and `a2c/`) into
the one import name `a2c` without listing packages; this builds a real, non-editable wheel and
checks that nothing the checkout has is missing from it, and that nothing else (tests, generated
bundles, caches) is in it. `test_imports_come_from_the_installed_wheel` guards CI's wheel pass
(`nox -s wheel`, A2C_WHEEL_TEST=1): there the code under test must not come from the checkout.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from a2c.paths import project_root

ROOT = project_root()
# source folder in the checkout -> where it lands in the wheel
FOLDERS = {"a2c": "a2c", "compiler": "a2c/compiler", "runtime": "a2c/runtime",
           "agents": "a2c/agents", "analysis": "a2c/analysis", "templates": "a2c/templates",
           "specs": "a2c/specs"}
KEY_DATA = [
    "a2c/compiler/schemas/task.schema.json",
    "a2c/templates/task/Dockerfile.j2",
    "a2c/templates/task/workspace/INSTRUCTIONS.md.j2",
    "a2c/templates/task/hooks/bash_logging.sh.j2",
    "a2c/templates/agent/launch.sh.j2",
    "a2c/templates/cookiecutter-task/cookiecutter.json",
    "a2c/templates/cookiecutter-task/{{cookiecutter.task_id}}/{{cookiecutter.task_id}}.yaml",
    "a2c/templates/cookiecutter-task/{{cookiecutter.task_id}}/data/{{cookiecutter.task_id}}/train.jsonl",
    "a2c/specs/tasks/arith.yaml",
]

pytestmark = pytest.mark.skipif(not (ROOT / "pyproject.toml").is_file(),
                                reason="needs the source checkout (pyproject.toml)")


def _checkout_files() -> list[str]:
    """Files under the source folders that a build would see: git's view where there is one
    (tracked plus untracked, less what .gitignore names), else a walk less caches."""
    try:
        out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard",
                              "-z", "--", *FOLDERS], cwd=ROOT, capture_output=True, check=True)
        files = [f for f in out.stdout.decode().split("\0") if f]
        return [f for f in files if (ROOT / f).is_file()]
    except (OSError, subprocess.CalledProcessError):
        return [p.relative_to(ROOT).as_posix() for folder in FOLDERS
                for p in (ROOT / folder).rglob("*")
                if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"]


def _in_wheel(path: str) -> str:
    top, _, rest = path.partition("/")
    return f"{FOLDERS[top]}/{rest}" if rest else FOLDERS[top]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    out = tmp_path_factory.mktemp("wheel")
    # with hatchling at hand (the dev extra) the build needs no download; else pip fetches it
    offline = ["--no-build-isolation"] if importlib.util.find_spec("hatchling") else []
    cmd = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", *offline, str(ROOT),
           "-w", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (built,) = out.glob("a2c-*.whl")
    with zipfile.ZipFile(built) as archive:
        yield archive


def test_every_subpackage_and_data_file_is_in_the_wheel(wheel):
    names = set(wheel.namelist())
    files = _checkout_files()
    packages = {Path(f).parent.as_posix() for f in files if f.endswith(".py")}
    assert {"a2c", "compiler", "runtime", "runtime/sandbox", "agents/reference", "agents/kit",
            "agents/scripted_driver", "analysis"} <= packages
    in_wheel = {Path(n).parent.as_posix() for n in names if n.endswith(".py")}
    missing_packages = sorted(p for p in packages if _in_wheel(p) not in in_wheel)
    assert not missing_packages, f"packages missing from the wheel: {missing_packages}"
    missing = sorted(f for f in files if _in_wheel(f) not in names)
    assert not missing, f"files missing from the wheel: {missing}"
    assert not [k for k in KEY_DATA if k not in names]


def test_the_wheel_holds_only_the_package(wheel):
    import a2c
    tops = {name.split("/", 1)[0] for name in wheel.namelist()}
    assert tops == {"a2c", f"a2c-{a2c.__version__}.dist-info"}, tops
    assert not [n for n in wheel.namelist() if n.endswith(".pyc") or "__pycache__" in n]
    entry_points = next(n for n in wheel.namelist() if n.endswith(".dist-info/entry_points.txt"))
    assert "a2c = a2c.cli:main" in wheel.read(entry_points).decode()


def test_the_unpacked_wheel_imports_and_finds_its_resources(wheel, tmp_path):
    """From the wheel alone (first on sys.path, run outside the checkout) a2c finds its
    templates, schemas and specs inside the package, and the spec schema loads."""
    wheel.extractall(tmp_path / "site")
    code = ("import a2c.paths as p, a2c.compiler.schema as s, a2c.cli; "
            "print(p.TEMPLATES_DIR, p.SCHEMAS_DIR, p.SPECS_DIR, a2c.cli.__file__, sep='\\n'); "
            "assert s.load_schema('task')")
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "site")}
    proc = subprocess.run([sys.executable, "-P", "-c", code], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    site = (tmp_path / "site").resolve()
    for line in proc.stdout.split():
        assert Path(line).resolve().is_relative_to(site / "a2c"), line
        assert Path(line).exists(), line


def test_the_editable_wheel_maps_every_source_folder(tmp_path):
    """`pip install -e .`: no copies, one import hook (hatch_build.py) that loads `a2c.compiler`
    from ./compiler and so on; checked in a bare interpreter (-S: no other hook around)."""
    pytest.importorskip("hatchling")
    from hatchling.builders.wheel import WheelBuilder
    (built,) = WheelBuilder(str(ROOT)).build(directory=str(tmp_path), versions=["editable"])
    with zipfile.ZipFile(built) as archive:
        names = archive.namelist()
        hook = archive.read("_a2c_editable.py").decode()
        assert archive.read("_a2c_editable.pth").decode().strip() == "import _a2c_editable"
        archive.extractall(tmp_path / "site")
    assert not [n for n in names if n.startswith("a2c/")]
    mapping = ast.literal_eval(re.search(r"^MAPPING = (.*)$", hook, re.MULTILINE)[1])
    assert mapping == {target.replace("/", "."): str(ROOT.resolve() / folder)
                       for folder, target in FOLDERS.items()}
    code = ("import importlib.util as u, _a2c_editable; "
            "print(*(u.find_spec(n).origin for n in _a2c_editable.MAPPING), sep='\\n')")
    proc = subprocess.run([sys.executable, "-S", "-P", "-c", code], cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(tmp_path / "site")},
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    origins = proc.stdout.split()
    assert origins == [str(Path(folder) / "__init__.py") for folder in mapping.values()]


@pytest.mark.skipif(os.environ.get("A2C_WHEEL_TEST") != "1",
                    reason="only in the wheel pass (nox -s wheel / .ci/run)")
def test_imports_come_from_the_installed_wheel():
    for name in FOLDERS.values():
        module = importlib.import_module(name.replace("/", "."))
        for entry in module.__path__:
            assert not Path(entry).resolve().is_relative_to(ROOT.resolve()), (name, entry)
