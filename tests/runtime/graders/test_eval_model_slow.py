"""`a2c eval --model` end to end with the tiny built-in model on every L1/L2 bundle (slow)."""

import json

import pytest
from grader_helpers import task_bundles, usable_bundle

from a2c.cli import main


@pytest.fixture(scope="module")
def tiny_model():
    from a2c.runtime.models import prepare_builtin

    return prepare_builtin("tiny")


@pytest.mark.slow
@pytest.mark.parametrize("task_id", task_bundles())
def test_eval_model_on_every_l1_l2_bundle(task_id, tiny_model, tmp_path, capsys, fake_judge):
    root, records, _ = usable_bundle(task_id, tmp_path)
    limit = 3
    out = tmp_path / "items.jsonl"
    rc = main(["eval", str(root), "--model", str(tiny_model), "--engine", "transformers",
               "--limit", str(limit), "--out", str(out), "--json"])
    res = json.loads(capsys.readouterr().out)
    assert rc == 0 and res["valid"], res
    assert res["backend"] == "transformers" and res["source"] == "model"
    assert res["n_items"] == limit and 0.0 <= res["score"] <= 100.0
    items = [json.loads(line) for line in out.read_text().splitlines()]
    assert [it["id"] for it in items] == [r["id"] for r in records[:limit]]
    assert all(isinstance(it["output"], str) for it in items)

    # the same outputs given as predictions score the same
    preds = tmp_path / "p.jsonl"
    preds.write_text("".join(json.dumps({"id": it["id"], "output": it["output"]}) + "\n"
                             for it in items))
    rc = main(["eval", str(root), "--predictions", str(preds), "--limit", str(limit), "--json"])
    again = json.loads(capsys.readouterr().out)
    assert rc == 0 and again["score"] == res["score"]
