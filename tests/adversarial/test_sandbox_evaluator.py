"""Hostile evaluations (issue 12, point 1): the grader service's evaluator gets the allowlisted
environment only, and for exact-match and HumanEval graders its own bubblewrap: unprivileged
(only CAP_DAC_READ_SEARCH, which its children lose), no network, nothing writable but its box,
the grader's token and service.json covered, HumanEval's nested sandbox still working, and the
tiny model scored exactly as unboxed."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from a2c.runtime.sandbox.privileges import agent_ids

# --- the evaluator's environment (issue 12, point 1: `env=None` gave it the operator's) ---

EVAL_PROBE = r"""
import json, os, sys
out = sys.argv[sys.argv.index("--out") + 1]
json.dump({"score": 1.0, "env": dict(os.environ)}, open(out, "w"))
"""


def test_evaluator_sees_the_allowlist_only(tmp_path, monkeypatch):
    """A hostile evaluation (a child started exactly as the built-in evaluator is) looks for the
    operator's secrets in its environment and finds none."""
    from a2c.contracts.service_config import EVALUATOR_MODULE
    from a2c.runtime.grader_service.evaluator import run_evaluation
    monkeypatch.setenv("A2C_SECRET_TEST", "operator-secret")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-operator")
    monkeypatch.setenv("A2C_TOKEN", "grader-token")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("A2C_JUDGE_API_KEY", "judge-key")   # the judge grader needs its own key
    probe = tmp_path / "probe.py"
    probe.write_text(EVAL_PROBE)
    out = tmp_path / "eval" / "1.json"
    outcome = run_evaluation([sys.executable, str(probe), "-m", EVALUATOR_MODULE],
                             grader_cfg_path=tmp_path / "g.json", model=tmp_path,
                             heldout=tmp_path / "h.jsonl", engine="auto", out_path=out,
                             timeout_s=30, log_path=tmp_path / "eval" / "1.log")
    assert outcome.error is None, outcome.error
    env = outcome.result["env"]
    assert "A2C_SECRET_TEST" not in env and "OPENAI_API_KEY" not in env
    assert "A2C_TOKEN" not in env
    assert env["HF_HUB_OFFLINE"] == "1" and env["A2C_JUDGE_API_KEY"] == "judge-key"
    assert env["HOME"] == str(tmp_path / "eval" / "home")
    assert (tmp_path / "eval" / "home").stat().st_mode & 0o077 == 0
    assert set(env) - {"PWD", "LC_CTYPE"} <= {
        "PATH", "HOME", "TMPDIR", "PYTHONUNBUFFERED", "LANG", "HF_HUB_OFFLINE",
        "A2C_JUDGE_API_KEY"} | set(k for k in os.environ if k in (
            "LC_ALL", "TZ", "LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS",
            "MKL_NUM_THREADS", "TOKENIZERS_PARALLELISM", "A2C_CACHE", "HF_HOME",
            "A2C_TORCH_THREADS", "A2C_PROJECT_ROOT", "TRANSFORMERS_OFFLINE",
            "HF_DATASETS_OFFLINE", "HF_HUB_CACHE", "NVIDIA_VISIBLE_DEVICES")) | set(
            k for k in os.environ if k.startswith(("VLLM_", "A2C_JUDGE_"))), sorted(env)


def test_evaluator_env_passes_named_and_judge_key_variables(tmp_path):
    from a2c.runtime.grader_service.evaluator import evaluator_env
    config = tmp_path / "judge.json"
    config.write_text(json.dumps({"base_url": "http://x", "api_key_env": "MY_JUDGE_KEY"}))
    env = evaluator_env(tmp_path / "home", {
        "A2C_JUDGE_CONFIG": str(config), "MY_JUDGE_KEY": "k", "OTHER_KEY": "no",
        "A2C_EVAL_PASS_ENV": "SITE_PROXY, ", "SITE_PROXY": "p", "PATH": "/evil"})
    assert env["MY_JUDGE_KEY"] == "k" and env["SITE_PROXY"] == "p"
    assert "OTHER_KEY" not in env and not env["PATH"].startswith("/evil")


# --- the evaluator's own box (runtime/sandbox/evaluator_box.py) ---

BOX_PROBE = r"""
import json, os, socket, subprocess, sys
arg = lambda name: sys.argv[sys.argv.index(name) + 1]
out, model, heldout = arg("--out"), arg("--model"), arg("--heldout")
grader_dir = os.path.dirname(heldout)
def read(path):
    try:
        return "READ %d" % len(open(path, "rb").read())
    except Exception as exc:
        return "ERR " + type(exc).__name__
def write(path):
    try:
        open(path, "a").write("x")
        return "WROTE"
    except Exception as exc:
        return "ERR " + type(exc).__name__
status = open("/proc/self/status").read().splitlines()
caps = {l.split(":")[0]: l.split()[1] for l in status if l.startswith("Cap")}
try:
    socket.create_connection(("1.1.1.1", 80), timeout=2)
    net = "connected"
except OSError as exc:
    net = "ERR " + type(exc).__name__
child = subprocess.run(["grep", "CapEff", "/proc/self/status"], capture_output=True, text=True)
from a2c.runtime.grader_service.evaluate_one import _drop_ambient_caps
_drop_ambient_caps()   # what the built-in evaluator does first
after = subprocess.run(["grep", "CapEff", "/proc/self/status"], capture_output=True, text=True)
from a2c.runtime.graders import code_exec   # HumanEval's own bubblewrap, nested in the box
nested = code_exec.bwrap_available()
ran = code_exec.run_program("assert 6 * 7 == 42", mode="bubblewrap") if nested else None
# again after a few children moved the next pid on: the nested bubblewrap finds its child in
# /proc whatever number it gets (a pid namespace of the box's own over the host's /proc failed
# for the numbers no host process had)
for spawned in range(6):
    if not nested or getattr(ran, "status", None) != "passed":
        break
    for _ in range(spawned):
        subprocess.run(["true"])
    ran = code_exec.run_program("assert 6 * 7 == 42", mode="bubblewrap")
json.dump({"score": 1.0, "after_caps": after.stdout.split()[-1], "nested": nested,
           "nested_out": getattr(ran, "status", None), "uid": os.getuid(), "caps": caps, "net": net,
           "child_caps": child.stdout.split()[-1],
           "heldout": read(heldout), "token": read(os.path.join(grader_dir, "token")),
           "service": read(os.path.join(grader_dir, "service.json")),
           "w_model": write(os.path.join(model, "config.json")),
           "w_heldout": write(heldout), "w_journal": write(os.path.join(grader_dir, "x")),
           "run_dir": read(os.path.join(os.path.dirname(grader_dir), "run.json")),
           "env": sorted(k for k in os.environ if "SECRET" in k)}, open(out, "w"))
"""


def _boxed_evaluation(tmp_path, command, grader, probe: str | None = None):
    from a2c.runtime.grader_service.evaluator import run_evaluation
    run = tmp_path / "run"
    (run / "grader" / "eval").mkdir(parents=True)
    (run / "run.json").write_text("{}")
    model = run / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    if probe:   # the hostile evaluator's code comes with the submission (visible in its box)
        (model / "probe.py").write_text(probe)
        command = [c.replace("PROBE", str(model / "probe.py")) for c in command]
    for name, text in (("token", "secret-token"), ("service.json", '{"token": "x"}'),
                       ("heldout.jsonl", '{"id": "h1", "prompt": "1+1", "answer": "2"}\n')):
        (run / "grader" / name).write_text(text)
        os.chmod(run / "grader" / name, 0o600)
    os.chmod(run, 0o700)
    os.chmod(run / "grader", 0o700)
    cfg = run / "grader" / "grader.effective.json"
    cfg.write_text(json.dumps(grader))
    return run, run_evaluation(command, grader_cfg_path=cfg, model=model,
                               heldout=run / "grader" / "heldout.jsonl", engine="transformers",
                               out_path=run / "grader" / "eval" / "1.json", timeout_s=120,
                               log_path=run / "grader" / "eval" / "1.log")


def test_hostile_evaluation_is_boxed(tmp_path, monkeypatch):
    from a2c.contracts.service_config import EVALUATOR_MODULE
    from a2c.runtime.sandbox import evaluator_box
    if not evaluator_box.available():
        pytest.skip("the evaluator's box needs root and bubblewrap")
    monkeypatch.setenv("A2C_SECRET_TEST", "operator-secret")
    run, outcome = _boxed_evaluation(tmp_path, [sys.executable, "PROBE", "-m", EVALUATOR_MODULE],
                                     {"kind": "exact_match"}, probe=BOX_PROBE)
    assert outcome.error is None, (outcome.error, (run / "grader/eval/1.log").read_text())
    r = outcome.result
    assert r["uid"] == evaluator_box.eval_ids().uid != agent_ids().uid
    assert r["caps"]["CapEff"] == r["caps"]["CapBnd"] == "0000000000000004"  # dac_read_search
    assert r["child_caps"] == "0000000000000004"   # the probe kept its ambient set...
    assert r["after_caps"] == "0000000000000000"   # ...which evaluate_one clears for children
    assert r["nested"] is True and r["nested_out"] == "passed", r   # HumanEval's sandbox works
    assert r["net"].startswith("ERR")
    assert r["heldout"].startswith("READ") and r["heldout"] != "READ 0"
    assert r["token"] in ("READ 0", "ERR PermissionError")
    assert r["service"] in ("READ 0", "ERR PermissionError")
    assert r["run_dir"] == "ERR FileNotFoundError"
    assert all(r[k].startswith("ERR") for k in ("w_model", "w_heldout", "w_journal")), r
    assert r["env"] == []
    assert (run / "grader" / "token").read_text() == "secret-token"
    assert not (run / "grader" / "eval" / "box-1").exists()


@pytest.mark.slow
def test_real_boxed_evaluation_of_the_tiny_model(tmp_path):
    """The built-in evaluator in its box scores the tiny model as it does unboxed."""
    from a2c.contracts.service_config import EVALUATOR_MODULE
    from a2c.runtime.sandbox import evaluator_box
    models = pytest.importorskip("a2c.runtime.models")
    grader = {"kind": "exact_match", "params": {"pattern": "####\\s*(-?[\\d,.]+)",
                                                "fallback": "none", "normalize": "number"},
              "inference": {"max_new_tokens": 8, "batch_size": 8, "temperature": 0.0}}
    command = [sys.executable, "-m", EVALUATOR_MODULE]
    run, _ = _boxed_evaluation(tmp_path, [sys.executable, "-c", "pass"], grader)
    import shutil
    shutil.rmtree(run / "model")
    shutil.copytree(models.prepare_builtin("tiny"), run / "model")
    from a2c.runtime.grader_service.evaluator import run_evaluation
    kwargs = dict(grader_cfg_path=run / "grader" / "grader.effective.json", model=run / "model",
                  heldout=run / "grader" / "heldout.jsonl", engine="transformers",
                  timeout_s=300, log_path=run / "grader" / "eval" / "2.log")
    boxed = run_evaluation(command, out_path=run / "grader" / "eval" / "2.json", **kwargs)
    assert boxed.error is None, (boxed.error, (run / "grader/eval/2.log").read_text()[-2000:])
    monkey = pytest.MonkeyPatch()
    monkey.setattr(evaluator_box, "boxed", lambda kind: False)
    try:
        plain = run_evaluation(command, out_path=run / "grader" / "eval" / "3.json", **kwargs)
    finally:
        monkey.undo()
    assert plain.error is None
    for key in ("score", "n_items", "items"):
        assert boxed.result[key] == plain.result[key], key


def test_box_argv_binds_only_the_evaluation_inputs(tmp_path):
    from a2c.runtime.sandbox import evaluator_box
    from a2c.runtime.sandbox.privileges import AgentIds
    if not evaluator_box.available():
        pytest.skip("the evaluator's box needs root, bubblewrap and setpriv")
    grader = tmp_path / "grader"
    grader.mkdir()
    for name in ("token", "service.json", "grader.effective.json"):
        (grader / name).write_text("x")
    argv = evaluator_box.box_argv(["python", "-m", "x"], model=tmp_path / "m",
                                  grader_cfg=grader / "grader.effective.json",
                                  heldout=Path(os.devnull), box_dir=grader / "eval" / "box-1",
                                  ids=AgentIds(65533, 65533), python_dirs=[])
    pairs = {(argv[i + 1], argv[i + 2]) for i, a in enumerate(argv) if a == "--ro-bind"}
    assert ("/dev", "/dev") not in pairs           # no held-out file: /dev/null, not a bind of /dev
    assert ("/dev/null", str(grader / "token")) in pairs
    assert ("/dev/null", str(grader / "service.json")) in pairs
    assert "--unshare-net" in argv and "--unshare-all" not in argv
    assert argv[argv.index("--cap-drop") + 1] == "ALL"
    assert "--bounding-set=-all,+dac_read_search" in argv
