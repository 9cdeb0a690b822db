"""Every kind of bad input: a `file:line:col: field.path: what` line per problem, exit 2, no
traceback, nothing written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

LINE = re.compile(r"(?:^|error: )(?P<file>[^\s:][^:]*):(?P<line>\d+):(?P<col>\d+): "
                  r"(?P<path>[\w.\[\]()-]+): (?P<what>.+)$")


def problems(stderr: str) -> list[re.Match]:
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    matches = [LINE.search(ln) for ln in lines]
    assert all(matches), f"not in file:line:col: path: what format:\n{stderr}"
    return matches


def build_fails(run_cli, spec: Path, tmp_path: Path) -> list[re.Match]:
    out = tmp_path / "out"
    code, stdout, stderr = run_cli("build", spec, "-o", out)
    assert code == 2, (code, stdout, stderr)
    assert "Traceback" not in stderr
    assert not out.exists() or not any(out.rglob("*")), "something was written"
    found = problems(stderr)
    for m in found:
        assert Path(m["file"]).name.endswith((".yaml", ".yml")) or "tasks" in m["file"]
    return found


def edit(spec: Path, old: str, new: str) -> Path:
    text = spec.read_text()
    assert old in text, old
    spec.write_text(text.replace(old, new, 1))
    return spec


def tiny(specs: Path) -> Path:
    return specs / "tasks" / "tiny.yaml"


def test_valid_fixture_builds(specs, run_cli, tmp_path):
    code, _out, err = run_cli("build", tiny(specs), "-o", tmp_path / "out")
    assert code == 0, err
    assert (tmp_path / "out" / "tiny" / "bundle.json").is_file()


def test_malformed_yaml(specs, run_cli, tmp_path):
    spec = edit(tiny(specs), "title: Tiny fixture task", "title: [unclosed")
    (m,) = build_fails(run_cli, spec, tmp_path)
    assert "malformed YAML" in m["what"] and int(m["line"]) >= 4


def test_duplicate_key(specs, run_cli, tmp_path):
    spec = edit(tiny(specs), "level: 1\n", "level: 1\nlevel: 2\n")
    (m,) = build_fails(run_cli, spec, tmp_path)
    assert m["path"] == "level" and "duplicate key 'level'" in m["what"]
    assert (m["line"], m["col"]) == ("6", "1")


def test_tab_indentation(specs, run_cli, tmp_path):
    spec = edit(tiny(specs), "  agent: {split: train}", "\tagent: {split: train}")
    (m,) = build_fails(run_cli, spec, tmp_path)
    assert "tab" in m["what"] and m["line"] == "11" and m["col"] == "1"


def test_wrong_type(specs, run_cli, tmp_path):
    spec = edit(tiny(specs), "max_submissions: 5", "max_submissions: five")
    (m,) = build_fails(run_cli, spec, tmp_path)
    assert m["path"] == "budget.max_submissions"
    assert "must be an integer, not a string" in m["what"]
    assert m["line"] == "18"


def test_unknown_key_with_suggestion(specs, run_cli, tmp_path):
    spec = edit(tiny(specs), "title: Tiny", "titel: Tiny")
    found = build_fails(run_cli, spec, tmp_path)
    whats = {m["path"]: m["what"] for m in found}
    assert "unknown key 'titel'; did you mean 'title'?" in whats["titel"]
    assert whats["title"] == "required field is missing"


def test_missing_required_field(specs, run_cli, tmp_path):
    spec = edit(tiny(specs), "  agent: {split: train}\n", "")
    (m,) = build_fails(run_cli, spec, tmp_path)
    assert m["path"] == "data.agent" and "required field is missing" in m["what"]


def test_missing_referenced_file(specs, run_cli, tmp_path):
    (specs / "tasks" / "tiny.md").unlink()
    (specs / "tasks" / "data" / "test.jsonl").unlink()
    found = build_fails(run_cli, tiny(specs), tmp_path)
    paths = {m["path"] for m in found}
    assert paths == {"description.file", "data.source.files.test"}
    assert all("file not found" in m["what"] for m in found)


def test_empty_file(specs, run_cli, tmp_path):
    spec = tiny(specs)
    spec.write_text("# only a comment\n\n")
    (m,) = build_fails(run_cli, spec, tmp_path)
    assert "empty" in m["what"]


def test_non_utf8(specs, run_cli, tmp_path):
    spec = tiny(specs)
    spec.write_bytes(spec.read_bytes().replace(b"Tiny fixture", b"Tiny fixt\xe9re"))
    (m,) = build_fails(run_cli, spec, tmp_path)
    assert "UTF-8" in m["what"] and m["line"] == "4" and m["col"] == "17"


def test_alias_bomb(specs, run_cli, tmp_path):
    spec = tiny(specs)
    bomb = ['a: &a ["x","x","x","x","x","x","x","x","x"]']
    for i, name in enumerate("bcdefghi"):
        prev = "abcdefghi"[i]
        bomb.append(f"{name}: &{name} [" + ",".join([f"*{prev}"] * 9) + "]")
    spec.write_text(spec.read_text() + "bomb:\n" + "".join(f"  {ln}\n" for ln in bomb))
    (m,) = build_fails(run_cli, spec, tmp_path)
    assert "alias" in m["what"]


def test_wrong_kind(specs, run_cli, tmp_path):
    spec = edit(tiny(specs), "kind: Task", "kind: Agent")
    (m,) = build_fails(run_cli, spec, tmp_path)
    assert m["path"] == "kind" and "wrong kind" in m["what"]


def test_unknown_kind(specs, run_cli, tmp_path):
    spec = edit(tiny(specs), "kind: Task", "kind: Tsak")
    (m,) = build_fails(run_cli, spec, tmp_path)
    assert "did you mean 'Task'" in m["what"]


def test_all_errors_at_once(specs, run_cli, tmp_path):
    spec = tiny(specs)
    edit(spec, "level: 1", "level: 4")
    edit(spec, "fallback: none", "fallback: never")
    edit(spec, "wall_clock: 1h30m", "wall_clock: 90 minutes")
    edit(spec, "modes: [free, sft-only]", "modes: [free, rl_only]")
    found = build_fails(run_cli, spec, tmp_path)
    paths = [m["path"] for m in found]
    assert paths == ["level", "grader.params.fallback", "budget.wall_clock", "modes[1]"]
    assert "did you mean 'rl-only'" in found[3]["what"]
    assert "not a duration" in found[2]["what"]
    lines = [int(m["line"]) for m in found]
    assert lines == sorted(lines)


def test_level_must_fit_grader(specs, run_cli, tmp_path):
    spec = edit(tiny(specs), "level: 1", "level: 2")
    (m,) = build_fails(run_cli, spec, tmp_path)
    assert m["path"] == "grader.kind" and "does not fit level 2" in m["what"]


def test_level3_needs_environment(specs, run_cli, tmp_path):
    spec = tiny(specs)
    edit(spec, "level: 1", "level: 3")
    edit(spec, "kind: exact_match\n  params: {pattern: '####\\s*(-?[\\d,.]+)', fallback: none, "
               "normalize: number}", "kind: rollout")
    (m,) = build_fails(run_cli, spec, tmp_path)
    assert m["path"] == "grader.env" and "required" in m["what"]


def test_overlapping_splits(specs, run_cli, tmp_path):
    spec = tiny(specs)
    edit(spec, "agent: {split: train}", "agent: {split: train, slice: '0:10'}")
    edit(spec, "heldout: {split: test}", "heldout: {split: train, slice: '5:'}")
    (m,) = build_fails(run_cli, spec, tmp_path)
    assert m["path"] == "data.heldout" and "overlaps" in m["what"]


def test_disjoint_slices_are_fine(specs, run_cli, tmp_path):
    spec = tiny(specs)
    edit(spec, "agent: {split: train}", "agent: {split: train, slice: '0:1'}")
    edit(spec, "heldout: {split: test}", "heldout: {split: train, slice: '1:'}")
    code, _, err = run_cli("validate", spec)
    assert code == 0, err


def test_bad_regex_and_unknown_template_field(specs, run_cli, tmp_path):
    spec = tiny(specs)
    edit(spec, "(-?[\\d,.]+)", "(-?[\\d,.]+")
    edit(spec, "max_new_tokens: 16,", "max_new_tokens: 16, prompt_template: 'Q: {question}',")
    found = build_fails(run_cli, spec, tmp_path)
    assert [m["path"] for m in found] == ["grader.params.pattern",
                                          "grader.inference.prompt_template"]


def test_secret_in_spec_is_refused(specs, run_cli, tmp_path):
    spec = edit(tiny(specs), "normalize: number}", "normalize: number, api_key: sk-123}")
    (m,) = build_fails(run_cli, spec, tmp_path)
    assert "never go in a spec" in m["what"]


def test_id_must_match_file_name(specs, run_cli, tmp_path):
    spec = edit(tiny(specs), "id: tiny", "id: other")
    (m,) = build_fails(run_cli, spec, tmp_path)
    assert m["path"] == "id"


def test_extends_cycle(specs, run_cli, tmp_path):
    base = specs / "base" / "defaults.yaml"
    base.write_text("extends: ../tasks/child.yaml\n" + base.read_text())
    (m,) = build_fails(run_cli, specs / "tasks" / "child.yaml", tmp_path)
    assert "cycle" in m["what"]


def test_extends_missing_base(specs, run_cli, tmp_path):
    (specs / "base" / "defaults.yaml").unlink()
    (m,) = build_fails(run_cli, specs / "tasks" / "child.yaml", tmp_path)
    assert m["path"] == "extends" and "not found" in m["what"]


def test_error_in_base_points_at_base_file(specs, run_cli, tmp_path):
    edit(specs / "base" / "defaults.yaml", "gpus: 0", "gpus: -1")
    (m,) = build_fails(run_cli, specs / "tasks" / "child.yaml", tmp_path)
    assert m["file"].endswith("defaults.yaml") and m["path"] == "budget.gpus"


def test_one_bad_spec_means_nothing_is_written(specs, run_cli, tmp_path):
    edit(specs / "tasks" / "child.yaml", "level: 1", "level: one")
    out = tmp_path / "out"
    code, _, err = run_cli("build", tiny(specs), specs / "tasks" / "child.yaml", "-o", out)
    assert code == 2 and "child.yaml" in err
    assert not (out / "tiny").exists()


def test_failed_build_leaves_old_bundle_intact(specs, run_cli, tmp_path, monkeypatch):
    from a2c.compiler import build
    out = tmp_path / "out"
    assert run_cli("build", tiny(specs), "-o", out)[0] == 0
    before = {p: p.read_bytes() for p in (out / "tiny").rglob("*") if p.is_file()}
    edit(tiny(specs), "Tiny fixture task", "Tiny fixture task, v2")

    def boom(path, data):
        if path.name == "Dockerfile":
            raise OSError("disk full")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    monkeypatch.setattr(build, "_write_file", boom)
    with pytest.raises(OSError):
        build.build_specs([tiny(specs)], out)
    after = {p: p.read_bytes() for p in (out / "tiny").rglob("*") if p.is_file()}
    assert after == before
    assert [p.name for p in out.iterdir()] == ["tiny"]   # no temp dir left behind


def test_cli_subprocess_has_no_traceback(specs, tmp_path):
    spec = edit(tiny(specs), "level: 1", "level: [1")
    proc = subprocess.run([sys.executable, "-m", "a2c.cli", "validate", str(spec)],
                          check=False, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    problems(proc.stderr)


def test_split_missing_from_local_files(specs, run_cli, tmp_path):
    spec = edit(tiny(specs), "heldout: {split: test}", "heldout: {split: dev}")
    (m,) = build_fails(run_cli, spec, tmp_path)
    assert m["path"] == "data.heldout.split" and "'dev' is not among" in m["what"]


def test_two_sources_at_once(specs, run_cli, tmp_path):
    spec = edit(tiny(specs), "  source:\n", "  source:\n    hub: x/y\n")
    (m,) = build_fails(run_cli, spec, tmp_path)
    assert m["path"] == "data.source" and "only one of: hub, files" in m["what"]


def test_unknown_key_inside_a_source_variant(specs, run_cli, tmp_path):
    spec = edit(tiny(specs), "test: data/test.jsonl}", "test: data/test.jsonl}\n    formt: jsonl")
    (m,) = build_fails(run_cli, spec, tmp_path)
    assert m["path"] == "data.source.formt" and "did you mean 'format'" in m["what"]


def test_several_documents_and_merge_keys(specs, run_cli, tmp_path):
    spec = tiny(specs)
    spec.write_text(spec.read_text() + "---\nid: again\n")
    (m,) = build_fails(run_cli, spec, tmp_path)
    assert "several YAML documents" in m["what"]
    spec.write_text(spec.read_text().split("---")[0] + "x: &x {a: 1}\ny:\n  <<: *x\n")
    found = build_fails(run_cli, spec, tmp_path)
    assert any("merge keys" in m["what"] for m in found)


def test_base_of_another_kind(specs, run_cli, tmp_path):
    edit(specs / "base" / "defaults.yaml", "kind: Task", "kind: Agent")
    child = edit(specs / "tasks" / "child.yaml", "id: child", "kind: Task\nid: child")
    (m,) = build_fails(run_cli, child, tmp_path)
    assert m["path"] == "extends" and "Agent spec" in m["what"]


def test_bad_agent_spec(tmp_path, run_cli):
    agents = tmp_path / "specs" / "agents"
    agents.mkdir(parents=True)
    spec = agents / "bot.yaml"
    spec.write_text("apiVersion: a2c/v1\nkind: Agent\nid: bot\ntitle: Bot\ntype: cli\n"
                    "launch: {command: bot --run}\ntranscript: {source: file, format: jsonl}\n")
    found = build_fails(run_cli, spec, tmp_path)
    assert [m["path"] for m in found] == ["driver", "transcript.path"]   # a cli names its wire
    spec.write_text(spec.read_text() + "driver: {wire: anthropic, default: anthropic/m}\n")
    found = build_fails(run_cli, spec, tmp_path)
    assert [m["path"] for m in found] == ["transcript.path"]
    spec.write_text(spec.read_text().replace("source: file", "source: stdout"))
    (m,) = build_fails(run_cli, spec, tmp_path)
    assert m["path"] == "launch.command" and "$A2C_PROMPT" in m["what"]


def test_suite_with_unknown_task(tmp_path, run_cli, specs):
    suites = specs / "suites"
    suites.mkdir()
    spec = suites / "s.yaml"
    spec.write_text("apiVersion: a2c/v1\nkind: Suite\nid: s\ntitle: S\n"
                    "tasks: [tiny, tinny]\nagents: [nobody]\nseeds: [0, 1]\n")
    found = build_fails(run_cli, spec, tmp_path)
    assert [m["path"] for m in found] == ["tasks[1]", "agents[0]"]
    assert "did you mean 'tiny'" in found[0]["what"]


def test_removed_field_final_rescore(specs, run_cli, tmp_path):
    spec = edit(tiny(specs), "scoring: {policy: last}", "scoring: {policy: last, final_rescore: true}")
    (m,) = build_fails(run_cli, spec, tmp_path)
    assert m["path"] == "scoring.final_rescore"
    assert m["what"].startswith("removed — use `scoring.final: {fraction: 0.5, seed: 0}`")
    code, _, err = run_cli("validate", spec)
    assert code == 2 and "scoring.final_rescore: removed" in err and "scoring.final:" in err


def test_final_split_resolves_and_is_checked(specs, run_cli, tmp_path):
    """scoring.final is resolved with its seed default; a fraction outside (0, 1) is refused
    where it is written; a task without one keeps no `final` key (its spec hash unchanged)."""
    from a2c.compiler.load import load_spec
    assert "final" not in load_spec(tiny(specs))["scoring"]
    spec = edit(tiny(specs), "scoring: {policy: last}",
                "scoring: {policy: last, final: {fraction: 0.25}}")
    assert load_spec(spec)["scoring"] == {"policy": "last", "final": {"fraction": 0.25, "seed": 0}}
    bad = edit(spec, "fraction: 0.25", "fraction: 1")
    (m,) = build_fails(run_cli, bad, tmp_path)
    assert m["path"] == "scoring.final.fraction"


# The three crash kinds 1,000 mutated shipped specs found (issue 12, point 8), and two more the
# fuzz test (test_fuzz_specs.py) found with other seeds.

def test_python_tag_is_refused(specs, run_cli, tmp_path):
    spec = edit(tiny(specs), "title: Tiny fixture task", "title: !!python/object:os.system x")
    (m,) = build_fails(run_cli, spec, tmp_path)
    assert m["path"] == "title" and (m["line"], m["col"]) == ("4", "8")
    assert m["what"].startswith("YAML tag '!!python/object:os.system' is not allowed")


def test_mapping_where_the_kind_goes(specs, run_cli, tmp_path):
    spec = edit(tiny(specs), "kind: Task", "kind: {a: 1}")
    (m,) = build_fails(run_cli, spec, tmp_path)
    assert m["path"] == "kind"
    assert m["what"] == "must be one of: Task, Agent, Suite (got a mapping)"


def test_self_referencing_alias(specs, run_cli, tmp_path):
    spec = tiny(specs)
    spec.write_text(spec.read_text() + "x: &a [*a]\n")
    (m,) = build_fails(run_cli, spec, tmp_path)
    assert m["path"] == "x[0]" and "refers to a value that contains it (a cycle)" in m["what"]


def test_value_that_does_not_fit_its_tag(specs, run_cli, tmp_path):
    spec = edit(tiny(specs), "max_submissions: 5", "max_submissions: !!int five")
    (m,) = build_fails(run_cli, spec, tmp_path)
    assert m["path"] == "budget.max_submissions" and m["what"] == "cannot read 'five' as !!int"
    edit(spec, "!!int five", ".inf")
    (m,) = build_fails(run_cli, spec, tmp_path)
    assert m["path"] == "budget.max_submissions" and "not a finite number" in m["what"]


def test_file_name_too_long(specs, run_cli, tmp_path):
    spec = edit(tiny(specs), "{file: tiny.md}", "{file: " + "a" * 300 + ".md}")
    (m,) = build_fails(run_cli, spec, tmp_path)
    assert m["path"] == "description.file" and "file not found" in m["what"]


def test_nesting_too_deep(specs, run_cli, tmp_path):
    spec = tiny(specs)
    spec.write_text(spec.read_text() + "x: " + "[" * 3000 + "]" * 3000 + "\n")
    (m,) = build_fails(run_cli, spec, tmp_path)
    assert "nested more than 32 levels deep" in m["what"]
