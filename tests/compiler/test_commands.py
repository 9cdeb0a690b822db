"""a2c validate / list / schema / new, and the generated field reference."""

from __future__ import annotations

import json

from a2c.compiler import docgen
from a2c.compiler.build import build_specs
from a2c.contracts.bundle import Bundle


def test_validate_ok(specs, run_cli):
    code, out, err = run_cli("validate", specs / "tasks" / "tiny.yaml",
                             specs / "tasks" / "child.yaml")
    assert code == 0, err
    assert "tiny" in out and "child" in out


def test_validate_missing_file(run_cli, tmp_path):
    code, _, err = run_cli("validate", tmp_path / "nope.yaml")
    assert code == 2 and "nope.yaml:1:1: (document): file not found" in err


def test_validate_unknown_id_suggests(run_cli):
    code, _, err = run_cli("validate", "arihh")
    assert code == 2 and "did you mean 'arith'" in err


def test_list_json(run_cli):
    code, out, _ = run_cli("list", "--json")
    assert code == 0
    data = json.loads(out)
    tasks = {t["id"]: t for t in data["tasks"]}
    assert tasks["arith"]["level"] == 1 and tasks["arith"]["grader"] == "exact_match"
    assert tasks["gsm8k"]["base_model"] == "Qwen/Qwen3-8B-Base"
    assert tasks["gsm8k"]["wall_clock"] == "12h" and tasks["gsm8k"]["gpus"] == 1
    assert {a["id"] for a in data["agents"]} >= {"claude-code", "codex", "ref-grpo"}


def test_list_table(run_cli):
    code, out, _ = run_cli("list")
    assert code == 0 and "Tasks" in out and "arith" in out and "exact_match" in out


def test_schema(run_cli):
    for kind in ("task", "agent", "suite"):
        code, out, _ = run_cli("schema", kind)
        schema = json.loads(out)
        assert code == 0 and schema["$schema"].endswith("2020-12/schema")
        assert schema["properties"]["kind"]["const"] == kind.capitalize()


def test_new_task_validates_and_builds(run_cli, tmp_path):
    specs = tmp_path / "specs"
    out = tmp_path / "gen"
    code, _stdout, err = run_cli("new", "task", "my-task", "--specs", specs, "-o", out,
                                "--title", "My task")
    assert code == 0, err
    spec = specs / "tasks" / "my-task.yaml"
    assert spec.is_file() and (specs / "tasks" / "my-task.md").is_file()
    assert Bundle.load(out / "my-task").task.title == "My task"
    assert run_cli("validate", spec)[0] == 0
    # level 2 variant
    assert run_cli("new", "task", "judged", "--level", "2", "--specs", specs, "-o", out)[0] == 0
    assert Bundle.load(out / "judged").task.grader.kind == "pairwise_judge"
    # refuses to overwrite, and bad ids
    code, _, err = run_cli("new", "task", "my-task", "--specs", specs, "--no-build")
    assert code == 1 and "already exists" in err
    assert run_cli("new", "task", "Bad Id", "--specs", specs)[0] == 1


def test_new_task_with_own_specs_folder_builds_beside_it_not_into_the_project(run_cli, tmp_path):
    from a2c.paths import project_root
    shipped = sorted(p.name for p in (project_root() / "generated").iterdir())
    code, stdout, err = run_cli("new", "task", "mine", "--specs", tmp_path / "specs")
    assert code == 0, err
    assert Bundle.load(tmp_path / "generated" / "mine").task.id == "mine"
    assert sorted(p.name for p in (project_root() / "generated").iterdir()) == shipped


def test_build_all_check_on_shipped(run_cli):
    code, _out, err = run_cli("build", "--all", "--check")
    assert code == 0, err


def test_prune_removes_bundles_without_specs(specs, tmp_path):
    from a2c.compiler.build import plan, prune
    out = tmp_path / "out"
    build_specs([specs / "tasks" / "tiny.yaml", specs / "tasks" / "child.yaml"], out)
    removed = prune(plan([specs / "tasks" / "tiny.yaml"]), out)
    assert [p.name for p in removed] == ["child"] and (out / "tiny").is_dir()


def test_spec_reference_is_current():
    assert docgen.target().read_text(encoding="utf-8") == docgen.render(), (
        "docs/spec-reference.md is stale: run `python -m a2c.compiler.docgen`")


def test_authoring_example_builds(tmp_path, run_cli):
    import re

    from a2c.paths import project_root
    text = (project_root() / "docs" / "authoring.md").read_text(encoding="utf-8")
    spec_text = re.search(r"`specs/tasks/capitals.yaml`:\n\n```yaml\n(.*?)```", text,
                          re.DOTALL)[1]
    tasks = tmp_path / "specs" / "tasks"
    (tasks / "data" / "capitals").mkdir(parents=True)
    (tasks / "capitals.yaml").write_text(spec_text)
    (tasks / "capitals.md").write_text("Capitals.\n")
    record = '{"id": "fr", "question": "Capital of France?", "capital": "Paris"}\n'
    for split in ("train", "test"):
        (tasks / "data" / "capitals" / f"{split}.jsonl").write_text(record)
    code, _, err = run_cli("build", tasks / "capitals.yaml", "-o", tmp_path / "gen")
    assert code == 0, err


def test_validate_folders(specs, run_cli):
    code, out, err = run_cli("validate", specs)
    assert code == 0, err
    assert "tiny" in out and "child" in out
    assert run_cli("validate", specs / "tasks")[0] == 0
