"""`a2c check`, the author's gate (fast: no model runs; the baseline and the agent run are in
test_check_slow.py). Each refusal is one line that says what to fix."""

from __future__ import annotations

import json
import re

import pytest
from task_authoring import code_words, record, write_task

from a2c.cli import main
from a2c.runtime.check.points import _corrupt


@pytest.fixture
def check(capsys):
    def run(*args):
        code = main(["check", *[str(a) for a in args]])
        captured = capsys.readouterr()
        return code, captured.out, captured.err
    return run


def lines(out: str, prefix: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith(prefix)]


def test_authored_text_task_passes_points_1_to_3(tmp_path, check):
    spec = write_task(tmp_path)
    code, out, err = check(spec, "--no-baseline")
    assert code == 0, out + err
    assert lines(out, "FAIL") == []
    # the format is derived from the pattern and written out, case kept
    assert "PASS (1) gold answers: 100.0 on 100 held-out and 400 agent records written as " \
           "'Answer: {answer}'" in out
    assert re.search(r"\(e\.g\. 'Answer: [A-Z]+'\)$", lines(out, "PASS (1)")[0])   # capitals
    assert len(lines(out, "PASS (2)")) == 2
    assert "PASS (3) splits: agent 400 records, held-out 100 records, disjoint" in out


def test_refuses_a_pattern_that_cannot_read_its_own_gold_answer(tmp_path, check):
    words = code_words(6)
    train = [record(i, w) for i, w in enumerate(words[:4])]
    test = [record(4, words[4]), record(5, words[5], answer="New York")]
    spec = write_task(tmp_path, train=train, test=test)
    code, out, _ = check(spec)
    assert code == 1
    fails = lines(out, "FAIL")
    assert len(fails) == 1, out
    assert "the pattern does not match the gold answer written as the target: " \
           "'Answer: New York' -> 'New'" in fails[0]
    assert "record 'w5' of data/codewords/test.jsonl" in fails[0]


def test_refuses_splits_that_share_records(tmp_path, check):
    words = code_words(8)
    train = [record(i, w) for i, w in enumerate(words[:6])]
    copied = dict(train[2], id="t-copy")          # the same record under another id
    test = [record(6, words[6]), copied]
    code, out, _ = check(write_task(tmp_path, train=train, test=test), "--agent", "ref-sft")
    assert code == 1
    [fail] = lines(out, "FAIL")
    assert fail.startswith("FAIL (3) splits: 1 of the 2 held-out records repeat an agent "
                           "record") and "held-out 't-copy' = agent 'w2'" in fail
    assert "SKIP (4)(5): not run: fix the points above first" in out   # no agent run


def test_refuses_splits_that_share_ids(tmp_path, check):
    words = code_words(6)
    train = [record(i, w) for i, w in enumerate(words[:4])]
    test = [record(3, words[5])]                    # id w3 is also a training record
    code, out, _ = check(write_task(tmp_path, train=train, test=test))
    assert code == 1
    [fail] = lines(out, "FAIL")
    assert fail.startswith("FAIL (3) splits:") and "share 1 id(s)" in fail and "w3" in fail


def test_refuses_a_grader_that_scores_corrupted_answers_right(tmp_path, check):
    # `normalize: number` on text answers keeps only their number: 'Qoom 12' reads as '12'
    train = [{"id": f"a{i}", "question": f"Where is desk {i}?", "word": f"Room {i}"}
             for i in range(1, 5)]
    test = [{"id": "b12", "question": "Where is desk 12?", "word": "Room 12"}]
    spec = write_task(tmp_path, train=train, test=test, pattern=r"Answer:\s*(.+)",
                      normalize="number")
    code, out, _ = check(spec, "--no-baseline")
    assert code == 1
    [fail] = lines(out, "FAIL")
    assert fail.startswith("FAIL (2) corrupted answers: 100.0, not 0: 'Answer: Qoom 12'")
    assert "accepts a wrong answer" in fail


def test_a_spec_that_does_not_compile_is_one_line_per_problem(tmp_path, check):
    spec = write_task(tmp_path, pattern=r"(?:Answer|Final):\s*([A-Za-z]+)")
    code, out, _ = check(spec)
    assert code == 1
    [fail] = lines(out, "FAIL")
    assert "the answer format cannot be derived from the pattern" in fail
    assert "answer_format: 'Answer: {answer}'" in fail


def test_new_task_passes_out_of_the_box(tmp_path, check):
    assert main(["new", "task", "fresh", "--specs", str(tmp_path), "--no-build"]) == 0
    code, out, err = check(tmp_path / "tasks" / "fresh.yaml", "--no-baseline")
    assert code == 0, out + err
    assert "written as '#### {answer}'" in out


def test_judge_task_says_what_it_cannot_run_offline(tmp_path, check):
    assert main(["new", "task", "judged", "--level", "2", "--specs", str(tmp_path),
                 "--no-build"]) == 0
    code, out, _ = check(tmp_path / "tasks" / "judged.yaml")
    assert code == 0, out
    assert "PASS (1) references: every held-out record has a reference output" in out
    assert any("A2C_JUDGE_" in line for line in lines(out, "SKIP"))


def test_level3_expert_walkthroughs_win_and_silence_loses(check):
    code, out, _ = check("textquest", "--no-baseline")
    assert code == 0, out
    assert "PASS (1) gold answers: the expert walkthroughs win 100.0% of 12" in out
    assert "PASS (2) empty answers: 0.0 on 12 records" in out


def test_data_not_on_this_machine_is_not_a_pass(check, monkeypatch, tmp_path):
    monkeypatch.setenv("A2C_CACHE", str(tmp_path / "empty-cache"))   # no fetched ALFWorld
    code, out, _ = check("alfworld")
    assert code == 3, out
    assert lines(out, "SKIP (3) splits: the data cannot be loaded here")
    assert "could not be checked here" in out


def test_corrupt_changes_every_answer():
    assert _corrupt("57") == "58" and _corrupt("1,234") == "1235"
    assert _corrupt("LUFESA") == "QUFESA" and _corrupt("quiz") == "ziuz"[0] + "uiz"
    assert _corrupt("") == "x"


def test_check_and_report_give_one_interval_for_one_run(tmp_path, capsys):
    # issue 25: `check` printed +28..+48 and `report` +29..+49 for one run (its own percentile
    # bootstrap, 2,000 resamples, another pick of the best); both now call paired_improvement
    from a2c.analysis.trust import paired_improvement as report_interval
    from a2c.intervals import paired_improvement
    from a2c.runtime.check import Report
    from a2c.runtime.check.agent import _best_result, progress_line

    base = {"score": 0.0, "items": [{"id": str(i), "score": 0.0} for i in range(100)]}
    after = {"score": 40.0, "valid": True,
             "items": [{"id": str(i), "score": 1.0 if i < 40 else 0.0} for i in range(100)]}
    results = tmp_path / "results"
    results.mkdir()
    for name, data in (("baseline", base), ("2", after), ("10", {**after, "score": 40.0}),
                       ("3", {**after, "score": 90.0, "copy_of_base": True})):
        (results / f"{name}.json").write_text(json.dumps(data))
    best = _best_result(tmp_path)
    assert best["submission"] == "2"            # earliest on a tie (10 sorts before 2 as text)
    assert report_interval is paired_improvement
    paired = paired_improvement(best, base)
    lo, hi = paired["ci95"]
    assert paired["difference"] == pytest.approx(40.0) and 25.0 < lo < 40.0 < hi < 55.0
    assert paired == paired_improvement(best, base)      # seeded
    progress_line(Report(), 0.0, "submission 1 scored 67.0")
    progress_line(Report(), 0.0, "snapshot (periodic) skipped: busy")
    out = capsys.readouterr().out
    assert "submission 1 scored 67.0" in out and "snapshot" not in out


def test_agent_params_are_checked_before_point_1(tmp_path, check):
    """A misspelt or refused --agent-param is exit 2 in a second, naming the agent's params,
    before the minutes of points (1)-(4); and it needs --agent."""
    spec = write_task(tmp_path)
    code, out, err = check(spec, "--agent", "ref-sft", "--agent-param", "stepz=3")
    assert code == 2 and "PASS" not in out
    assert "ref-sft has no param stepz" in err and "steps" in err
    code, out, err = check(spec, "--agent", "ref-sft", "--agent-param", "steps=-1")
    assert code == 2 and "PASS" not in out and "steps" in err
    code, out, err = check(spec, "--agent-param", "steps=3", "--no-baseline")
    assert code == 2 and "--agent" in err and "PASS" not in out
