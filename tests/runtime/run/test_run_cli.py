"""`a2c run` / `a2c demo` argument handling (fast; no run is started)."""

from __future__ import annotations

from a2c.cli import build_parser, main


def test_parsers_registered():
    parser = build_parser()
    args = parser.parse_args(["run", "arith", "--agent", "ref-sft", "--budget", "5m", "--mode",
                              "sft-only", "--seed", "2"])
    assert args.handler and args.bundle == "arith" and args.mode == "sft-only"
    assert parser.parse_args(["demo"]).handler


def test_run_needs_bundle_and_agent(capsys):
    assert main(["run", "arith"]) == 1
    assert "usage: a2c run" in capsys.readouterr().err


def test_resume_of_a_missing_run_dir(tmp_path, capsys):
    assert main(["run", "--resume", str(tmp_path / "nope")]) == 1
    assert "not a run directory" in capsys.readouterr().err


def test_unknown_agent_is_a_clean_error(tmp_path, capsys):
    code = main(["run", "arith", "--agent", "no-such-agent", "--runs-dir", str(tmp_path)])
    assert code != 0
    err = capsys.readouterr().err
    assert "no-such-agent" in err and "Traceback" not in err
