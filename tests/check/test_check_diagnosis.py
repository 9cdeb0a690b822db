"""`a2c check --agent`: point (5) says why a gain is missing or small, from the per-item results
the grader wrote, and the agent's run goes to the check's own folder (issue 31, points 2 and 4).

Fast: the agent's run is replaced by one whose results files the real exact_match grader writes
from chosen outputs (the model's outputs are the only thing not real here); the baseline point
is replaced too. Everything else — compiling the task and the agent, points (1)-(3), reading the
results, the interval, the words — is the command's own."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
from task_authoring import write_task

from a2c.cli import main
from a2c.runtime.check import diagnose
from a2c.runtime.check.diagnose import Outputs, verdict


def _outputs(style: str, n_correct: int = 0):
    """An output per held-out record (index i, gold word) for one scenario."""
    def write(i: int, gold: str) -> str:
        if style == "silent":                                   # the base model's
            return "I do not know."
        if style == "no-format":                                # the word, but not as asked
            return f"The word is {gold if i < n_correct else 'LUFESA'}"
        return f"Answer: {gold if i < n_correct else 'QQQQ'}"   # the format, n_correct right
    return write


@pytest.fixture
def fake_agent_run(monkeypatch):
    """Replace the agent's run and point (4)'s baseline; return what the fake saw."""
    from a2c.contracts.bundle import Bundle
    from a2c.runtime import run as run_mod
    from a2c.runtime.check import gate
    from a2c.runtime.data import load_splits
    from a2c.runtime.graders import get_grader

    seen: dict = {}

    def grade(root: Path, write) -> dict:
        task = Bundle.load(root).task
        held = load_splits(task, root)["heldout"]
        grader = get_grader(task.grader.to_dict())
        outputs = {str(r["id"]): [write(i, r["answer"])] for i, r in enumerate(held)}
        return grader.grade_predictions(outputs, held).to_dict()

    def baseline(report, task, bundle_root, grader_cfg, heldout, work):
        result = grade(bundle_root, _outputs("silent"))
        report.ok("(4) baseline:", f"{result['score']:.1f} (faked by the test)")
        from a2c.runtime.grader_service.baseline import BaselineSummary
        return BaselineSummary(score=result["score"], valid=True, result=result)

    def prepare(opts, report):
        seen["opts"] = opts
        run_dir = Path(opts.runs_dir) / "codewords-ref-sft-test"
        (run_dir / "results").mkdir(parents=True)
        (run_dir / "run.json").write_text("{}")         # what a leaderboard looks for
        return SimpleNamespace(run_dir=run_dir, run=SimpleNamespace(agent="ref-sft"),
                               bundle=Path(opts.bundle))

    def execute(ctx, report):
        results = ctx.run_dir / "results"
        (results / "baseline.json").write_text(
            json.dumps(grade(ctx.bundle, _outputs("silent"))))
        (results / "1.json").write_text(json.dumps(grade(ctx.bundle, seen["best"])))
        return {"run_dir": str(ctx.run_dir), "submissions": 1, "status": "finished"}

    monkeypatch.setattr(gate, "check_baseline", baseline)
    monkeypatch.setattr(run_mod, "prepare", prepare)
    monkeypatch.setattr(run_mod, "execute", execute)
    return seen


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A user's project folder (the current one, and A2C_PROJECT_ROOT) with nothing in it."""
    root = tmp_path / "project"
    root.mkdir()
    monkeypatch.setenv("A2C_PROJECT_ROOT", str(root))
    monkeypatch.chdir(root)
    return root


def _check(capsys, spec, *args):
    code = main(["check", str(spec), "--agent", "ref-sft", *map(str, args)])
    return code, capsys.readouterr().out


def _line(out: str, start: str) -> str:
    [line] = [ln for ln in out.splitlines() if ln.startswith(start)]
    return line


def test_format_learnt_but_not_the_skill_is_named(tmp_path, project, fake_agent_run, capsys):
    """The issue's case: 100 of 100 outputs in the answer format, none right. The check used to
    ask whether the agent writes the answer format."""
    fake_agent_run["best"] = _outputs("format")
    code, out = _check(capsys, write_task(tmp_path / "author"), "--budget", "12m")
    assert code == 1, out
    fail = _line(out, "FAIL (5) agent:")
    assert "format followed in 100 of 100 outputs, 0 correct" in fail
    assert "the outputs follow the format but are not right" in fail
    assert "the task is too hard for this agent and budget (12m)" in fail
    assert "does the reference agent write" not in out
    assert "(base model: format followed in 0 of 100 outputs, 0 correct)" in fail


def test_format_not_learnt_is_named(tmp_path, project, fake_agent_run, capsys):
    fake_agent_run["best"] = _outputs("no-format", n_correct=50)
    code, out = _check(capsys, write_task(tmp_path / "author"))
    assert code == 1, out
    fail = _line(out, "FAIL (5) agent:")
    assert "format followed in 0 of 100 outputs, 0 correct" in fail
    assert "the agent did not learn the answer format" in fail and "too hard" not in fail


def test_a_real_but_small_gain_passes_with_a_warning(tmp_path, project, fake_agent_run, capsys):
    fake_agent_run["best"] = _outputs("format", n_correct=6)
    code, out = _check(capsys, write_task(tmp_path / "author"), "--budget", "12m")
    assert code == 0, out
    warn = _line(out, "WARN (5) agent:")
    lo, hi = map(float, re.search(r"interval ([-+][\d.]+)\.\.([-+][\d.]+)\)", warn).groups())
    assert 0 < lo < 6 < hi
    assert "gain +6 (interval " in warn
    assert f"is real but small for 12m (under {diagnose.SMALL_GAIN:.0f} points): the task is " \
           "barely learnable at this budget; try a longer --budget" in warn
    assert "passed" in out.splitlines()[-1] and "1 warning(s)" in out.splitlines()[-1]
    assert "PASS (5)" not in out


def test_a_clear_gain_passes_and_the_run_is_kept_out_of_runs(tmp_path, project, fake_agent_run,
                                                             capsys):
    from a2c.analysis.leaderboard import find_runs
    fake_agent_run["best"] = _outputs("format", n_correct=40)
    code, out = _check(capsys, write_task(tmp_path / "author"))
    assert code == 0, out
    assert "gain +40.0 points" in _line(out, "PASS (5) agent:") and "WARN" not in out
    assert "     held-out outputs of the best model: format followed in 100 of 100 outputs, 40 " \
           "correct; base model: format followed in 0 of 100 outputs, 0 correct" in out
    # the run went to the check's own folder, named in the output, and nowhere else
    runs = project / ".a2c" / "check-runs"
    assert Path(fake_agent_run["opts"].runs_dir) == runs.resolve()
    assert (runs / "codewords-ref-sft-test" / "results" / "1.json").is_file()
    assert "record .a2c/check-runs/codewords-ref-sft-test (kept, in the check's own folder: " \
           "no leaderboard of runs/ counts it" in out
    assert not (project / "runs").exists()
    assert sorted(p.name for p in project.iterdir()) == [".a2c"]
    assert (project / ".a2c" / ".gitignore").read_text().splitlines()[-1] == "*"
    # a leaderboard over the project finds no run; over the check's folder it would
    assert find_runs(project) == [] and find_runs(runs) == [runs / "codewords-ref-sft-test"]


def test_runs_dir_still_puts_the_run_where_asked(tmp_path, project, fake_agent_run, capsys):
    fake_agent_run["best"] = _outputs("format", n_correct=40)
    code, out = _check(capsys, write_task(tmp_path / "author"), "--runs-dir", tmp_path / "mine")
    assert code == 0, out
    assert (tmp_path / "mine" / "codewords-ref-sft-test").is_dir()
    assert not (project / ".a2c").exists()


@pytest.mark.parametrize(("gain", "ci", "status", "words"), [
    (40.0, (30.0, 50.0), "pass", ""),
    (3.0, (1.0, 8.0), "warn", "gain +3 (interval +1..+8) is real but small for 12m"),
    (9.9, (0.5, 20.0), "warn", "gain +9.9 (interval +0.5..+20) is real but small"),
    (2.0, (-1.0, 5.0), "warn", "the interval includes 0"),
    (0.0, (0.0, 0.0), "fail", "did not learn the answer format"),
])
def test_verdict_words(gain, ci, status, words):
    best, base = Outputs(100, 3, 0), Outputs(100, 0, 0)
    said = verdict(gain, ci, "12m", best, base)
    assert said.status == status and words in said.why


def test_verdict_without_an_answer_format_speaks_of_correct_answers_only():
    said = verdict(0.0, (0.0, 0.0), "7m", Outputs(12, None, 0), Outputs(12, None, 0))
    assert said.status == "fail"
    assert said.why.startswith("0 of 12 correct (base model: 0 of 12 correct): the task is "
                               "too hard for this agent and budget (7m)")


def test_format_counts_per_grader():
    exact = {"items": [{"extraction": "pattern", "correct": True},
                       {"extraction": "last_number", "correct": True},
                       {"extraction": "none", "correct": False}]}
    assert diagnose.count(exact, "exact_match") == Outputs(3, 1, 2)
    code = {"items": [{"output": "    return 1", "error": "failed: AssertionError",
                       "correct": False},
                      {"output": "  return (", "error": "failed: SyntaxError: '(' was never "
                       "closed", "correct": False},
                      {"output": "    return 2", "error": None, "correct": True}]}
    assert diagnose.count(code, "humaneval") == Outputs(3, 2, 1)
    assert diagnose.count({"items": [{"correct": True}]}, "rollout") == Outputs(1, None, 1)
    assert diagnose.count({"items": []}, "exact_match") is None
