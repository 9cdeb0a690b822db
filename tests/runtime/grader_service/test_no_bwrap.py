"""`a2c run --no-bwrap` reaches the grader service (issue 26): service.json says
`use_bwrap: false` (written only then), the service builds no evaluator box and tells the built-in
evaluator `--no-bwrap`, and the evaluator then runs generated code without bubblewrap."""

from __future__ import annotations

import json
import sys

from a2c.contracts.service_config import EVALUATOR_MODULE, ServiceConfig

PROBE = r"""
import json, sys
out = sys.argv[sys.argv.index("--out") + 1]
json.dump({"score": 1.0, "argv": sys.argv[1:]}, open(out, "w"))
"""
BASE = {"token": "t", "output_dir": "/tmp/out", "socket_path": "/tmp/s.sock"}


def test_service_json_says_whether_bubblewrap_is_used(tmp_path):
    assert ServiceConfig.from_dict(tmp_path, BASE).use_bwrap is True
    assert ServiceConfig.from_dict(tmp_path, {**BASE, "use_bwrap": True}).use_bwrap is True
    assert ServiceConfig.from_dict(tmp_path, {**BASE, "use_bwrap": False}).use_bwrap is False


def _argv(tmp_path, **kw) -> list[str]:
    from a2c.runtime.grader_service.evaluator import run_evaluation
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE)
    (tmp_path / "g.json").write_text(json.dumps({"kind": "exact_match"}))
    outcome = run_evaluation([sys.executable, str(probe), "-m", EVALUATOR_MODULE],
                             grader_cfg_path=tmp_path / "g.json", model=tmp_path,
                             heldout=tmp_path / "h.jsonl", engine="auto",
                             out_path=tmp_path / "eval" / "1.json", timeout_s=30,
                             log_path=tmp_path / "eval" / "1.log", **kw)
    assert outcome.error is None, outcome.error
    return outcome.result["argv"]


def test_the_evaluator_is_told_no_bwrap_and_gets_no_box(tmp_path):
    argv = _argv(tmp_path, use_bwrap=False)
    assert "--no-bwrap" in argv
    assert argv[argv.index("--out") + 1] == str(tmp_path / "eval" / "1.json")   # not boxed


def test_by_default_the_evaluator_is_not_told_anything(tmp_path, monkeypatch):
    monkeypatch.setenv("A2C_NO_BWRAP", "1")      # no box either: the argv is the plain one
    assert "--no-bwrap" not in _argv(tmp_path)


def test_the_evaluator_with_no_bwrap_runs_code_without_it(tmp_path, monkeypatch):
    from a2c.runtime.grader_service import evaluate_one
    from a2c.runtime.graders import code_exec
    from a2c.runtime.sandbox import bwrap
    monkeypatch.setattr(bwrap, "_off", False)    # restored after the test
    monkeypatch.setattr(evaluate_one, "_die_with_parent", lambda pid: None)
    monkeypatch.setattr(evaluate_one, "_drop_ambient_caps", lambda: None)
    monkeypatch.setattr(evaluate_one, "evaluate", lambda *a: {"score": 0.0})
    (tmp_path / "g.json").write_text("{}")
    out = tmp_path / "out.json"
    assert evaluate_one.main(["--grader", str(tmp_path / "g.json"), "--model", str(tmp_path),
                              "--heldout", str(tmp_path / "h"), "--out", str(out),
                              "--no-bwrap"]) == 0
    assert bwrap.bwrap_path() is None and not bwrap.available()
    assert code_exec.isolation("auto")[0] == "rlimits"


def test_prepare_writes_use_bwrap_only_for_no_bwrap(tmp_path, monkeypatch):
    from a2c.runtime import run as run_mod
    monkeypatch.setenv("A2C_UNSAFE_ROOT_AGENT", "1")   # a root runtime without bubblewrap

    def service_json(use_bwrap, name):
        opts = run_mod.RunOptions(bundle="arith", agent="ref-copy", model="tiny", budget="90s",
                                  runs_dir=tmp_path / name, seed=0, mode="free",
                                  use_bwrap=use_bwrap)
        ctx = run_mod.prepare(opts, report=lambda _: None)
        return json.loads((ctx.run_dir / "grader" / "service.json").read_text())

    assert service_json(False, "off")["use_bwrap"] is False
    assert "use_bwrap" not in service_json(None, "auto")
