"""a2c/settings.py is the one list of `A2C_*` variables: the docs table is generated from it, the
source names none it lacks, it lists none the source has dropped, and values parse or fail clearly."""

from __future__ import annotations

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
