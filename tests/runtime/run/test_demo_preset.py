"""Issue 25: `a2c demo` runs a preset fitted to a 2-core machine: one SFT stage, submitted once,
under a 2m30s agent budget, through the reference agent's own params (its spec's `params:`)."""

from __future__ import annotations

from a2c.cli import build_parser
from a2c.cli import run as run_cli


def test_demo_preset(monkeypatch):
    args = build_parser().parse_args(["demo"])
    assert args.budget == "2m30s" and args.agent == "ref-sft"
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
    assert opts.budget == "2m30s" and opts.backend == "local"
    assert opts.agent_params == {"stages": 1, "steps": 20} and opts.agent_env == {}
    # params the reference agent declares (its bundle) and documents in its module
    import json

    from a2c.agents.reference import sft
    from a2c.contracts.agent_params import effective
    from a2c.paths import project_root
    manifest = json.loads((project_root() / "generated" / "agents" / "ref-sft" / "agent.json")
                          .read_text(encoding="utf-8"))
    assert effective(manifest["agent"], opts.agent_params)["steps"] == 20
    assert all(f"`{name}`" in sft.__doc__ for name in opts.agent_params)
    other = build_parser().parse_args(["demo", "--agent", "ref-grpo"])
    try:
        run_cli.handle_demo(other)
    except SystemExit:
        pass
    assert seen["opts"].agent_params == {} and seen["opts"].agent_env == {}
