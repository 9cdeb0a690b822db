"""A new user's first commands (issue 25): `validate --all` as the README says, the project's own
driver script validated, every bad duration an input error (exit 2), listings that never cut an
id at 80 columns."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from test_errors import problems

from a2c.paths import project_root


def test_validate_all_checks_specs_and_driver_scripts(run_cli):
    code, out, err = run_cli("validate", "--all")
    assert code == 0, err
    assert "ok  task   arith" in out and "sft-recipe" in out
    assert run_cli("validate")[1] == out           # the default without a path


def test_validate_accepts_the_projects_driver_script(run_cli):
    code, out, err = run_cli("validate", project_root() / "specs" / "drivers" / "sft-recipe.yaml")
    assert code == 0, err
    assert "driver" in out and "sft-recipe" in out


def test_a_bad_driver_script_is_an_input_error_with_its_place(run_cli, tmp_path):
    bad = tmp_path / "mine.yaml"
    bad.write_text("apiVersion: a2c/v1\nkind: DriverScript\nid: mine\nturns:\n  - bogus: 1\n")
    code, out, err = run_cli("validate", bad, "arith")
    assert code == 2 and "Traceback" not in err
    found = problems(err)
    assert found[0]["file"] == str(bad) and found[0]["line"] == "5"
    assert found[0]["path"].startswith("turns[0]")


@pytest.mark.parametrize("argv", [
    ["run", "arith", "--agent", "ref-sft", "--budget", "10x"],
    ["run", "arith", "--agent", "ref-sft", "--budget=-5m"],
    ["check", "arith", "--agent", "ref-sft", "--budget", "soon"],
])
def test_a_bad_duration_exits_2_like_every_input_error(run_cli, argv, tmp_path):
    code, _out, err = run_cli(*argv, "--runs-dir", tmp_path / "runs")
    assert code == 2, err
    assert "duration" in err and "Traceback" not in err
    assert not (tmp_path / "runs").exists()


def _at_80_columns(*args: str) -> str:
    env = {**os.environ, "COLUMNS": "80", "TERM": "dumb"}
    env.pop("NO_COLOR", None)
    proc = subprocess.run([sys.executable, "-m", "a2c.cli", *args], capture_output=True,
                          text=True, env=env, cwd=project_root(), timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_list_never_cuts_an_id_at_80_columns():
    out = _at_80_columns("list")
    assert "…" not in out
    assert max(len(line) for line in out.splitlines()) <= 80
    for task_id in ("alfworld-strict", "alpacaeval-strict", "textquest-short",
                    "deepsearchqa-strict"):
        assert f" {task_id} " in out, task_id
    assert " pairwise_judge " in out


def test_agents_list_never_cuts_an_id_at_80_columns():
    out = _at_80_columns("agents", "list")
    assert "…" not in out
    assert max(len(line) for line in out.splitlines()) <= 80
    assert " mini-swe-agent " in out and " anthropic/claude-sonnet-4-5 " in out


# ------------------------------------------------------------------ issue 31: answer styles

STYLES = {   # --answer: (grader kind, a line of the spec, the check's gold-answer line)
    "number": ("exact_match", "normalize: number",
               "PASS (1) gold answers: 100.0 on 2 held-out and 3 agent records written as "
               "'#### {answer}' (e.g. '#### 15')"),
    "string": ("exact_match", "normalize: text",
               "PASS (1) gold answers: 100.0 on 2 held-out and 3 agent records written as "
               "'Answer: {answer}' (e.g. 'Answer: Rome')"),
    "choice": ("exact_match", "fallback: none",
               "PASS (1) gold answers: 100.0 on 2 held-out and 3 agent records written as "
               "'Answer: {answer}' (e.g. 'Answer: B')"),
    "code": ("humaneval", "chat_template: false",
             "PASS (1) gold answers: the canonical solutions pass their tests: 100.0 on 2 "
             "problems"),
}


@pytest.mark.parametrize("answer", sorted(STYLES))
def test_new_task_per_answer_style_validates_builds_and_its_gold_answers_score_100(
        run_cli, tmp_path, answer):
    from a2c.contracts.bundle import Bundle
    kind, spec_line, gold_line = STYLES[answer]
    specs, out = tmp_path / "specs", tmp_path / "gen"
    code, stdout, err = run_cli("new", "task", f"t-{answer}", "--answer", answer,
                                "--specs", specs, "-o", out)
    assert code == 0, err
    spec = specs / "tasks" / f"t-{answer}.yaml"
    text = spec.read_text()
    assert spec_line in text and f"--answer {answer}" in text
    assert "data/t-" + answer + "/make_data.py" in text      # where a data script goes
    assert Bundle.load(out / f"t-{answer}").task.grader.kind == kind
    code, stdout, err = run_cli("validate", spec)
    assert code == 0 and f"ok  task   t-{answer}" in stdout, err
    code, stdout, err = run_cli("check", spec, "--no-baseline")
    assert code == 0, stdout + err
    assert gold_line in stdout.splitlines()
    assert [ln for ln in stdout.splitlines() if ln.startswith("PASS (2)")] != []
    assert "FAIL" not in stdout
    if answer != "number":   # a non-number task speaks no number
        assert "last_number" not in text and "normalize: number" not in text \
            and "####" not in text


def test_new_task_default_answer_is_number_and_styles_are_level_1(run_cli, tmp_path):
    specs = tmp_path / "specs"
    assert run_cli("new", "task", "plain", "--specs", specs, "--no-build")[0] == 0
    assert "normalize: number" in (specs / "tasks" / "plain.yaml").read_text()
    code, _out, err = run_cli("new", "task", "judged", "--level", "2", "--answer", "string",
                              "--specs", specs, "--no-build")
    assert code == 1 and "answer styles are for level 1" in err
    assert not (specs / "tasks" / "judged.yaml").exists()
    with pytest.raises(SystemExit):
        run_cli("new", "task", "odd", "--answer", "essay", "--specs", specs)
    assert not (specs / "tasks" / "odd.yaml").exists()
