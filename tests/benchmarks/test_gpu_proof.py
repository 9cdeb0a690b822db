"""benchmarks/gpu_proof.py's pure parts (issue 24, point 6): its options, the probe's JSON (the
probe itself run here, outside any sandbox), a run's entry and checks from a faked run folder,
the summary, and the probe agent's bundle. The whole proof needs a GPU machine (or, rehearsed,
root and fake device nodes): not run here."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from a2c.paths import project_root

SPEC = importlib.util.spec_from_file_location(
    "gpu_proof", project_root() / "benchmarks" / "gpu_proof.py")
gpu_proof = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(gpu_proof)


def test_options_defaults_and_the_rehearsal():
    args = gpu_proof.parse_args([])
    assert args.runs == ["probe", "scaffold", "ref"] and args.backends is None
    assert (args.scaffold, args.agent, args.driver) == ("claude-code", "ref-sft",
                                                        "scripted:sft-recipe")
    assert args.gpus == "0" and args.grader_gpus is None and args.model is None
    args = gpu_proof.parse_args(["--rehearse", "--backends", "local,docker",
                                 "--agent-env", "SFT_STEPS=10"])
    assert args.runs == ["probe"] and args.model == "tiny"
    assert (args.gpus, args.grader_gpus) == ("1", "0")
    assert args.backends == ["local", "docker"] and args.agent_env == {"SFT_STEPS": "10"}
    assert gpu_proof.parse_args(["--agent-param", "steps=10"]).agent_param == {"steps": "10"}


@pytest.mark.parametrize("argv", [["--runs", "probe,nope"], ["--backends", "k8s"],
                                  ["--agent-env", "NOEQUALS"], ["--agent-param", "steps"],
                                  ["--rehearse", "--model", "HuggingFaceTB/SmolLM2-135M"]])
def test_bad_options_are_refused(argv):
    with pytest.raises(SystemExit):
        gpu_proof.parse_args(argv)


def test_the_probe_runs_and_parses(tmp_path):
    """PROBE_PY as the sandbox runs it (cwd = the workspace): its file and its stdout line."""
    proc = subprocess.run([sys.executable, "-c", gpu_proof.PROBE_PY], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    from_file = gpu_proof.parse_probe((tmp_path / gpu_proof.PROBE_FILE).read_text())
    from_log = gpu_proof.parse_probe("noise\n" + proc.stdout + "more noise\n")
    assert from_file == from_log
    assert {"uid", "cuda_visible_devices", "dev_nvidia", "proc_gpus", "torch"} <= set(from_file)
    torch_ = from_file["torch"]
    assert "error" in torch_ or {"is_available", "device_count", "names", "matmul"} <= set(torch_)
    assert gpu_proof.parse_probe("nothing here") is None
    assert gpu_proof.parse_probe("") is None


def _fake_run(root: Path, saw_nodes: list[str], cvd: str | None = "1",
              gpus: dict | None = None) -> Path:
    run_dir = root / "run"
    for name in ("workspace", "results", "logs"):
        (run_dir / name).mkdir(parents=True)
    (run_dir / "run.json").write_text(json.dumps({
        "run_id": "arith-gpu-probe-x", "agent": "gpu-probe", "status": "no_submission",
        "isolation": "bubblewrap", "baseline_score": 0.0, "best_score": None,
        "valid_submissions": 0, "agent_exit": {"returncode": 0, "reason": "exited"},
        "base_model": {"spec": {"builtin": "tiny"}},
        "gpus": gpus if gpus is not None else {"agent": ["1"], "grader": ["0"]}}))
    events = [("run_started", "2026-01-01T00:00:00.000Z"),
              ("baseline_scored", "2026-01-01T00:00:02.000Z"),
              ("agent_started", "2026-01-01T00:00:03.500Z"),
              ("agent_exited", "2026-01-01T00:00:13.500Z"),
              ("run_finished", "2026-01-01T00:00:14.000Z")]
    (run_dir / "events.jsonl").write_text("".join(
        json.dumps({"seq": i, "ts": ts, "type": t, "data": {}}) + "\n"
        for i, (t, ts) in enumerate(events)))
    (run_dir / "results" / "baseline.json").write_text(json.dumps(
        {"score": 0.0, "elapsed_s": 29.9, "cached": True, "backend": "transformers"}))
    (run_dir / "results" / "1.json").write_text(json.dumps(
        {"score": 12.0, "elapsed_s": 4.0, "backend": "vllm", "metrics": {"device": "cuda:0"}}))
    probe = {"uid": 65533, "cuda_visible_devices": cvd,
             "dev_nvidia": sorted(saw_nodes + ["nvidiactl", "nvidia-uvm"]), "proc_gpus": [],
             "torch": {"is_available": False, "device_count": 0, "names": [],
                       "matmul": {"ok": False}}}
    (run_dir / "logs" / "agent.log").write_text(gpu_proof.PROBE_PREFIX + json.dumps(probe) + "\n")
    return run_dir


def test_a_run_entry_from_its_folder(tmp_path):
    run_dir = _fake_run(tmp_path, ["nvidia1"])
    entry = gpu_proof.describe_run(run_dir, {"prepare": 0.5, "execute_start": None,
                                             "total": 15.0})
    assert entry["status"] == "no_submission" and entry["isolation"] == "bubblewrap"
    assert entry["score"] == {"baseline": 0.0, "best": None, "valid_submissions": 0}
    assert entry["gpus"] == {"agent": ["1"], "grader": ["0"]}
    assert entry["grader"]["cuda_visible_devices"] == "0"   # indices: no UUIDs published
    assert entry["grader"]["results"][0] == {"result": "1", "score": 12.0, "elapsed_s": 4.0,
                                             "cached": None, "backend": "vllm",
                                             "metrics.device": "cuda:0"}
    assert entry["timings_s"] == {"prepare": 0.5, "baseline": 2.0, "grader_start": 1.5,
                                  "agent": 10.0, "grading": 0.5, "total": 15.0,
                                  "evaluations_sum": 4.0}
    # the probe's JSON from its log when the workspace file is not there
    assert entry["agent_saw"]["gpu_nodes"] == ["nvidia1"]
    checks = gpu_proof.probe_checks(entry, rehearse=True)
    assert all(c["ok"] for c in checks), checks
    # the same on a GPU machine fails: CUDA must work there
    failed = [c["check"] for c in gpu_proof.probe_checks(entry, rehearse=False) if not c["ok"]]
    assert failed == ["torch.cuda works on exactly the agent's devices"]
    report = {"rehearse": True, "host": {"gpus": []}, "backends": ["local"],
              "runs": [{"backend": "local", "kind": "probe", **entry}], "checks": checks,
              "ok": True}
    text = "\n".join(gpu_proof.summary_lines(report))
    assert "agent saw: nodes ['nvidia1']" in text and "verdict: all checks pass" in text


def test_the_grader_node_inside_fails_the_checks(tmp_path):
    entry = gpu_proof.describe_run(_fake_run(tmp_path, ["nvidia0", "nvidia1"], cvd="0,1"))
    failed = {c["check"] for c in gpu_proof.probe_checks(entry, rehearse=True) if not c["ok"]}
    assert failed == {"agent sees exactly its GPU nodes", "agent sees none of the grader's nodes",
                      "CUDA_VISIBLE_DEVICES names the agent's devices"}


def test_the_probe_agent_is_a_verified_bundle(tmp_path):
    from a2c.runtime.run.resolve import load_agent
    folder = gpu_proof.probe_agent(tmp_path)
    agent = load_agent(folder)
    assert agent["id"] == gpu_proof.PROBE_ID
    assert gpu_proof.PROBE_PY.strip() in (folder / "launch.sh").read_text()


def test_without_gpus_the_sandbox_shows_none_and_cuda_is_off(tmp_path):
    """`--gpus none`: no node, CUDA_VISIBLE_DEVICES unset, CUDA unavailable: all as expected."""
    entry = gpu_proof.describe_run(_fake_run(tmp_path, [], cvd=None,
                                             gpus={"agent": [], "grader": []}))
    checks = gpu_proof.probe_checks(entry, rehearse=False)
    assert all(c["ok"] for c in checks), checks
    assert any("no GPU given" in c["check"] for c in checks)
