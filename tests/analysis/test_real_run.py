"""A report for a run recorded by the real runtime (tiny model, a shell "agent" that writes a
training script, submits a copy of the base model and then a broken folder)."""

from __future__ import annotations

from pathlib import Path

import pytest

from a2c.analysis.report import write_report
from a2c.analysis.verify import verify_run
from a2c.contracts.bundle import write_agent_manifest

AGENT = r'''
cat > train_sft.py <<'PY'
from trl import SFTConfig, SFTTrainer
cfg = SFTConfig(output_dir="output/m1", learning_rate=2e-5, num_train_epochs=2)
SFTTrainer(model="/model", args=cfg).train()
PY
cp -r "$A2C_BASE_MODEL" "$A2C_OUTPUT_DIR/m1"
python3 a2c_client.py submit "$A2C_OUTPUT_DIR/m1" --note copy
sleep 5
mkdir -p "$A2C_OUTPUT_DIR/broken"; echo nope > "$A2C_OUTPUT_DIR/broken/README"
python3 a2c_client.py submit "$A2C_OUTPUT_DIR/broken" --note broken
sleep 15
'''


def _shell_agent(root: Path) -> Path:
    folder = root / "agents" / "shell"
    folder.mkdir(parents=True)
    (folder / "launch.sh").write_text("#!/usr/bin/env bash\n" + AGENT)
    (folder / "prompt.md").write_text("{{ instructions }}\n")
    agent = {"id": "shell", "title": "shell", "type": "reference",
             "launch": {"command": "bash", "env": {}, "pass_env": []},
             "driver": {"required": False, "default": None, "models": []},
             "transcript": {"source": "stdout", "format": "text", "ext": "log", "path": None},
             "prompt": "{{ instructions }}\n"}
    write_agent_manifest(folder, agent, "test")
    return folder


@pytest.mark.slow
def test_report_on_a_real_run(tmp_path):
    pytest.importorskip("torch")
    run_mod = pytest.importorskip("a2c.runtime.run")
    opts = run_mod.RunOptions(bundle="arith", agent=str(_shell_agent(tmp_path)), model="tiny",
                              budget="60s", runs_dir=tmp_path / "runs")
    ctx = run_mod.prepare(opts, report=lambda _: None)
    run_mod.execute(ctx, report=lambda _: None)
    run_dir = Path(ctx.run_dir)
    assert verify_run(run_dir).ok
    report, paths = write_report(run_dir, tmp_path / "report")
    assert report["metrics"]["n_submissions"] == 2
    assert report["metrics"]["base_model_copies"] == 1
    categories = {f["submission_id"]: f["category"] for f in report["failures"]}
    assert categories["1"] == "base_copy" and categories["2"] == "load_failure"
    # the route is what ran (the host-side process record): train_sft.py was written, never run
    first_route = report["route"]["per_submission"][0]
    assert report["route"]["executed"]["evidence"] == "process record"
    assert first_route["methods"] == [] and first_route["attribution"] == "none", first_route
    assert report["run"]["base_model"] == "builtin:tiny"
    first = report["timeline"][0]
    assert "a2c_client.py" not in [f["path"] for f in first["files_changed"]]
    assert paths.html.stat().st_size > 5000
