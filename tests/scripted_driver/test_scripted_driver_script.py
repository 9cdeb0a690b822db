"""The script language: the shipped scripts load, and a malformed script is refused with the
file:line:col, the field, and what is wrong."""

from __future__ import annotations

import json

import jsonschema
import pytest

from a2c import paths
from a2c.agents.scripted_driver import ScriptError, load, parse, shipped

HEAD = "apiVersion: a2c/v1\nkind: DriverScript\nid: bad\n"


def _error(text: str) -> str:
    with pytest.raises(ScriptError) as info:
        parse(text, "bad.yaml")
    return str(info.value)


def test_the_schema_is_valid_draft_2020_12():
    schema = json.loads((paths.SCHEMAS_DIR / "driver-script.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["$schema"].endswith("2020-12/schema")


@pytest.mark.parametrize("path", sorted((paths.SPECS_DIR / "drivers").glob("*.yaml")),
                         ids=lambda p: p.stem)
def test_shipped_scripts_load_and_are_named_after_their_file(path):
    script = load(path)
    assert script.id == path.stem
    assert script.turns[-1].kind == "say"


def test_sft_recipe_shape():
    script = load(shipped("sft-recipe"))
    kinds = [t.kind for t in script.turns]
    assert kinds[1] == "write" and script.turns[1].path == "train_sft.py"
    polls = [t for t in script.turns if t.until is not None]
    assert polls and all(t.timeout and t.timeout <= 60 for t in polls)
    submit = next(t for t in script.turns if "./submit output/model" in t.command)
    assert "--wait" in submit.command
    compile(script.turns[1].content, "train_sft.py", "exec")    # the trainer is valid Python


def test_shipped_resolves_names_and_paths(tmp_path):
    assert shipped("sft-recipe") == paths.SPECS_DIR / "drivers" / "sft-recipe.yaml"
    assert str(shipped(str(tmp_path / "x.yaml"))) == str(tmp_path / "x.yaml")


def test_turn_with_two_actions_names_the_turn_and_its_line():
    message = _error(HEAD + "turns:\n  - run: ls\n  - run: ls\n    say: hi\n")
    assert message.startswith("bad.yaml:6:5: turns[1]: a turn needs exactly one of run, write, "
                              "say (found run, say)"), message


def test_turn_with_no_action():
    assert "turns[0]: a turn needs exactly one of run, write, say (found none)" in \
        _error(HEAD + "turns:\n  - usage: {input_tokens: 1}\n")


def test_unknown_field_and_wrong_type_point_at_the_value():
    message = _error(HEAD + "turns:\n  - run: ls\n    timeout: soon\n    colour: red\n")
    assert "bad.yaml:6:14: turns[0].timeout: 'soon' is not of type 'number'" in message
    assert "bad.yaml:5:5: turns[0]: unknown field(s); not allowed ('colour' was unexpected)" \
        in message


def test_negative_usage_and_until_without_run():
    message = _error(HEAD + "turns:\n  - say: x\n    until: y\n    usage: {output_tokens: -3}\n")
    assert "turns[0].usage.output_tokens: -3 is less than the minimum of 0" in message
    assert "turns[0]: 'run' is a dependency of 'until'" in message


def test_bad_regular_expression_in_until():
    message = _error(HEAD + "turns:\n  - run: ls\n    until: '(unclosed'\n")
    assert message.startswith("bad.yaml:6:12: turns[0].until: not a valid regular expression")


def test_missing_top_level_fields_and_wrong_kind():
    message = _error("apiVersion: a2c/v1\nkind: Task\n")
    assert "bad.yaml:1:1: (script): 'id' is a required property" in message
    assert "bad.yaml:2:7: kind: 'DriverScript' was expected" in message


def test_duplicate_keys_and_yaml_syntax_errors_have_positions():
    assert "bad.yaml:6:5: turns[0].run: duplicate key 'run'" in \
        _error(HEAD + "turns:\n  - run: a\n    run: b\n")
    assert _error(HEAD + "turns: [\n").startswith("bad.yaml:5:1: malformed YAML")
    assert "the script is empty" in _error("# nothing\n")


def test_python_tags_are_refused():
    assert "YAML tag" in _error(HEAD + "turns:\n  - run: !!python/name:os.system ls\n")


def test_load_reports_unreadable_files(tmp_path):
    with pytest.raises(ScriptError, match="cannot read the script"):
        load(tmp_path / "missing.yaml")
    (tmp_path / "latin.yaml").write_bytes(b"id: caf\xe9\n")
    with pytest.raises(ScriptError, match="not valid UTF-8"):
        load(tmp_path / "latin.yaml")


def test_usage_defaults_cascade():
    script = parse(HEAD + "usage: {input_tokens: 5}\nturns:\n  - run: a\n"
                   "  - run: b\n    usage: {output_tokens: 2}\n  - say: c\n")
    assert [t.usage.as_dict() for t in script.turns] == [
        {"input_tokens": 5, "output_tokens": 0, "cache_read_tokens": 0},
        {"input_tokens": 0, "output_tokens": 2, "cache_read_tokens": 0},
        {"input_tokens": 5, "output_tokens": 0, "cache_read_tokens": 0}]
    assert script.side_usage.as_dict() == {"input_tokens": 0, "output_tokens": 0,
                                           "cache_read_tokens": 0}


def test_an_until_pattern_the_command_itself_matches_is_refused():
    text = ("apiVersion: a2c/v1\nkind: DriverScript\nid: s\nturns:\n"
            "  - run: cat status || echo NOT_DONE\n    until: DONE\n  - say: end\n")
    with pytest.raises(ScriptError, match=r"s.yaml:6:12: turns\[0\].until: the pattern matches "
                                          r"the command itself"):
        parse(text, "s.yaml")
    parse(text.replace("echo NOT_DONE", 'echo "NOT_DO""NE"'), "s.yaml")
