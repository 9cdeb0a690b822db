"""The compiler reads durations and modes the way the runtime does: one grammar, one list."""

from __future__ import annotations

import re

import pytest

from a2c.compiler import build, resolve
from a2c.compiler.load import load_spec
from a2c.compiler.schema import load_schema
from a2c.durations import SCHEMA_PATTERN, parse_duration
from a2c.modes import MODE_TITLES, MODES


@pytest.mark.parametrize("kind", ["task", "agent", "suite"])
def test_schema_duration_pattern_is_the_shared_grammar(kind):
    assert load_schema(kind)["$defs"]["duration"]["pattern"] == SCHEMA_PATTERN


@pytest.mark.parametrize("text", ["12h", "30m", "90s", "1h30m", "1.5h", "2.5m", "1d", "0s",
                                  "1d2h3m4s"])
def test_schema_pattern_and_parser_agree(text):
    assert re.search(SCHEMA_PATTERN, text)
    assert resolve.seconds(text) == parse_duration(text, allow_zero=True)


@pytest.mark.parametrize("text", ["", "h", "1x", "90 minutes", "1m2h", "-5s"])
def test_schema_pattern_rejects_what_the_parser_rejects(text):
    assert not re.search(SCHEMA_PATTERN, text)


def test_one_and_a_half_hours_is_a_duration(specs):
    spec = specs / "tasks" / "tiny.yaml"
    spec.write_text(spec.read_text().replace("wall_clock: 1h30m", "wall_clock: 1.5h"))
    assert load_spec(spec)["budget"]["wall_clock_s"] == 5400


def test_modes_come_from_a2c_modes():
    assert resolve.DEFAULT_MODES == list(MODES)
    assert build.MODE_TITLES == MODE_TITLES
    assert load_schema("task")["properties"]["modes"]["items"]["enum"] == list(MODES)
    assert load_schema("suite")["properties"]["modes"]["items"]["enum"] == list(MODES)
