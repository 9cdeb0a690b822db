"""`a2c eval` on every level-1 and level-2 bundle under generated/ (predictions path), on fixture
data where the task's real data set is on the hub (not on this machine)."""

import json
import re
import subprocess
import sys

import pytest
from grader_helpers import (
    GENERATED,
    ROOT,
    perfect_and_corrupted,
    task_bundles,
    usable_bundle,
    write_preds,
)

from a2c.cli import main

WEBSHOP_FIXTURE_SERVER = ROOT / "tests" / "fixtures" / "l3" / "webshop" / "fixture_server.py"


def run_eval(capsys, *args):
    rc = main(["eval", *map(str, args)])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_there_are_bundles_to_evaluate():
    ids = task_bundles()
    assert "arith" in ids


@pytest.mark.parametrize("task_id", task_bundles())
def test_eval_predictions_on_every_l1_l2_bundle(task_id, tmp_path, capsys, fake_judge):
    gold_scores_100_and_wrong_0(task_id, tmp_path, capsys)


# An authored task as a new user writes one (README, "Authoring a task"): its own answer format,
# not the arithmetic task's `#### N`. The sweep above must hold for it too once it is built.
UNITCONV = """\
apiVersion: a2c/v1
kind: Task
id: unitconv
title: Unit conversion
level: 1
description: "Convert each length to metres; reply 'Metres: <N>'."
base_model: {builtin: tiny}
data:
  source:
    files: {train: data/train.jsonl, test: data/test.jsonl}
  agent: {split: train}
  heldout: {split: test}
  fields: {id: id, prompt: question, answer: metres}
grader:
  kind: exact_match
  params: {pattern: 'Metres:\\s*(-?[\\d.]+)', fallback: none, normalize: number}
  inference: {max_new_tokens: 16, temperature: 0}
budget: {wall_clock: 10m, gpus: 0, max_submissions: 5, min_interval: 0s, eval_timeout: 10m}
scoring: {policy: best}
"""


def test_the_sweep_holds_for_an_authored_task_with_its_own_answer_format(tmp_path, capsys):
    from a2c.compiler.build import build_specs

    tasks = tmp_path / "specs" / "tasks"
    (tasks / "data").mkdir(parents=True)
    (tasks / "unitconv.yaml").write_text(UNITCONV)
    for split, km in (("train", range(1, 9)), ("test", range(11, 17))):
        (tasks / "data" / f"{split}.jsonl").write_text("".join(
            json.dumps({"id": f"{split}-{k}", "question": f"{k} km in metres?",
                        "metres": str(k * 1000)}) + "\n" for k in km))
    generated = tmp_path / "generated"
    build_specs([tasks / "unitconv.yaml"], generated)
    assert task_bundles(generated) == ["unitconv"]
    task = json.loads((generated / "unitconv" / "bundle.json").read_text())["task"]
    assert task["grader"]["params"]["answer_format"] == "Metres: {answer}"
    gold = gold_scores_100_and_wrong_0("unitconv", tmp_path / "work", capsys, generated)
    assert set(gold.values()) == {f"Metres: {k * 1000}" for k in range(11, 17)}


def gold_scores_100_and_wrong_0(task_id, tmp_path, capsys, generated=GENERATED) -> dict:
    """The sweep's check of one bundle: gold answers in the task's own answer format score 100,
    wrong ones in the same format 0, through `a2c eval --predictions`."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    root, records, source = usable_bundle(task_id, tmp_path, generated)
    task = json.loads((root / "bundle.json").read_text())["task"]
    gold, bad = perfect_and_corrupted(task, records)
    out = tmp_path / "items.jsonl"
    rc, stdout, _ = run_eval(capsys, root, "--predictions", write_preds(tmp_path / "p.jsonl", gold),
                             "--out", out, "--json")
    assert rc == 0, stdout
    result = json.loads(stdout)
    assert result["score"] == 100.0, (task_id, source)
    assert result["n_items"] == len(records) and result["task"] == task_id
    assert result["split"] == "heldout" and result["n_missing"] == 0
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [it["id"] for it in lines] == [r["id"] for r in records]
    assert all({"id", "prompt", "output", "gold", "correct", "score"} <= set(it) for it in lines)

    rc, stdout, _ = run_eval(capsys, root, "--predictions", write_preds(tmp_path / "b.jsonl", bad),
                             "--json")
    assert rc == 0 and json.loads(stdout)["score"] == 0.0
    return gold


@pytest.fixture
def arith(tmp_path):
    from a2c.contracts.bundle import Bundle
    from a2c.runtime.data import load_split

    if not (GENERATED / "arith" / "bundle.json").is_file():
        pytest.skip("no arith bundle")
    b = Bundle.load(GENERATED / "arith")
    return b.root, load_split(b.task, "heldout", b.root)


def test_task_id_and_human_summary(arith, capsys, tmp_path):
    _, records = arith
    preds = write_preds(tmp_path / "p.jsonl", {r["id"]: f"#### {r['answer']}" for r in records})
    rc, stdout, _ = run_eval(capsys, "arith", "--predictions", preds)
    assert rc == 0 and re.search(r"arith \[heldout\] exact_match .*score 100\.00", stdout)


def test_missing_ids_are_failures_and_counted(arith, capsys, tmp_path):
    root, records = arith
    half = {r["id"]: f"#### {r['answer']}" for r in records[:50]}
    rc, stdout, _ = run_eval(capsys, root, "--predictions", write_preds(tmp_path / "p.jsonl", half),
                               "--json")
    res = json.loads(stdout)
    assert rc == 0 and res["score"] == 50.0 and res["n_missing"] == 50
    assert res["metrics"]["n_missing"] == 50 and len(res["missing_ids"]) == 20


def test_errors(arith, capsys, tmp_path):
    root, records = arith
    rc, _, err = run_eval(capsys, root, "--predictions", tmp_path / "nope.jsonl")
    assert rc == 2 and "predictions file not found" in err

    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"id": records[0]["id"], "output": "#### 1"}) + "\n{not json\n")
    rc, _, err = run_eval(capsys, root, "--predictions", bad)
    assert rc == 2 and f"{bad}:2: not valid JSON" in err

    noid = tmp_path / "noid.jsonl"
    noid.write_text(json.dumps({"output": "x"}) + "\n")
    rc, _, err = run_eval(capsys, root, "--predictions", noid)
    assert rc == 2 and ':1: no "id"' in err

    unknown = write_preds(tmp_path / "u.jsonl", {"nope-1": "#### 1", records[0]["id"]: "#### 2"})
    rc, _, err = run_eval(capsys, root, "--predictions", unknown)
    assert rc == 2 and "'nope-1'" in err and "not in the heldout split" in err

    dup = tmp_path / "dup.jsonl"
    dup.write_text("".join(json.dumps({"id": records[0]["id"], "output": "x"}) + "\n"
                           for _ in range(2)))
    rc, _, err = run_eval(capsys, root, "--predictions", dup)
    assert rc == 2 and "more than once" in err

    rc, _, err = run_eval(capsys, tmp_path / "no-bundle", "--predictions", dup)
    assert rc == 2 and "bundle not found" in err
    rc, _, err = run_eval(capsys, tmp_path, "--predictions", dup)
    assert rc == 2 and "not a bundle" in err

    rc, _, err = run_eval(capsys, root, "--model", tmp_path / "no-model")
    assert rc == 2 and "model not found" in err


def test_agent_split_only_when_asked(arith, capsys, tmp_path):
    from a2c.contracts.bundle import Bundle
    from a2c.runtime.data import load_split

    root, _ = arith
    agent = load_split(Bundle.load(root).task, "agent", root)
    preds = write_preds(tmp_path / "a.jsonl", {r["id"]: f"#### {r['answer']}" for r in agent[:5]})
    rc, _, err = run_eval(capsys, root, "--predictions", preds)
    assert rc == 2 and "not in the heldout split" in err
    rc, stdout, _ = run_eval(capsys, root, "--predictions", preds, "--split", "agent",
                             "--limit", "5", "--json")
    res = json.loads(stdout)
    assert rc == 0 and res["split"] == "agent" and res["score"] == 100.0 and res["n_items"] == 5


def test_humaneval_sample_format_is_accepted(capsys, tmp_path, humaneval_problems):
    if not (GENERATED / "humaneval" / "bundle.json").is_file():
        pytest.skip("no humaneval bundle")
    path = tmp_path / "samples.jsonl"
    with open(path, "w") as f:
        f.writelines(json.dumps({"task_id": r["id"], "completion": r["answer"]}) + "\n" for r in humaneval_problems[82:])
    rc, stdout, _ = run_eval(capsys, GENERATED / "humaneval", "--predictions", path, "--json")
    res = json.loads(stdout)
    assert rc == 0 and res["score"] == 100.0 and res["metrics"]["pass@1"] == 100.0


def test_judge_unreliable_exit_status(capsys, tmp_path, fake_judge, monkeypatch):
    root, records, _ = usable_bundle("alpacaeval", tmp_path)
    gold, _ = perfect_and_corrupted({"grader": {"kind": "pairwise_judge"}}, records)
    fake_judge.fail_marker = records[0]["prompt"][:20]
    monkeypatch.setenv("A2C_JUDGE_BACKOFF_S", "0.01")
    rc, stdout, _ = run_eval(capsys, root, "--predictions", write_preds(tmp_path / "p.jsonl", gold),
                             "--json")
    res = json.loads(stdout)
    assert rc == 3 and res["valid"] is False and "unreliable" in res["error"]


def test_real_command_prints_one_json_object(arith, tmp_path):
    root, records = arith
    preds = write_preds(tmp_path / "p.jsonl", {r["id"]: f"#### {r['answer']}" for r in records})
    proc = subprocess.run([sys.executable, "-m", "a2c.cli", "eval", str(root), "--predictions",
                           str(preds), "--json"], capture_output=True, text=True, timeout=120,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    obj = json.loads(proc.stdout)
    assert obj["score"] == 100.0 and 0 <= obj["ci95"][0] <= obj["ci95"][1] <= 100


def test_eval_level3_bundle_resolves_game_files(capsys, tmp_path):
    """`a2c eval` on the built-in text world: record paths resolve in the task's data folder."""
    from a2c.runtime.models import prepare_builtin

    tiny = prepare_builtin("tiny")
    out = tmp_path / "items.jsonl"
    rc = main(["eval", str(GENERATED / "textquest"), "--model", str(tiny), "--limit", "2",
               "--json", "--out", str(out)])
    res = json.loads(capsys.readouterr().out)
    assert rc == 0 and res["valid"] and res["n_items"] == 2 and 0 <= res["score"] <= 100
    items = [json.loads(line) for line in out.read_text().splitlines()]
    # Every episode reached the engine (no missing game file) and kept its trajectory.
    assert all(not str(it.get("error") or "").startswith("env_crash") for it in items), items
    assert all(it.get("trajectory") for it in items)


def test_eval_starts_and_stops_declared_services(tmp_path):
    """The services a task declares run for the evaluation only (here: the WebShop fixture)."""
    import socket
    import urllib.request

    from a2c.contracts.spec import TaskSpec
    from a2c.runtime.evaluate import task_services as _task_services

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    task = TaskSpec.from_dict({"environment": {"services": [{
        "name": "shop", "port": port, "health": "/health", "startup_timeout_s": 30,
        "command": f"{sys.executable} {WEBSHOP_FIXTURE_SERVER} --port {{port}}"}]}})
    url = f"http://127.0.0.1:{port}/health"
    with _task_services(task):
        assert urllib.request.urlopen(url, timeout=5).status == 200
    with pytest.raises(OSError):
        urllib.request.urlopen(url, timeout=2)
    with _task_services(TaskSpec()):
        pass                                    # no services: nothing started, nothing to stop
