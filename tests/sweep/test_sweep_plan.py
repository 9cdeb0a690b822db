"""`a2c sweep` without running anything: the trial's `a2c run` command, the resume policy read
from run directories, --dry-run's fit and plan, the install hint without Ray, the layering."""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

import pytest

from a2c.contracts.trial import Trial
from a2c.sweep.plan import PlanEstimate, TrialPlan, assumed_cluster, estimate_hours, fits, unfit
from a2c.sweep.state import DONE, ENDED, FRESH, RESUME, move_aside, outcome, read_state

REPO = Path(__file__).resolve().parents[2]


def _trial(**kw) -> Trial:
    base = dict(id="arith-ref-sft-free-s1-0123456789", group="main", task="arith",
                agent="ref-sft", mode="sft-only", seed=1, task_digest="t", agent_digest="a",
                overrides={"budget": {"wall_clock_s": 40, "driver_tokens": 5000},
                           "base_model": "tiny"},
                resources={"agent": {"CPU": 1.0, "GPU": 1.0}, "grader": {"CPU": 1.0, "GPU": 1.0}},
                wall_clock_s=40)
    base.update(kw)
    return Trial(**base)


def test_a_trial_runs_a2c_run_with_its_content(tmp_path):
    p = TrialPlan(_trial(driver="openai/gpt-5-codex"), tmp_path / "runs" / "x", tmp_path / "t",
                  tmp_path / "a")
    argv = p.run_argv()
    assert argv[:4] == ["run", str(tmp_path / "t"), "--agent", str(tmp_path / "a")]
    flags = dict(zip(argv[4::2], argv[5::2]))
    assert flags == {"--mode": "sft-only", "--seed": "1", "--runs-dir": str(tmp_path / "runs"),
                     "--run-id": "arith-ref-sft-free-s1-0123456789",
                     "--driver": "openai/gpt-5-codex", "--budget": "40s",
                     "--driver-tokens": "5000", "--model": "tiny"}
    assert p.resume_argv() == ["run", "--resume", str(tmp_path / "runs" / "x")]
    # ...and the CLI accepts exactly these flags.
    from a2c.cli import build_parser
    args = build_parser().parse_args(argv)
    assert args.run_id == "arith-ref-sft-free-s1-0123456789" and args.driver_tokens == 5000


def _run_json(run_dir: Path, **info) -> Path:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "run.json").write_text(json.dumps(info))
    return run_dir


def test_the_resume_policy_reads_the_run_directory(tmp_path):
    assert read_state(tmp_path / "none").action == FRESH
    half = tmp_path / "half"
    half.mkdir()
    assert read_state(half).action == FRESH          # died while preparing: no run.json
    assert move_aside(half) == tmp_path / "half.aborted-1" and not half.exists()
    assert read_state(_run_json(tmp_path / "r", status="running")).action == RESUME
    assert read_state(_run_json(tmp_path / "p", status="prepared")).action == RESUME
    for status in ENDED:
        assert read_state(_run_json(tmp_path / status, status=status)).action == DONE


def test_a_crashed_agent_is_a_failed_trial_not_a_zero(tmp_path):
    run = _run_json(tmp_path / "r", status="agent_failed", best_score=0.0, baseline_score=0.0,
                    agent_exit={"returncode": 3, "reason": "exited"},
                    agent_log_tail=["Traceback", "RuntimeError: CUDA out of memory"])
    out = outcome(run, verify=lambda _: None)
    assert out.status == "failed"
    assert out.reason == "agent failed (exit 3, exited): RuntimeError: CUDA out of memory"
    fine = _run_json(tmp_path / "f", status="finished", best_score=42.0)
    assert outcome(fine, verify=lambda _: None).status == "finished"
    bad = outcome(fine, verify=lambda _: "events.jsonl:3: hash chain broken")
    assert (bad.status, bad.reason) == (
        "failed", "record does not verify: events.jsonl:3: hash chain broken")


def test_the_ended_statuses_are_the_runtimes():
    from a2c.contracts.run_info import ENDED as RUNTIME_ENDED
    assert ENDED is RUNTIME_ENDED      # one definition (a2c.contracts.run_info)


def test_fit_and_plan_on_a_stated_cluster():
    nodes = assumed_cluster("4x64x8")
    assert len(nodes) == 4 and nodes[0].resources == {"CPU": 64.0, "GPU": 8.0}
    ok = TrialPlan(_trial(wall_clock_s=12 * 3600), Path("r"), Path("t"), Path("a"))
    huge = TrialPlan(_trial(id="big", resources={"agent": {"GPU": 8.0}, "grader": {"GPU": 1.0}}),
                     Path("r"), Path("t"), Path("a"))
    assert fits(ok.trial, nodes[0]) and not fits(huge.trial, nodes[0])
    assert unfit([ok, huge], nodes) == [huge]
    est = estimate_hours([ok] * 40, nodes)
    # 2 GPUs per trial (agent + grader): 4 per node, 16 at a time; 40 trials are 3 waves of 12 h.
    assert est == PlanEstimate(trials=40, width=16, trial_hours=480.0, gpu_hours=960.0,
                               waves=3, wall_hours=36.0)
    with pytest.raises(Exception, match="NODESxCPUSxGPUS"):
        assumed_cluster("four nodes")


def test_dry_run_says_which_trials_no_node_fits(run_cli_sweep):
    code, out, _ = run_cli_sweep("sweep", "paper", "--dry-run", "--num-cpus", "2",
                                 "--num-gpus", "0")
    assert code == 1
    assert "234 trial(s) no node could ever fit" in out
    code, out, _ = run_cli_sweep("sweep", "paper", "--dry-run", "--assume-cluster", "4x64x8")
    assert code == 0 and "every trial fits" in out
    assert "234 trials, 16 at a time" in out and "5616 GPU-hours" in out
    code, out, _ = run_cli_sweep("sweep", "builtin", "--dry-run", "--num-cpus", "2")
    assert code == 0 and "6 trials, 2 at a time" in out


@pytest.fixture
def run_cli_sweep(capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("COLUMNS", "250")
    from a2c.cli import main

    def run(*args):
        code = main([str(a) for a in args])
        out = capsys.readouterr()
        return code, out.out, out.err
    return run


def test_without_ray_the_sweep_says_how_to_install_it(run_cli_sweep, monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "ray", None)       # `import ray` raises ImportError
    code, _, err = run_cli_sweep("sweep", "builtin", "--runs-dir", tmp_path / "runs")
    assert code != 0
    assert err.strip().splitlines() == [
        "a2c sweep: error: pre-flight: Ray: not installed: a2c sweep cannot run "
        "(fix: pip install 'a2c[sweep]')"]
    assert not (tmp_path / "runs").exists()


def test_the_sweep_package_imports_only_the_contracts():
    """a2c/sweep runs `a2c run` in a subprocess; compiling and reading records is the CLI's."""
    forbidden = ("a2c.compiler", "a2c.runtime", "a2c.analysis", "a2c.cli")
    offenders = []
    for path in sorted((REPO / "a2c" / "sweep").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) and node.module and \
                node.level == 0 else []
            offenders += [f"{path.name}:{node.lineno}: {n}" for n in names
                          if n.startswith(forbidden)]
    assert offenders == []


def test_the_evaluator_takes_the_graders_devices(tmp_path):
    from a2c.runtime.grader_service.evaluator import evaluator_env
    assert evaluator_env(tmp_path / "h2", {"CUDA_VISIBLE_DEVICES": "1"})["CUDA_VISIBLE_DEVICES"] \
        == "1"


def test_ray_ids_become_run_flags():
    from a2c.sweep.engine import device_flags
    assert device_flags([0], [1]) == ["--gpus", "0", "--grader-gpus", "1"]
    assert device_flags([], None) == ["--gpus", "none", "--grader-gpus", "none"]
