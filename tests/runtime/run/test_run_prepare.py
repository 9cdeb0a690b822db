"""Preparing a run directory: layout, what the agent gets, what only the grader gets."""

from __future__ import annotations

import json
import stat

import pytest

from a2c.contracts.bundle import Bundle
from a2c.errors import RunError
from a2c.paths import project_root
from a2c.runtime import run as run_mod


def _prepare(tmp_path, **kw):
    opts = run_mod.RunOptions(bundle=kw.pop("bundle", "arith"), agent=kw.pop("agent", "ref-sft"),
                              model="tiny", budget="90s", runs_dir=tmp_path / "runs", seed=3,
                              mode=kw.pop("mode", "sft-only"), **kw)
    return run_mod.prepare(opts, report=lambda _: None)


def test_layout_and_separation(tmp_path):
    ctx = _prepare(tmp_path)
    run_dir = ctx.run_dir
    for sub in ("workspace", "grader", "logs", "results", "data", "bundle", "agent"):
        assert (run_dir / sub).is_dir(), sub
    Bundle.load(run_dir / "bundle")
    ws = run_dir / "workspace"
    assert (ws / "a2c_client.py").is_file() and (ws / "INSTRUCTIONS.md").is_file()
    assert (ws / "output").is_dir()
    mode_md = (ws / "MODE.md").read_text()
    assert mode_md.startswith((ws / "modes" / "sft-only.md").read_text())
    # the limits this run enforces, not the compiled task's (INSTRUCTIONS.md says 15m)
    limits = mode_md.split("## This run's limits", 1)[1]
    assert "| Wall clock | 1m30s (90 s)" in limits and "15m" not in limits
    assert "| Disk (workspace, /tmp and home together) | 200G (the default) |" in limits
    train = (run_dir / "data" / "train.jsonl").read_text().splitlines()
    heldout = (run_dir / "grader" / "heldout.jsonl").read_text().splitlines()
    assert len(train) == 2000 and len(heldout) == 100
    train_ids = {json.loads(line)["id"] for line in train}
    held_ids = {json.loads(line)["id"] for line in heldout}
    assert not train_ids & held_ids
    # the held-out data exists nowhere the agent is given
    for folder in (ws, run_dir / "data"):
        for path in folder.rglob("*"):
            if path.is_file():
                assert "test-0" not in path.read_text(errors="ignore") or path.name.endswith(".md")
    assert not (stat.S_IMODE((run_dir / "data" / "train.jsonl").stat().st_mode) & 0o222)
    token = run_dir / "grader" / "token"
    assert stat.S_IMODE(token.stat().st_mode) == 0o600
    assert stat.S_IMODE((run_dir / "grader" / "service.json").stat().st_mode) == 0o600
    service = json.loads((run_dir / "grader" / "service.json").read_text())
    for key in ("token", "socket_path", "host", "port", "deadline_unix", "max_submissions",
                "min_interval_s", "eval_timeout_s", "output_dir", "agent_output_dir",
                "workspace", "bundle", "heldout", "engine", "base_model", "baseline_cache"):
        assert key in service, key
    assert service["token"] == token.read_text()
    assert len(service["socket_path"]) < 108
    run = json.loads((run_dir / "run.json").read_text())
    assert run["task"] == "arith" and run["agent"] == "ref-sft" and run["seed"] == 3
    assert run["mode"] == "sft-only" and run["budget"]["wall_clock_s"] == 90
    assert len(run["base_model"]["fingerprint"]) == 64
    assert len(run["data"]["agent_fingerprint"]) == 64
    assert run["bundle_digest"] == Bundle.load(run_dir / "bundle").digest
    assert run["status"] == "prepared"
    assert (run_dir / "agent" / "prompt.rendered.md").read_text().strip()


def _prepare_via_cli(tmp_path, **kw):
    """Compiling a spec is the CLI's step (the runtime runs bundles only)."""
    from a2c.cli.run import prepare_from_refs
    opts = run_mod.RunOptions(bundle=kw.pop("bundle", "arith"), agent=kw.pop("agent", "ref-sft"),
                              model="tiny", budget="90s", runs_dir=tmp_path / "runs", seed=3,
                              mode=kw.pop("mode", "sft-only"), **kw)
    return prepare_from_refs(opts, lambda _: None)


def test_spec_file_is_compiled(tmp_path):
    spec = project_root() / "specs" / "tasks" / "arith.yaml"
    ctx = _prepare_via_cli(tmp_path, bundle=str(spec))
    assert Bundle.load(ctx.run_dir / "bundle").id == "arith"


def test_the_runtime_runs_bundles_only(tmp_path):
    spec = project_root() / "specs" / "tasks" / "arith.yaml"
    with pytest.raises(RunError, match="not a compiled task bundle"):
        _prepare(tmp_path, bundle=str(spec))
    assert not (tmp_path / "runs").exists()


def test_docker_without_engine_fails_before_writing(tmp_path, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    with pytest.raises(RunError, match="no Docker engine is reachable"):
        _prepare(tmp_path, backend="docker")
    assert not (tmp_path / "runs").exists()


def test_bad_mode_and_backend(tmp_path):
    with pytest.raises(RunError):
        _prepare(tmp_path, mode="dpo-only")
    with pytest.raises(RunError):
        _prepare(tmp_path, backend="vm")


def test_prepared_records_validate_against_their_schemas(tmp_path):
    from jsonschema import Draft202012Validator

    from a2c.contracts.schemas import load_schema
    ctx = _prepare(tmp_path)
    for name, rel in (("run_info", "run.json"), ("service_config", "grader/service.json")):
        record = json.loads((ctx.run_dir / rel).read_text())
        errors = list(Draft202012Validator(load_schema(name)).iter_errors(record))
        assert errors == [], (rel, [e.message for e in errors])
    bad = json.loads((ctx.run_dir / "run.json").read_text()) | {"seed": "three"}
    assert list(Draft202012Validator(load_schema("run_info")).iter_errors(bad))


def test_a_root_agent_without_bubblewrap_is_refused_before_anything_is_written(tmp_path,
                                                                               monkeypatch):
    import os
    if os.geteuid() != 0:
        pytest.skip("the refusal applies to a runtime running as root")
    monkeypatch.delenv("A2C_UNSAFE_ROOT_AGENT", raising=False)
    with pytest.raises(RunError, match="refusing to run the agent as root"):
        _prepare(tmp_path, use_bwrap=False)
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_mode_md_tells_the_limits_the_run_enforces(tmp_path):
    """The task's disk and memory limits and a driver budget reach MODE.md as the run holds them
    (limits_note.py); limits the task does not set are not listed."""
    from a2c.contracts.budget import Budget
    from a2c.runtime.run.limits_note import limits_section

    text = limits_section(Budget(wall_clock_s=3600, max_submissions=4, min_interval_s=30,
                                 eval_timeout_s=600, disk_mb=5120, memory_mb=2048, pids=200,
                                 driver_tokens=30000))
    assert "| Wall clock | 1h00m00s (3600 s)" in text and "| Submissions | at most 4 |" in text
    assert "| Disk (workspace, /tmp and home together) | 5G |" in text
    assert "| Memory | 2G |" in text and "| Processes | at most 200 |" in text
    assert "| Driver model tokens | 30000 |" in text
    assert "CPUs" not in text and "cost" not in text and "(the default)" not in text

