"""The data files a task names are checked by `validate` and `build` (issue 25): a record without
its answer, a line that is not JSON, a record that is not an object — each named by the data
file's own file:line:col with the spec's field path, exit 2, nothing written."""

from __future__ import annotations

import json
from pathlib import Path

from test_errors import build_fails, problems, tiny


def write_rows(path: Path, rows: list) -> None:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))


def test_a_record_without_its_answer_is_named_by_file_and_line(specs, run_cli, tmp_path):
    write_rows(specs / "tasks" / "data" / "train.jsonl", [
        {"id": "a", "question": "1+1?", "answer": "#### 2"},
        {"id": "b", "question": "2+2?"},
        {"id": "x", "question": "5+5?"}])
    (m,) = build_fails(run_cli, tiny(specs), tmp_path)
    assert m["file"].endswith("data/train.jsonl") and (m["line"], m["col"]) == ("2", "1")
    assert m["path"] == "data.fields.answer"
    assert "record 'b' has no 'answer' column" in m["what"] and "1 more of the 3" in m["what"]
    code, _out, err = run_cli("validate", tiny(specs))
    assert code == 2 and problems(err)[0]["line"] == "2"


def test_a_null_prompt_and_a_missing_id_column(specs, run_cli, tmp_path):
    write_rows(specs / "tasks" / "data" / "test.jsonl", [
        {"id": "c", "question": "3+3?", "answer": "#### 6"},
        {"id": "d", "question": None, "answer": "#### 8"}])
    write_rows(specs / "tasks" / "data" / "train.jsonl", [
        {"question": "1+1?", "answer": "#### 2"}])
    found = build_fails(run_cli, tiny(specs), tmp_path)
    by_file = {Path(m["file"]).name: m for m in found}
    assert by_file["test.jsonl"]["line"] == "2" and \
        by_file["test.jsonl"]["path"] == "data.fields.prompt"
    assert "record 'd' has an empty 'question' column" in by_file["test.jsonl"]["what"]
    assert by_file["train.jsonl"]["path"] == "data.fields.id"
    assert "the record has no 'id' column" in by_file["train.jsonl"]["what"]


def test_a_line_that_is_not_json_and_a_record_that_is_not_an_object(specs, run_cli, tmp_path):
    write_rows(specs / "tasks" / "data" / "train.jsonl", [
        {"id": "a", "question": "1+1?", "answer": "#### 2"}, '{"id": "b", "question": '])
    write_rows(specs / "tasks" / "data" / "test.jsonl", [["c", "3+3?", "#### 6"]])
    found = build_fails(run_cli, tiny(specs), tmp_path)
    by_file = {Path(m["file"]).name: m for m in found}
    assert by_file["train.jsonl"]["line"] == "2" and "not valid JSON" in \
        by_file["train.jsonl"]["what"] and by_file["train.jsonl"]["path"] == \
        "data.source.files.train"
    assert "must be an object" in by_file["test.jsonl"]["what"]


def test_an_empty_file_and_a_csv_source(specs, run_cli, tmp_path):
    (specs / "tasks" / "data" / "test.jsonl").write_text("\n")
    (m,) = build_fails(run_cli, tiny(specs), tmp_path)
    assert m["path"] == "data.source.files.test" and "no records" in m["what"]
    write_rows(specs / "tasks" / "data" / "test.jsonl", [
        {"id": "c", "question": "3+3?", "answer": "#### 6"}])
    (specs / "tasks" / "data" / "train.csv").write_text(
        "id,question,answer\na,1+1?,#### 2\nb,2+2?,\n")
    spec = specs / "tasks" / "tiny.yaml"
    spec.write_text(spec.read_text().replace("train: data/train.jsonl", "train: data/train.csv"))
    (m,) = build_fails(run_cli, spec, tmp_path)
    assert m["file"].endswith("train.csv") and m["line"] == "3"
    assert "record 'b' has an empty 'answer' column" in m["what"]


def test_good_data_still_builds(specs, run_cli, tmp_path):
    code, _out, err = run_cli("build", tiny(specs), "-o", tmp_path / "out")
    assert code == 0, err
