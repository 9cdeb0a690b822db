"""Hostile edits of a run record (issue 12, point 6), who may read it (point 7), and records
anyone can verify but only the operator can sign (issue 23).

Each test does what an agent, or anyone who edits a record after the run, would do to change
what a report says, and asserts that `a2c verify` fails naming it: the events re-chained after
editing a score (plain hashes recomputed), run.json edited (`isolation`), commands.log truncated,
forged or rewritten, the rendered prompt and the agent split modified, a results file edited or
added, the seal cut off, a record re-chained and re-signed under a fresh Ed25519 key of the
attacker's (rejected with the public key alone); a record verified without a key fails with "not
authenticated" (unless --no-key); an honest record verifies with only the public key, no private
key anywhere; a legacy HMAC record verifies with its --key-file, said so. Most use the fixture run
maker (tests/fixtures/runs); the file modes and one whole run use the real runtime.
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
from a2c.contracts.record_key import (
    LegacyHmacKey,
    RecordKeyError,
    SigningKey,
    generate_signing_key,
    load_signing_key,
    operator_key,
    public_key_file,
    record_key_status,
    signing_key_file,
    trusted_keys_dir,
)
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


def _rechain(run: Path, events: list[dict], key: SigningKey | LegacyHmacKey | None = None,
             strip: bool = False, key_id: str | None = None) -> None:
    """What an editor does after changing events: recompute seq, prev and every hash (and,
    holding some key, every signature, under `key_id` if given: a forged id; `strip` drops the
    signatures)."""
    prev = "0" * 64
    lines = []
    for seq, event in enumerate(events):
        event = {k: v for k, v in event.items() if k not in ("hash", "sig", "mac")}
        event.update(seq=seq, prev=prev)
        if strip:
            event.pop("key", None)
        elif key is not None:
            event["key"] = key_id or key.id
        event["hash"] = event_hash(event)
        if isinstance(key, LegacyHmacKey) and not strip:
            event["mac"] = key.mac(event["hash"])
        elif key is not None and not strip:
            event["sig"] = key.sign(event["hash"])
        elif not strip and "sig" in events[seq]:
            event["sig"] = events[seq]["sig"]          # the old signature: all an editor has
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


def test_rechained_score_edit_fails_on_the_signature(run):
    """Score of submission 1 raised in the events, the journal and its results file alike, the
    hash chain recomputed: only the signature, which needs the operator's private key, tells."""
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
    assert first.startswith(f"events.jsonl:{index + 1}:") and "bad signature" in first
    assert main(["verify", str(run)]) == 3
    with pytest.raises(VerificationError):
        write_report(run, run / "out")


def _public_only(tmp_path: Path, monkeypatch) -> Path:
    """The operator's public key copied to another folder, and no private key anywhere this
    process could find one: what a third party holds."""
    published = tmp_path / "published" / "operator.pub"
    published.parent.mkdir()
    shutil.copy(public_key_file(), published)
    monkeypatch.setenv("A2C_RECORD_SIGNING_KEY", str(tmp_path / "no-keys" / "record.ed25519"))
    monkeypatch.setenv("A2C_RECORD_KEY_FILE", str(tmp_path / "no-keys" / "record.key"))
    assert load_signing_key() is None
    return published


def test_red_team_forgery_resigned_with_a_fresh_key_is_rejected_by_the_public_key(
        run, tmp_path, monkeypatch, capsys):
    """The red team's forgery (a run edited from 0 to 100, re-chained, re-authenticated), now
    with a freshly generated Ed25519 key: `a2c verify` with only the operator's public key
    rejects it (key id mismatch), and so does the leaderboard."""
    operator_id = _events(run)[0]["key"]
    events = _events(run)
    for event in events:
        if event["type"] == "run_finished":
            event["data"]["best_score"] = 100.0
    _edit_json(run / "run.json", best_score=100.0)
    attacker = generate_signing_key(tmp_path / "attacker" / "record.ed25519")
    _rechain(run, events, key=attacker)
    board = build_leaderboard(run.parent, ("agent",), False)   # the operator's own view
    assert board.n_runs == 0 and "key id mismatch" in board.excluded[0].reason
    published = _public_only(tmp_path, monkeypatch)
    capsys.readouterr()
    assert main(["verify", str(run), "--public-key", str(published)]) == 3
    err = capsys.readouterr().err
    assert "key id mismatch" in err and attacker.id in err and operator_id in err
    result = verify_run(run, key=[published])
    assert not result.ok and not result.authenticated
    assert "not authenticated" in str(result.first) and "key id mismatch" in str(result.first)


def test_resigned_under_the_operators_key_id_fails_on_the_signature(run, tmp_path, monkeypatch,
                                                                    capsys):
    """The forger keeps the operator's key id in every event but must sign with a key of its
    own: the first event's signature is bad."""
    operator_id = _events(run)[0]["key"]
    events = _events(run)
    next(e for e in events if e["type"] == "run_finished")["data"]["best_score"] = 100.0
    attacker = generate_signing_key(tmp_path / "attacker" / "record.ed25519")
    _rechain(run, events, key=attacker, key_id=operator_id)
    published = _public_only(tmp_path, monkeypatch)
    capsys.readouterr()
    assert main(["verify", str(run), "--public-key", str(published)]) == 3
    err = capsys.readouterr().err
    assert "events.jsonl:1: bad signature" in err and operator_id in err


def test_an_honest_record_verifies_with_only_the_public_key(run, tmp_path, monkeypatch, capsys):
    published = _public_only(tmp_path, monkeypatch)
    capsys.readouterr()
    assert main(["verify", str(run), "--public-key", str(published)]) == 0
    out = capsys.readouterr().out
    assert "record verified and authenticated (Ed25519" in out
    assert "ok   authenticated: every event is signed by public key" in out
    assert main(["verify", str(run)]) == 3        # the default (the operator's key) is absent
    assert "public key" in capsys.readouterr().err and "not available" in \
        str(verify_run(run).first)
    assert not (tmp_path / "no-keys").exists()    # verifying never creates a key


def test_several_public_keys_and_a_rotation(tmp_path, monkeypatch, maker, capsys):
    """A record signed before `a2c keys --rotate` verifies after it (the old public key is kept
    and trusted by default), and with both keys given explicitly; the old private key is gone."""
    monkeypatch.setenv("A2C_RECORD_SIGNING_KEY", str(tmp_path / "cfg" / "record.ed25519"))
    old = operator_key()
    old_pub = tmp_path / "old.pub"
    shutil.copy(public_key_file(), old_pub)
    run = maker.make_run(tmp_path / "runs" / "old-run")
    assert main(["keys", "--rotate"]) == 0
    new = load_signing_key()
    assert new is not None and new.id != old.id
    assert (trusted_keys_dir() / f"{old.id}.pub").read_bytes() == old_pub.read_bytes()
    assert old.id not in signing_key_file().read_text()
    result = verify_run(run)                       # trusted by default after the rotation
    assert result.ok and result.authenticated and result.key_id == old.id
    new_pub = tmp_path / "new.pub"
    assert main(["keys", "--export", str(new_pub)]) == 0
    assert main(["verify", str(run), "--public-key", str(new_pub)]) == 3
    assert main(["verify", str(run), "--public-key", str(new_pub),
                 "--public-key", str(old_pub)]) == 0
    fresh = maker.make_run(tmp_path / "runs" / "new-run")
    assert verify_run(fresh).key_id == new.id


def test_a_legacy_hmac_record_verifies_with_its_key_file(tmp_path, maker, capsys):
    legacy_file = tmp_path / "legacy" / "record.key"
    legacy_file.parent.mkdir()
    legacy_file.write_text(os.urandom(32).hex() + "\n")
    os.chmod(legacy_file, 0o600)
    legacy = LegacyHmacKey(bytes.fromhex(legacy_file.read_text()), legacy_file)
    run = maker.make_run(tmp_path / "runs" / "legacy-run", key=legacy)
    assert all("mac" in e and "sig" not in e for e in _events(run))
    capsys.readouterr()
    assert main(["verify", str(run)]) == 3         # never authenticated by default
    assert "legacy HMAC record" in capsys.readouterr().err
    assert main(["verify", str(run), "--key-file", str(legacy_file)]) == 0
    out = capsys.readouterr().out
    assert "authenticated (legacy HMAC" in out and "record verified and authenticated " \
        "(legacy HMAC, key" in out
    assert main(["verify", str(run), "--no-key"]) == 0
    assert "NOT AUTHENTICATED" in capsys.readouterr().out
    # edited and re-MACed under another HMAC key: not authenticated; under the right id: bad mac
    events = _events(run)
    next(e for e in events if e["type"] == "run_finished")["data"]["best_score"] = 100.0
    other = LegacyHmacKey(os.urandom(32))
    _rechain(run, events, key=other)
    assert main(["verify", str(run), "--key-file", str(legacy_file)]) == 3
    _rechain(run, events, key=other, key_id=legacy.id)
    assert main(["verify", str(run), "--key-file", str(legacy_file)]) == 3
    assert "bad signature" in capsys.readouterr().err
    with pytest.raises(ValueError, match="legacy HMAC key"):   # never continued by a signer
        EventLog(run / "events.jsonl", verify=False).append("run_resumed", {})


def test_verify_refuses_a_private_key_as_public_key(run, capsys):
    capsys.readouterr()
    assert main(["verify", str(run), "--public-key", str(signing_key_file())]) != 0
    assert "private key" in capsys.readouterr().err


def test_a_signature_and_a_mac_on_one_event_are_refused(run):
    events = _events(run)
    events[0]["mac"] = "0" * 64
    path = run / "events.jsonl"
    path.write_bytes(b"".join(canonical_json(e) + b"\n" for e in events))
    assert "both a signature" in _first(run)


def test_keys_command_prints_the_public_key_only(capsys):
    assert main(["keys"]) == 0
    out = capsys.readouterr().out
    key = operator_key()
    assert key.id in out and "BEGIN PUBLIC KEY" in out and "PRIVATE" not in out
    assert signing_key_file().read_text().splitlines()[1] not in out


def test_record_key_status(tmp_path, monkeypatch):
    status = record_key_status()
    assert status == (signing_key_file(), True, True, operator_key().id)
    path, exists, mode_ok, key_id = status
    monkeypatch.setenv("A2C_RECORD_SIGNING_KEY", str(tmp_path / "k" / "record.ed25519"))
    assert record_key_status() == (tmp_path / "k" / "record.ed25519", False, False, None)
    key = operator_key()
    os.chmod(key.path, 0o640)
    assert record_key_status() == (key.path, True, False, None)


def test_stripped_macs_read_as_unauthenticated_and_fail(run):
    events = _events(run)
    _rechain(run, events, strip=True)
    first = _first(run)
    assert "chain intact, not authenticated" in first and "no event carries a signature" in first
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
    monkeypatch.setenv("A2C_RECORD_SIGNING_KEY", str(tmp_path / "elsewhere" / "record.ed25519"))
    result = verify_run(run)
    assert not result.ok and not result.authenticated
    assert str(result.first) == "events.jsonl: chain intact, not authenticated: public key " \
                                f"{key_id} not available"
    assert main(["verify", str(run)]) == 3
    assert "not authenticated" in capsys.readouterr().err
    assert main(["verify", str(run), "--no-key"]) == 0
    assert "NOT AUTHENTICATED" in capsys.readouterr().out
    with pytest.raises(VerificationError, match="not authenticated"):
        write_report(run, run / "out")
    board = build_leaderboard(run.parent, ("agent",), False)
    assert board.excluded and "not authenticated" in board.excluded[0].reason
    assert not (tmp_path / "elsewhere").exists()      # verifying never creates a key


def test_verify_with_an_explicit_public_key_file(run, monkeypatch, tmp_path, capsys):
    real = public_key_file()
    monkeypatch.setenv("A2C_RECORD_SIGNING_KEY", str(tmp_path / "none" / "record.ed25519"))
    assert main(["verify", str(run), "--public-key", str(real)]) == 0
    assert "record verified and authenticated" in capsys.readouterr().out


def test_a_key_readable_by_others_is_refused(tmp_path):
    key = operator_key(tmp_path / "k" / "record.ed25519")
    assert stat.S_IMODE(key.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(key.path.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(public_key_file(key.path).stat().st_mode) == 0o644   # publishable
    os.chmod(key.path, 0o644)
    with pytest.raises(RecordKeyError, match="chmod 600"):
        load_signing_key(key.path)
    pem = key.path.read_text()
    assert pem.splitlines()[1] not in repr(key)      # never printed


def test_a_symlinked_private_key_is_read_with_its_own_mode(tmp_path):
    """A key mounted as a symlink (a Kubernetes Secret) works; the mode checked is the file's."""
    key = operator_key(tmp_path / "k" / "record.ed25519")
    link = tmp_path / "link.ed25519"
    link.symlink_to(key.path)
    assert load_signing_key(link).id == key.id
    os.chmod(key.path, 0o644)
    with pytest.raises(RecordKeyError, match="chmod 600"):
        load_signing_key(link)


def test_event_log_refuses_a_chain_under_another_key(tmp_path):
    path = tmp_path / "events.jsonl"
    EventLog(path, key=operator_key(tmp_path / "a.ed25519")).append("run_started", {"task": "x"})
    other = EventLog(path, verify=False, key=operator_key(tmp_path / "b.ed25519"))
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
    assert stat.S_IMODE(root.stat().st_mode) == 0o700     # no other local user reaches it
    assert stat.S_IMODE((root / "results").stat().st_mode) == 0o700
    assert stat.S_IMODE((root / "grader" / "token").stat().st_mode) == 0o600
    assert stat.S_IMODE((root / "grader" / "heldout.jsonl").stat().st_mode) == 0o600
    assert private_modes(root) == []
    # what the agent's unprivileged uid must still reach once bound (bubblewrap binds as root)
    for rel in ("workspace", "data", "agent", "grader", "logs", "bundle/hooks"):
        assert stat.S_IMODE((root / rel).stat().st_mode) & 0o001, rel
    assert stat.S_IMODE((root / "data" / "train.jsonl").stat().st_mode) & 0o004


def test_prepare_refuses_a_signing_key_inside_the_runs_folder(tmp_path, monkeypatch):
    from a2c.errors import RunError
    monkeypatch.setenv("A2C_RECORD_SIGNING_KEY", str(tmp_path / "runs" / "keys" / "k.ed25519"))
    with pytest.raises(RunError, match="inside the runs folder"):
        _prepare(tmp_path)


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
    assert {e["key"] for e in events} == {operator_key().id}   # the grader's events too
    assert all("sig" in e and "mac" not in e for e in events)
    assert any(e["type"] == "submission_scored" for e in events)
    assert private_modes(root) == []
    secret = signing_key_file().read_text().splitlines()[1].encode()
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            assert secret not in path.read_bytes(), path
    with open(root / "logs" / "commands.log", "ab") as handle:
        handle.write(b"echo forged\n")
    assert not verify_run(root).ok


KEY_THIEF = r"""
out="$A2C_WORKSPACE/found.txt"
{ cat "$KEY_PATH"; cat "$HOME/.config/a2c/record.ed25519"; cat /root/.config/a2c/record.ed25519
  cat "$HOME/.config/a2c/record.key"; cat /root/.config/a2c/record.key
  find / \( -name 'record.ed25519*' -o -name record.key \) -not -path '/proc/*' 2>/dev/null |
    while read -r f; do cat "$f"; done
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
    ctx.run.options.agent_env = {"KEY_PATH": str(signing_key_file()),
                                       "RUN_DIR": str(ctx.run_dir)}
    ctx.save()
    summary = run_mod.execute(ctx, report=lambda _: None)
    assert summary["isolation"] == "bubblewrap"
    found = (ctx.run_dir / "workspace" / "found.txt").read_bytes()
    assert found, "the probe did not run"
    assert signing_key_file().read_text().splitlines()[1].encode() not in found
    result = verify_run(ctx.run_dir)
    assert result.ok and result.authenticated, [str(p) for p in result.problems]
