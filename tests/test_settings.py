"""a2c/settings.py is the one list of `A2C_*` variables: the docs table is generated from it, the
source names none it lacks, it lists none the source has dropped, and values parse or fail clearly."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from a2c import settings, settings_doc
from a2c.errors import A2CError

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ("a2c", "compiler", "runtime", "agents", "analysis", "templates", "scripts", "benchmarks",
          "noxfile.py")
USES = SOURCE + ("specs",)          # a spec may expand an operator variable ($A2C_DATA_HOME)
# literals in tests/ that are data, not variables: a training-script fixture's constant, a planted
# secret, this file's undeclared example
NOT_VARIABLES = {"A2C_LR", "A2C_SECRET_TEST", "A2C_NOT_A_THING"}
NAME = re.compile(r"(?<![A-Za-z0-9_])A2C_[A-Z0-9_]+")
SUFFIXES = {".py", ".j2", ".sh", ".json", ".yaml", ".yml", ".md", ".txt", ".toml", ""}


def _files(roots):
    for root in roots:
        path = ROOT / root
        if path.is_file():
            yield path
            continue
        for file in path.rglob("*"):
            if (file.is_file() and "__pycache__" not in file.parts and file.suffix in SUFFIXES
                    and file != ROOT / "a2c" / "settings.py"):
                yield file


def _names(roots) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for file in _files(roots):
        try:
            text = file.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for name in NAME.findall(text):
            found.setdefault(name, set()).add(str(file.relative_to(ROOT)))
    return found


def _declared(name: str) -> bool:
    if name.endswith("_"):              # a prefix the code builds names from (A2C_DRIVER_{x}_…)
        return any(s.literal.startswith(name) or s.name.startswith(name)
                   or (s.is_pattern and name.startswith(s.literal)) for s in settings.SETTINGS)
    try:
        settings.lookup(name)
    except KeyError:
        return False
    return True


def test_docs_table_is_generated():
    current = (ROOT / "docs" / "settings.md").read_text(encoding="utf-8")
    assert current == settings_doc.markdown(), \
        "docs/settings.md is stale: python -m a2c.settings_doc --write"


def test_every_name_in_the_source_is_declared():
    missing = {name: sorted(files) for name, files in _names(SOURCE).items()
               if not _declared(name)}
    assert not missing, f"declare these in a2c/settings.py: {missing}"


def test_every_variable_the_tests_read_is_declared():
    missing = {name: sorted(files) for name, files in _names(("tests",)).items()
               if name not in NOT_VARIABLES and not _declared(name)}
    assert not missing, f"declare these test switches in a2c/settings.py: {missing}"


def test_no_declared_name_is_stale():
    # a test switch may live in tests/ only; anything else must be used by the project itself
    in_project, in_tests = _names(USES), _names(("tests",))

    def in_use(s: settings.Setting) -> bool:
        used = {**in_project, **in_tests} if s.audience == settings.Audience.TEST else in_project
        if s.is_pattern:
            return any(s.regex().match(name) for name in used) or s.literal in used
        return s.name in used or bool(s.family and s.family in used)

    stale = [s.name for s in settings.SETTINGS if not in_use(s)]
    assert not stale, f"used nowhere (remove from a2c/settings.py): {stale}"


def test_values_parse_by_type():
    env = {"A2C_SNAPSHOT_EVERY_S": "30", "A2C_HUB_DOWNLOAD": "yes", "A2C_CACHE": "~/c",
           "A2C_EVAL_PASS_ENV": "A, B,,", "A2C_EVAL_UID": "70000"}
    assert settings.get("A2C_SNAPSHOT_EVERY_S", env) == 30.0
    assert settings.get_bool("A2C_HUB_DOWNLOAD", env) is True
    assert settings.get_path("A2C_CACHE", env) == Path("~/c").expanduser()
    assert settings.get("A2C_EVAL_PASS_ENV", env) == ["A", "B"]
    assert settings.get("A2C_EVAL_UID", env) == 70000


def test_unset_or_empty_means_the_default():
    assert settings.get("A2C_SNAPSHOT_EVERY_S", {}) == 180.0
    assert settings.get("A2C_SNAPSHOT_EVERY_S", {"A2C_SNAPSHOT_EVERY_S": " "}) == 180.0
    assert settings.get_bool("A2C_HUB_DOWNLOAD", {}) is False
    assert settings.get("A2C_CACHE", {}) == "~/.cache/a2c"
    assert settings.get("A2C_PROJECT_ROOT", {}) is None     # computed by the caller


def test_reads_at_call_time(monkeypatch):
    monkeypatch.setenv("A2C_SNAPSHOT_EVERY_S", "5")
    assert settings.get("A2C_SNAPSHOT_EVERY_S") == 5.0
    monkeypatch.setenv("A2C_SNAPSHOT_EVERY_S", "7")
    assert settings.get("A2C_SNAPSHOT_EVERY_S") == 7.0


@pytest.mark.parametrize("name, raw, words", [
    ("A2C_SNAPSHOT_EVERY_S", "often", "not a valid float"),
    ("A2C_EVAL_UID", "1.5", "not a valid int"),
    ("A2C_HUB_DOWNLOAD", "maybe", "not a valid bool"),
])
def test_a_bad_value_is_one_clear_error(name, raw, words):
    with pytest.raises(A2CError, match=rf"^{name}='{raw}': {words}"):
        settings.get(name, {name: raw})


def test_an_undeclared_name_is_refused():
    with pytest.raises(KeyError, match="not a declared a2c setting"):
        settings.get("A2C_NOT_A_THING", {})


def test_patterns_match_their_family():
    assert settings.lookup("A2C_SERVICE_URL_WEBSHOP").name == "A2C_SERVICE_URL_<NAME>"
    assert settings.lookup("A2C_DRIVER_OPENAI_WIRES").name == "A2C_DRIVER_<PROVIDER>_WIRES"


def test_every_audience_has_a_title_and_every_setting_a_doc():
    assert set(settings_doc.TITLES) == set(settings.Audience)
    assert all(s.doc.strip() and s.where.strip() for s in settings.SETTINGS)


# Where an `A2C_*` variable may still be read straight from the environment, and why. Everything
# else reads it through a2c/settings.py (`get`, `get_path`, `get_bool`), which parses it by its
# declared type. The agent kit runs inside the sandbox against the runtime -> agent interface.
DIRECT_READS_ALLOWED = {
    "agents/kit/": "the agent kit, inside the sandbox: it reads the interface the runtime wrote",
}
ENVIRON_METHODS = {"get", "pop", "__getitem__", "__contains__"}


def _constants(tree: ast.Module) -> dict[str, str]:
    """A module's top-level string constants (`UID_VAR = "A2C_AGENT_UID"`, tuples too)."""
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Assign):
            for target in node.targets:
                names = target.elts if isinstance(target, ast.Tuple) else [target]
                values = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
                for name, value in zip(names, values):
                    if isinstance(name, ast.Name) and isinstance(value, ast.Constant) \
                            and isinstance(value.value, str):
                        out[name.id] = value.value
    return out


def _names_a2c_variable(key: ast.AST, constants: dict[str, str]) -> bool:
    """Whether an environment key is an `A2C_*` name: a literal, an f-string or a sum starting
    with one, or a module constant holding one."""
    if isinstance(key, ast.Constant):
        return isinstance(key.value, str) and key.value.startswith("A2C_")
    if isinstance(key, ast.JoinedStr):
        return bool(key.values) and _names_a2c_variable(key.values[0], constants)
    if isinstance(key, ast.BinOp):
        return _names_a2c_variable(key.left, constants)
    if isinstance(key, ast.Name):
        return constants.get(key.id, "").startswith("A2C_")
    return False


def _is_environ(node: ast.AST) -> bool:
    """`os.environ`, or a mapping named `environ` (a function's environment parameter)."""
    return (isinstance(node, ast.Attribute) and node.attr == "environ"
            and isinstance(node.value, ast.Name) and node.value.id == "os") or \
        (isinstance(node, ast.Name) and node.id == "environ")


def direct_reads(source: str) -> list[int]:
    """The lines of `source` that read an `A2C_*` variable from the environment directly:
    `os.environ.get/pop(NAME)`, `os.environ[NAME]` (read), `NAME in os.environ`,
    `os.getenv(NAME)` (or the same on a mapping named `environ`)."""
    tree = ast.parse(source)
    constants = _constants(tree)
    lines = []
    for node in ast.walk(tree):
        key = None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
            if node.func.attr in ENVIRON_METHODS and _is_environ(node.func.value):
                key = node.args[0]
            elif node.func.attr == "getenv" and isinstance(node.func.value, ast.Name) \
                    and node.func.value.id == "os":
                key = node.args[0]
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) \
                and _is_environ(node.value):
            key = node.slice
        elif isinstance(node, ast.Compare) and len(node.ops) == 1 \
                and isinstance(node.ops[0], (ast.In, ast.NotIn)) and _is_environ(node.comparators[0]):
            key = node.left
        if key is not None and _names_a2c_variable(key, constants):
            lines.append(node.lineno)
    return sorted(set(lines))


def test_a2c_variables_are_read_through_settings():
    """No module of the packages reads an `A2C_*` variable from the environment itself (issue
    33): each is declared once in a2c/settings.py with its type, default and doc, and read there.
    Setting one (the runtime writing a child's environment) is not a read. Not caught: a name
    computed in a local variable (the A2C_DRIVER_<PROVIDER>_* family that the gateway's config
    discovers by listing the environment, runtime/driver_gateway/config.py `providers`)."""
    found = []
    for root in ("a2c", "compiler", "runtime", "agents", "analysis"):
        for path in sorted((ROOT / root).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel == "a2c/settings.py" or any(rel.startswith(p) for p in DIRECT_READS_ALLOWED):
                continue
            found += [f"{rel}:{line}" for line in direct_reads(path.read_text(encoding="utf-8"))]
    assert not found, ("read these through a2c.settings (get, get_path, get_bool), declared in "
                       f"a2c/settings.py: {found}")


def test_direct_reads_are_found():
    # toy names spelled "@_..." so that this file names no undeclared variable
    source = ('import os\nVAR = "@_X"\nos.environ.get("@_A")\nos.environ["@_B"]\n'
              'os.environ.get(VAR, "")\n"@_C" in os.environ\nos.getenv(f"@_{1}")\n'
              'os.environ["@_D"] = "1"\nos.environ.get("HOME")\nenviron.get(VAR)\n'
              ).replace("@", "A2C")
    assert direct_reads(source) == [3, 4, 5, 6, 7, 10]
