"""Issue 31: what `a2c run` and `a2c demo` print. Nothing wraps mid-word: off a terminal
(`a2c demo | cat`) every line is written whole, on an 80-column terminal the summary is plain
lines wrapped at spaces when its table would not fit; and after the demo's summary the next
commands, with the run's own directory."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys

from rich.console import Console

from a2c.cli import build_parser
from a2c.cli import run as run_cli
from a2c.cli.run import Progress, driver_line, next_steps, summary_rows
from a2c.contracts.run_summary import DriverUsage, RunSummary

RUN_DIR = "/home/someone/projects/a2c-checkout/runs/arith-claude-code-20261204-211959-743c"
RESULT = {"run_id": "arith-claude-code-20261204-211959-743c", "task": "arith",
          "agent": "claude-code", "mode": "free", "isolation": "bubblewrap",
          "baseline_score": 0.0, "best_score": 63.0, "final_score": 63.0, "submissions": 1,
          "valid_submissions": 1, "status": "finished", "run_dir": RUN_DIR,
          "driver": "scripted:sft-recipe",
          "driver_usage": {"calls": 6, "tokens": 166050, "input_tokens": 10000,
                           "output_tokens": 2050, "cache_read_tokens": 154000,
                           "cost_usd": 0.0123, "errors": 1, "exhausted": None}}
LONG = ("a2c demo: task arith (two-digit addition, '#### N' answers), agent ref-sft, base model "
        "SmolLM2-135M-Instruct, local backend, budget 4m")


def _printed(terminal: bool, width: int, result=RESULT) -> str:
    buf = io.StringIO()
    progress = Progress(Console(file=buf, force_terminal=terminal, width=width, highlight=False,
                                color_system=None))
    progress(LONG)
    progress.summary(RunSummary.from_dict(result))
    return buf.getvalue()


def _words(text: str) -> set[str]:
    return set(text.split())


def test_off_a_terminal_every_line_is_whole():
    out = _printed(terminal=False, width=80)
    lines = out.splitlines()
    assert lines[0].endswith(LONG)             # the progress line, not wrapped at 80
    assert any(line.split() == ["record", RUN_DIR] for line in lines), out
    driver = driver_line(RESULT["driver"], DriverUsage.from_dict(RESULT["driver_usage"]))
    assert any(line.strip() == f"driver          {driver}" for line in lines), out
    assert "│" not in out and "…" not in out


def test_an_80_column_terminal_wraps_at_spaces_only():
    out = _printed(terminal=True, width=80)
    assert "…" not in out
    known = _words(LONG) | _words(f"a2c run {RESULT['run_id']}")
    for key, value in summary_rows(RunSummary.from_dict(RESULT)):
        known |= _words(f"{key} {value}")
    for line in out.splitlines():
        # every word printed is a whole word of what was said (none cut in two)
        for word in line.split():
            assert word in known or re.fullmatch(r"\d+\.\ds", word), (word, line)
        assert len(line) <= 80 or line.split()[-1] == RUN_DIR, line
    assert RUN_DIR in out.split()          # the path whole, on one line
    text = " ".join(out.split())
    assert driver_line(RESULT["driver"], DriverUsage.from_dict(RESULT["driver_usage"])) in text
    assert LONG in text


def test_a_wide_terminal_gets_the_table():
    out = _printed(terminal=True, width=200)
    assert "│ record" in out and RUN_DIR in out and "…" not in out


def test_piped_output_of_the_real_console_is_not_wrapped(tmp_path):
    """Progress with its default console, stdout a pipe (`a2c demo | cat`), COLUMNS unset."""
    code = ("import json, sys; from a2c.cli.run import Progress; "
            "from a2c.contracts.run_summary import RunSummary; p = Progress(); "
            f"p({LONG!r}); p.summary(RunSummary.from_dict(json.loads(sys.argv[1])))")
    env = {k: v for k, v in __import__("os").environ.items() if k not in ("COLUMNS", "LINES")}
    out = subprocess.run([sys.executable, "-c", code, json.dumps(RESULT)], capture_output=True,
                         text=True, env=env, check=True).stdout
    lines = out.splitlines()
    assert lines[0].endswith(LONG), out
    assert any(line.split() == ["record", RUN_DIR] for line in lines), out
    assert "\x1b[" not in out


def test_demo_prints_the_next_steps_with_its_run_dir(monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setattr(run_cli, "prepare_from_refs", lambda opts, progress: object())
    from a2c.runtime import run as run_mod
    result = {**RESULT, "agent": "ref-sft"}
    result.pop("driver"), result.pop("driver_usage")
    monkeypatch.setattr(run_mod, "execute", lambda ctx, report: result)
    monkeypatch.setattr(run_cli, "a2c_command", lambda: ".venv/bin/a2c")
    assert run_cli.handle_demo(build_parser().parse_args(["demo"])) == 0
    out = capsys.readouterr().out
    lines = [line.strip() for line in out.splitlines()]
    after = lines[next(i for i, line in enumerate(lines) if line.startswith("next steps"))
                  :]
    assert f".venv/bin/a2c verify {RUN_DIR}" in after
    assert f".venv/bin/a2c report {RUN_DIR}" in after
    assert ".venv/bin/a2c run arith --agent claude-code --driver scripted:sft-recipe " \
           "--budget 10m" in after
    assert ".venv/bin/a2c leaderboard /home/someone/projects/a2c-checkout/runs" in after
    assert ".venv/bin/a2c new task capitals" in after
    # after the summary and the closing line
    assert out.index("demo finished in") < out.index("next steps")
    assert out.index(f"record          {RUN_DIR}") < out.index("next steps")


def test_next_steps_quote_a_path_with_spaces():
    steps = next_steps("/tmp/my runs/r1", "a2c")
    assert "  a2c verify '/tmp/my runs/r1'" in steps
    assert "  a2c leaderboard '/tmp/my runs'" in steps


def test_a2c_command_names_the_program_as_started(monkeypatch, tmp_path):
    exe = tmp_path / "venv" / "bin" / "a2c"
    exe.parent.mkdir(parents=True)
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    monkeypatch.setattr(sys, "argv", [".venv/bin/a2c", "demo"])
    monkeypatch.setenv("PATH", "/nonexistent")
    assert run_cli.a2c_command() == ".venv/bin/a2c"
    monkeypatch.setattr(sys, "argv", [str(exe), "demo"])
    monkeypatch.setenv("PATH", str(exe.parent))
    assert run_cli.a2c_command() == "a2c"
    monkeypatch.setattr(sys, "argv", ["/x/a2c/__main__.py"])
    assert run_cli.a2c_command() == "a2c"
