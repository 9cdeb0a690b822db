"""Issue 25: `a2c demo` runs a preset fitted to a 2-core machine: one SFT stage, submitted once,
under a 4-minute agent budget, through the reference agent's own knobs (no new variables)."""

from __future__ import annotations

from a2c.cli import build_parser
from a2c.cli import run as run_cli


def test_demo_preset(monkeypatch):
    args = build_parser().parse_args(["demo"])
    assert args.budget == "4m" and args.agent == "ref-sft"
    seen = {}

    def fake_prepare(opts, progress):
        seen["opts"] = opts
        raise SystemExit(0)

    monkeypatch.setattr(run_cli, "prepare_from_refs", fake_prepare)
    try:
        run_cli.handle_demo(args)
    except SystemExit:
        pass
    opts = seen["opts"]
    assert opts.budget == "4m" and opts.backend == "local"
    assert opts.agent_env == {"A2C_REF_STAGES": "1", "A2C_REF_SFT_STEPS": "20"}
    # knobs the reference agent already reads, documented in its module
    from a2c.runtime.agents import sft
    assert all(name in sft.__doc__ for name in opts.agent_env)
    other = build_parser().parse_args(["demo", "--agent", "ref-grpo"])
    try:
        run_cli.handle_demo(other)
    except SystemExit:
        pass
    assert seen["opts"].agent_env == {}
