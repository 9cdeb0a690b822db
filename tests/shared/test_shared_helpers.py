"""The helpers every area shares: one duration grammar, one timestamp form, one atomic writer."""

from __future__ import annotations

import os
import re
import stat

import pytest

from a2c.durations import SCHEMA_PATTERN, DurationError, format_duration, parse_duration
from a2c.errors import A2CError
from a2c.fsutil import append_durable, read_tail, write_json_atomic, write_text_atomic
from a2c.timefmt import iso_utc, parse_time


@pytest.mark.parametrize("text,seconds", [("90", 90), ("90s", 90), ("15m", 900), ("12h", 43200),
                                          ("1h30m", 5400), ("2.5h", 9000), (45, 45), (2.5, 2.5),
                                          ("1d", 86400), ("1d2h", 93600)])
def test_parse_duration(text, seconds):
    assert parse_duration(text) == seconds


def test_whole_durations_are_ints_so_bundles_keep_their_bytes():
    assert isinstance(parse_duration("12h"), int) and isinstance(parse_duration("0.5h"), int)
    assert isinstance(parse_duration("1.5s"), float)


@pytest.mark.parametrize("bad", ["", "abc", "10x", "-5", "0", "5m3", "30m1h", "h", True, "1hh"])
def test_parse_duration_rejects(bad):
    with pytest.raises(DurationError) as err:
        parse_duration(bad)
    assert isinstance(err.value, A2CError) and isinstance(err.value, ValueError)


def test_zero_only_where_allowed():
    assert parse_duration("0s", allow_zero=True) == 0
    with pytest.raises(DurationError):
        parse_duration("0s")


@pytest.mark.parametrize("text", ["12h", "1h30m", "2.5h", "1d", "90s", "0s"])
def test_schema_pattern_accepts_what_the_parser_reads(text):
    assert re.match(SCHEMA_PATTERN, text)


@pytest.mark.parametrize("text", ["30m1h", "h", "", "1.h", "-1s"])
def test_schema_pattern_refuses_what_the_parser_refuses(text):
    assert not re.match(SCHEMA_PATTERN, text)


def test_format_duration():
    assert (format_duration(5), format_duration(125), format_duration(3725)) == \
        ("5s", "2m05s", "1h02m05s")


def test_iso_round_trip():
    ts = 1796126400.123
    assert iso_utc(ts) == "2026-12-01T12:00:00.123Z"
    assert abs(parse_time(iso_utc(ts)) - ts) < 1e-3
    assert parse_time("2026-12-01T12:00:00") == parse_time("2026-12-01T12:00:00Z")
    assert parse_time(None) is None and parse_time("nonsense") is None and iso_utc(None) is None


def test_atomic_json_mode_and_forms(tmp_path):
    path = write_json_atomic(tmp_path / "sub" / "a.json", {"b": 1, "a": [1]}, mode=0o600)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert path.read_text() == '{\n  "a": [\n    1\n  ],\n  "b": 1\n}\n'
    write_json_atomic(path, {"b": 1, "a": "é"}, canonical=True)
    assert path.read_bytes() == '{"a":"é","b":1}\n'.encode()
    assert [p.name for p in path.parent.iterdir()] == ["a.json"]  # no temporary left behind


def test_atomic_write_failure_leaves_old_file(tmp_path):
    path = write_text_atomic(tmp_path / "t.txt", "old")
    with pytest.raises(TypeError):
        write_json_atomic(path, {"x": object()})
    assert path.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["t.txt"]


def test_append_and_tail(tmp_path):
    log = tmp_path / "j.jsonl"
    for n in range(3):
        append_durable(log, f"line {n}\n".encode())
    assert log.read_text().splitlines() == ["line 0", "line 1", "line 2"]
    assert read_tail(log, 7) == "line 2\n"
    assert read_tail(tmp_path / "missing") == "" and read_tail(None) == ""
