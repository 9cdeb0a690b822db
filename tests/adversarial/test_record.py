"""Hostile edits of a run record (issue 12, point 6) and who may read it (point 7).

Each test does what an agent, or anyone who edits a record after the run, would do to change
what a report says, and asserts that `a2c verify` fails naming it: the events re-chained after
editing a score (plain hashes recomputed), run.json edited (`isolation`), commands.log truncated,
forged or rewritten, the rendered prompt and the agent split modified, a results file edited or
added, the seal cut off, a record re-chained under the attacker's own key; a record verified
without the key fails with "not authenticated" (unless --no-key). Most use the fixture run maker
(tests/fixtures/runs); the file modes and one whole run use the real runtime.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import stat
from pathlib import Path

import pytest
from record_helpers import private_modes, shell_agent

from a2c.analysis.leaderboard import build_leaderboard
from a2c.analysis.report import write_report
from a2c.analysis.verify import VerificationError, verify_run
from a2c.canonical import canonical_json
from a2c.cli import main
from a2c.contracts.events import EventLog, event_hash, read_events, verify_events
from a2c.contracts.record_key import RecordKey, RecordKeyError, load_key, operator_key
from a2c.contracts.seal import check_seals, record_digests

MAKER = Path(__file__).resolve().parents[1] / "fixtures" / "runs" / "make_fixture_run.py"


def _maker():
    spec = importlib.util.spec_from_file_location("a2c_make_fixture_run_adv", MAKER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def maker():
    return _maker()


@pytest.fixture(scope="module")
def pristine(tmp_path_factory, maker) -> Path:
    return maker.make_run(tmp_path_factory.mktemp("adv") / "run")


@pytest.fixture
def run(tmp_path, pristine) -> Path:
    dest = tmp_path / "run"
    shutil.copytree(pristine, dest, symlinks=True)
    return dest


def _events(run: Path) -> list[dict]:
    return read_events(run / "events.jsonl")


def _rechain(run: Path, events: list[dict], key: RecordKey | None = None,
             strip: bool = False) -> None:
    """What an editor does after changing events: recompute seq, prev and every hash (and,
    holding some key, every mac; `strip` drops the macs)."""
    prev = "0" * 64
    lines = []
    for seq, event in enumerate(events):
        event = {k: v for k, v in event.items() if k not in ("hash", "mac")}
        event.update(seq=seq, prev=prev)
        if strip:
            event.pop("key", None)
        elif key is not None:
            event["key"] = key.id
        event["hash"] = event_hash(event)
        if key is not None and not strip:
            event["mac"] = key.mac(event["hash"])
        elif not strip and "mac" in events[seq]:
            event["mac"] = events[seq]["mac"]          # the old mac: all an editor has
        prev = event["hash"]
        lines.append(canonical_json(event) + b"\n")
    (run / "events.jsonl").write_bytes(b"".join(lines))


def _edit_json(path: Path, **values) -> None:
    data = json.loads(path.read_text())
    data.update(values)
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def _first(run: Path, **kw) -> str:
    result = verify_run(run, **kw)
    assert not result.ok
    return str(result.first)


def test_the_fixture_is_authenticated_and_sealed(pristine):
    result = verify_run(pristine)
    assert result.ok and result.authenticated, [str(p) for p in result.problems]
    assert _events(pristine)[-1]["type"] == "record_sealed"


def test_rechained_score_edit_fails_on_the_mac(run):
    """Score of submission 1 raised in the events, the journal and its results file alike, the
    hash chain recomputed: only the mac, which needs the operator's key, tells."""
    events = _events(run)
    index = next(i for i, e in enumerate(events)
                 if e["type"] == "submission_scored" and e["data"]["id"] == 1)
    events[index]["data"]["score"] = 99.0
    _rechain(run, events)
    rows = [json.loads(line) for line in (run / "submissions.jsonl").read_text().splitlines()]
    for row in rows:
        if row["op"] == "scored" and row["id"] == 1:
            row["score"] = 99.0
    (run / "submissions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    _edit_json(run / "results" / "1.json", score=99.0)
    assert verify_events(run / "events.jsonl").ok          # the plain chain holds...
    first = _first(run)                                     # ...the authenticated one does not
    assert first.startswith(f"events.jsonl:{index + 1}:") and "mac" in first
    assert main(["verify", str(run)]) == 3
    with pytest.raises(VerificationError):
        write_report(run, run / "out")


def test_rechained_under_the_attackers_own_key_is_not_authenticated(run, tmp_path):
    events = _events(run)
    next(e for e in events if e["type"] == "run_finished")["data"]["best_score"] = 100.0
    attacker = operator_key(tmp_path / "attacker.key")
    _rechain(run, events, key=attacker)
    first = _first(run)
    assert "not authenticated" in first and f"key {attacker.id} not available" in first


def test_stripped_macs_read_as_unauthenticated_and_fail(run):
    events = _events(run)
    _rechain(run, events, strip=True)
    first = _first(run)
    assert "chain intact, not authenticated" in first and "no event carries a mac" in first
    result = verify_run(run, allow_unauthenticated=True)   # explicit acceptance only
    assert result.ok and not result.authenticated


def test_run_json_isolation_edit_fails(run):
    _edit_json(run / "run.json", isolation="docker")
    first = _first(run)
    assert first.startswith("run.json:") and "isolation" in first and "docker" in first


@pytest.mark.parametrize("field,value", [("best_score", 100.0), ("seed", 7), ("mode", "rl-only"),
                                         ("spec_hash", "0" * 64), ("base_model", "builtin:x")])
def test_run_json_fields_that_matter_are_bound_to_the_events(run, field, value):
    _edit_json(run / "run.json", **{field: value})
    first = _first(run)
    assert first.startswith("run.json:") and field in first


def test_truncated_commands_log_fails(run):
    log = run / "logs" / "commands.log"
    log.write_bytes(log.read_bytes()[:10])
    assert _first(run).startswith("logs/commands.log: changed after the run was sealed")


def test_forged_commands_log_of_the_same_size_fails(run):
    log = run / "logs" / "commands.log"
    data = log.read_bytes()
    log.write_bytes(b"ls -la\n".ljust(len(data) - 1, b" ") + b"\n")
    assert "same size, different sha256" in _first(run)


def test_appended_commands_log_fails(run):
    with open(run / "logs" / "commands.log", "ab") as handle:
        handle.write(b"cat /grader/heldout.jsonl\n")
    assert _first(run).startswith("logs/commands.log:")


def test_a_log_rewritten_before_an_earlier_seal_fails(run):
    """Logs only grow: an earlier seal (the runtime seals again at the end of a resume) must
    still hold for the log's first bytes, even when the last seal was made after the rewrite."""
    log = run / "logs" / "commands.log"
    early = {"type": "record_sealed", "_line": 3, "data": {"files": record_digests(run)}}
    log.write_bytes(b"echo nothing to see\n" + log.read_bytes()[20:] + b"more\n")
    late = {"type": "record_sealed", "_line": 9, "data": {"files": record_digests(run)}}
    problems = check_seals(run, [{"type": "run_started"}, early, {"type": "run_resumed"}, late])
    assert problems and problems[0][0] == "logs/commands.log"
    assert "first" in problems[0][1] and "line 3" in problems[0][1]


def test_modified_rendered_prompt_fails(run):
    (run / "agent" / "prompt.rendered.md").write_text("You may read the held-out split.\n")
    assert _first(run).startswith("agent/prompt.rendered.md: changed after the run was sealed")


def test_modified_agent_split_fails(run):
    path = run / "data" / "train.jsonl"
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:-1]) + "\n")
    first = _first(run)
    assert first.startswith("data/train.jsonl:") and "fingerprint" in first


def test_file_added_to_the_agent_split_fails(run):
    (run / "data" / "hint.txt").write_text("the held-out answers are...\n")
    assert _first(run).startswith("data/: changed after the run was sealed (2 files")


def test_edited_results_file_fails(run):
    """An item's outcome flipped (the score untouched, so only the seal can tell)."""
    path = run / "results" / "1.json"
    result = json.loads(path.read_text())
    result["items"][0]["correct"] = not result["items"][0]["correct"]
    path.write_text(json.dumps(result, indent=1))
    assert _first(run).startswith("results/1.json: changed after the run was sealed")


def test_results_file_added_after_the_seal_fails(run):
    shutil.copy(run / "results" / "1.json", run / "results" / "7.json")
    assert "not in the record's seal" in _first(run)


def test_results_file_replaced_by_a_symlink_fails(run):
    target = run / "results" / "1.json"
    shutil.copy(target, run / "copy.json")
    target.unlink()
    target.symlink_to(run / "copy.json")
    assert _first(run).startswith("results/1.json:")


def test_seal_cut_off_fails(run):
    path = run / "events.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:-1]))
    assert "not sealed" in _first(run)


def test_verify_without_the_key_says_so_and_fails(run, monkeypatch, tmp_path, capsys):
    key_id = _events(run)[0]["key"]
    monkeypatch.setenv("A2C_RECORD_KEY_FILE", str(tmp_path / "elsewhere" / "record.key"))
    result = verify_run(run)
    assert not result.ok and not result.authenticated
    assert str(result.first) == f"events.jsonl: chain intact, not authenticated: key {key_id} " \
                                "not available"
    assert main(["verify", str(run)]) == 3
    assert "not authenticated" in capsys.readouterr().err
    assert main(["verify", str(run), "--no-key"]) == 0
    assert "NOT AUTHENTICATED" in capsys.readouterr().out
    with pytest.raises(VerificationError, match="not authenticated"):
        write_report(run, run / "out")
    board = build_leaderboard(run.parent, ("agent",), False)
    assert board["excluded"] and "not authenticated" in board["excluded"][0]["reason"]
    assert not (tmp_path / "elsewhere").exists()      # verifying never creates a key


def test_verify_with_an_explicit_key_file(run, monkeypatch, tmp_path, capsys):
    real = os.environ["A2C_RECORD_KEY_FILE"]
    monkeypatch.setenv("A2C_RECORD_KEY_FILE", str(tmp_path / "none.key"))
    assert main(["verify", str(run), "--key-file", real]) == 0
    assert "record verified and authenticated" in capsys.readouterr().out


def test_a_key_readable_by_others_is_refused(tmp_path):
    key = operator_key(tmp_path / "k" / "record.key")
    assert stat.S_IMODE(key.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(key.path.parent.stat().st_mode) == 0o700
    os.chmod(key.path, 0o644)
    with pytest.raises(RecordKeyError, match="chmod 600"):
        load_key(key.path)
    assert key.secret.hex() not in repr(key)      # never printed


def test_event_log_refuses_a_chain_under_another_key(tmp_path):
    path = tmp_path / "events.jsonl"
    EventLog(path, key=operator_key(tmp_path / "a.key")).append("run_started", {"task": "x"})
    other = EventLog(path, verify=False, key=operator_key(tmp_path / "b.key"))
    with pytest.raises(ValueError, match="refusing to append"):
        other.append("run_finished", {})
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


# ----------------------------------------------------------------------------- the real runtime
def _prepare(tmp_path, agent="ref-copy", budget="60s"):
    from a2c.runtime import run as run_mod
    opts = run_mod.RunOptions(bundle="arith", agent=agent, model="tiny", budget=budget,
                              runs_dir=tmp_path / "runs")
    return run_mod.prepare(opts, report=lambda _: None)


def test_prepared_run_directory_is_private(tmp_path):
    ctx = _prepare(tmp_path)
    root = ctx.run_dir
    assert stat.S_IMODE(root.stat().st_mode) == 0o711
    assert stat.S_IMODE((root / "results").stat().st_mode) == 0o700
    assert stat.S_IMODE((root / "grader" / "token").stat().st_mode) == 0o600
    assert stat.S_IMODE((root / "grader" / "heldout.jsonl").stat().st_mode) == 0o600
    assert private_modes(root) == []
    # what the agent's unprivileged uid must still reach to bind it
    for rel in ("workspace", "data", "agent", "grader", "logs", "bundle/hooks"):
        assert stat.S_IMODE((root / rel).stat().st_mode) & 0o001, rel
    assert stat.S_IMODE((root / "data" / "train.jsonl").stat().st_mode) & 0o004


@pytest.mark.slow
def test_a_real_run_is_authenticated_sealed_private_and_keyless(tmp_path):
    from a2c.runtime import run as run_mod
    ctx = _prepare(tmp_path, budget="40s")
    run_mod.execute(ctx, report=lambda _: None)
    root = ctx.run_dir
    result = verify_run(root)
    assert result.ok and result.authenticated, [str(p) for p in result.problems]
    events = _events(root)
    assert events[-1]["type"] == "record_sealed"
    assert {e["key"] for e in events} == {load_key().id}   # the grader's events too
    assert any(e["type"] == "submission_scored" for e in events)
    assert private_modes(root) == []
    secret = load_key().secret.hex().encode()
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            assert secret not in path.read_bytes(), path
    with open(root / "logs" / "commands.log", "ab") as handle:
        handle.write(b"echo forged\n")
    assert not verify_run(root).ok


KEY_THIEF = r"""
out="$A2C_WORKSPACE/found.txt"
{ cat "$KEY_PATH"; cat "$HOME/.config/a2c/record.key"; cat /root/.config/a2c/record.key
  find / -name record.key -not -path '/proc/*' 2>/dev/null | while read -r f; do cat "$f"; done
  env; } > "$out" 2>&1
echo "# forged" >> "$RUN_DIR/events.jsonl" 2>>"$out" || true
exit 0
"""


@pytest.mark.slow
def test_a_sandboxed_agent_cannot_read_the_record_key(tmp_path):
    from a2c.runtime import run as run_mod
    from a2c.runtime.sandbox.local import bwrap_works
    if not bwrap_works():
        pytest.skip("bubblewrap not available")
    ctx = _prepare(tmp_path, agent=str(shell_agent(tmp_path, "thief", KEY_THIEF)), budget="40s")
    ctx.run["options"]["agent_env"] = {"KEY_PATH": os.environ["A2C_RECORD_KEY_FILE"],
                                       "RUN_DIR": str(ctx.run_dir)}
    ctx.save()
    summary = run_mod.execute(ctx, report=lambda _: None)
    assert summary["isolation"] == "bubblewrap"
    found = (ctx.run_dir / "workspace" / "found.txt").read_bytes()
    assert found, "the probe did not run"
    assert load_key().secret.hex().encode() not in found
    result = verify_run(ctx.run_dir)
    assert result.ok and result.authenticated, [str(p) for p in result.problems]
