"""Budget arithmetic: durations, warnings at 50% and 90%, the deadline once."""

from __future__ import annotations

import pytest

from a2c.errors import A2CError
from a2c.runtime.budget import BudgetGuard, format_duration, parse_duration


@pytest.mark.parametrize("text,seconds", [("90", 90), ("90s", 90), ("15m", 900),
                                          ("1h30m", 5400), ("2.5h", 9000), (45, 45),
                                          ("1d", 86400)])
def test_parse_duration(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("bad", ["", "abc", "10x", "-5", "0", "5m3"])
def test_parse_duration_rejects(bad):
    with pytest.raises(A2CError):
        parse_duration(bad)


def test_format_duration():
    assert format_duration(5) == "5s"
    assert format_duration(125) == "2m05s"
    assert format_duration(3725) == "1h02m05s"


def test_guard_warns_then_deadline_once():
    guard = BudgetGuard(started_at=1000.0, wall_clock_s=100.0)
    assert guard.tick(1010) == []
    events = guard.tick(1051)
    assert [e[0] for e in events] == ["budget_warning"] and events[0][1]["fraction"] == 0.5
    assert guard.tick(1060) == []
    assert [e[1]["fraction"] for e in guard.tick(1095)] == [0.9]
    assert guard.remaining(1095) == 5
    assert [e[0] for e in guard.tick(1100)] == ["deadline_reached"]
    assert guard.tick(1200) == [] and guard.expired(1200)


def test_guard_jump_past_everything():
    guard = BudgetGuard(started_at=0.0, wall_clock_s=10.0)
    assert [e[0] for e in guard.tick(50)] == ["budget_warning", "budget_warning",
                                              "deadline_reached"]
