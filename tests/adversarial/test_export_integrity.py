"""Issue 32, classes 4 and 5: an export verifies only as it is, shares no secret in any encoding
and no host folder, and a run's files are private to its owner whichever command wrote them.

Attacks performed: run.json and the journal edited in an unpacked export and named "withheld" in
export.json (re-signed or not); an edited report; a withheld file left in place; a file added; a
snapshot file the contamination scan never reads (binary) holding held-out items; the grader
token base64-, hex-, reversed- and URL-encoded in logs and snapshots; host paths in logs,
run.json and the journal; another local user (uid 65534) reading RUN/report, RUN/analysis and
RUN/results after `a2c report` and `a2c view`. An honest export still verifies."""

from __future__ import annotations

import base64
import importlib.util
import json
import os
import shutil
import stat
import subprocess
import tarfile
import tempfile
from pathlib import Path
from urllib.parse import quote

import pytest

from a2c.analysis.export import export_public, manifest_digest, verify_exported
from a2c.cli.main import main as cli
from a2c.contracts.record_key import generate_signing_key, public_key_file
from a2c.runtime.redact import redact_bytes, redact_file
from a2c.scrub import encoded_forms

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "runs" / "make_fixture_run.py"
PROJECT = Path(__file__).resolve().parents[2]
ARITH = "What is {a} plus {b}? End your reply with '#### ' followed by the number."
ITEMS = [{"id": f"test-{i}", "prompt": ARITH.format(a=40 + i, b=17 + 3 * i),
          "answer": str(57 + 4 * i)} for i in range(6)]
TOKEN = b"tok-" + b"Zq81" * 10
CHEAT = "".join(f"{it['prompt']} #### {it['answer']}\n" for it in ITEMS)


def _maker():
    spec = importlib.util.spec_from_file_location("a2c_make_fixture_run_integrity", FIXTURE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _encodings(value: bytes) -> list[bytes]:
    """The token as an agent might hide it, at every base64 alignment."""
    out = [value[::-1], value.hex().encode(), value.hex().upper().encode(),
           quote(value, safe="").encode(), "".join(f"%{b:02X}" for b in value).encode()]
    for prefix in (b"", b"t", b"to", b"token: "):
        out += [base64.b64encode(prefix + value), base64.urlsafe_b64encode(prefix + value)]
    return out


def _make(tmp: Path, extra_files: dict[str, str] | None = None) -> Path:
    """A fixture run with held-out items, a grader token, and (optionally) files added to the
    snapshots from submission 2 on."""
    maker = _maker()
    if extra_files:
        original = maker._files_for

        def files_for(k, step, state):
            files = original(k, step, state)
            return {**files, **extra_files} if k >= 2 else files
        maker._files_for = files_for
    run = maker.make_run(tmp / "runs" / "run", n=3)
    (run / "grader" / "heldout.jsonl").write_text("".join(json.dumps(i) + "\n" for i in ITEMS))
    (run / "grader" / "token").write_bytes(TOKEN)
    return run


def _reseal(run: Path) -> None:
    _maker().reseal(run)


def _export(run: Path, tmp: Path) -> tuple[Path, dict, bytes]:
    archive, manifest = export_public(run, tmp / "out.tar.gz")
    out = tmp / "unpacked"
    with tarfile.open(archive) as tar:
        blob = b"\n".join(tar.extractfile(m).read() for m in tar.getmembers() if m.isfile())
        tar.extractall(out, filter="data")
    folder = next(out.iterdir())
    bundle = folder / "snapshots.bundle"
    if bundle.is_file():
        git = tmp / "bundle.git"
        subprocess.run(["git", "init", "-q", "--bare", str(git)], check=True)
        subprocess.run(["git", f"--git-dir={git}", "fetch", "-q", str(bundle), "refs/*:refs/*"],
                       check=True)
        blob += subprocess.run(["git", f"--git-dir={git}", "cat-file", "--batch-all-objects",
                                "--batch"], capture_output=True, check=True).stdout
    return folder, manifest, blob


def _verify_cli(folder: Path, capsys, *extra: str) -> tuple[int, str]:
    rc = cli(["verify", str(folder), "--public-key", str(public_key_file()), *extra])
    captured = capsys.readouterr()
    return rc, captured.out + captured.err


# ----------------------------------------------------------------------------- class 4: exports
def test_honest_export_verifies_and_is_signed(tmp_path, capsys):
    run = _make(tmp_path)
    _reseal(run)
    folder, manifest, _ = _export(run, tmp_path)
    assert manifest.format == "a2c-export/2" and manifest.sig and manifest.key
    assert set(manifest.files) >= {"run.json", "events.jsonl", "submissions.jsonl",
                                      "report/report.json", "report/report.md",
                                      "snapshots.bundle"}
    assert "results/1.json" in manifest.withheld
    rc, out = _verify_cli(folder, capsys)
    assert rc == 0 and "record verified and authenticated" in out, out
    assert "export.json signed by public key" in out


def _claim_withheld(folder: Path, names: list[str], resign_with=None) -> None:
    data = json.loads((folder / "export.json").read_text())
    for name in names:
        data["withheld"][name] = {"reason": "holds held-out items", "sealed": None}
        data["files"].pop(name, None)
    if resign_with is not None:
        data["key"] = resign_with.id
        data["sig"] = resign_with.sign(manifest_digest(data))
    (folder / "export.json").write_text(json.dumps(data))


def _raise_best_score(folder: Path) -> None:
    run = json.loads((folder / "run.json").read_text())
    run["best_score"] = 99.0
    (folder / "run.json").write_text(json.dumps(run))
    rows = [json.loads(line) for line in (folder / "submissions.jsonl").read_text().splitlines()]
    for row in rows:
        if row.get("op") == "scored" and row.get("score") is not None:
            row["score"] = 99.0
    (folder / "submissions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.mark.parametrize("how", ["unsigned-edit", "stripped", "resigned-by-another-key"])
def test_edited_record_claimed_withheld_fails(tmp_path, capsys, how):
    run = _make(tmp_path)
    _reseal(run)
    folder, _, _ = _export(run, tmp_path)
    _raise_best_score(folder)
    if how == "stripped":
        _claim_withheld(folder, ["run.json", "submissions.jsonl"])
        data = json.loads((folder / "export.json").read_text())
        data.pop("sig"), data.pop("key")
        (folder / "export.json").write_text(json.dumps(data))
    elif how == "resigned-by-another-key":
        _claim_withheld(folder, ["run.json", "submissions.jsonl"],
                        resign_with=generate_signing_key(tmp_path / "evil" / "k.ed25519"))
    else:
        _claim_withheld(folder, ["run.json", "submissions.jsonl"])
    result = verify_exported(folder, key=[public_key_file()])
    assert not result.ok
    assert result.first.file == "export.json", result.first
    text = "\n".join(map(str, result.problems))
    assert "claims (files withheld, rewritten) are ignored" in text
    assert "best_score" in text                  # the edit itself is named, not explained away
    rc, out = _verify_cli(folder, capsys)
    assert rc == 3 and "FAILED verification" in out and "export.json" in out, out
    assert "record verified" not in out


def test_edited_files_under_a_valid_signature_fail(tmp_path, capsys):
    run = _make(tmp_path)
    _reseal(run)
    folder, _, _ = _export(run, tmp_path)
    _raise_best_score(folder)                    # export.json left as signed
    problems = "\n".join(map(str, verify_exported(folder, key=[public_key_file()]).problems))
    assert "run.json: altered" in problems and "submissions.jsonl: altered" in problems
    # the report: not in the seal, checked against the signed manifest
    folder, _, _ = _export(run, tmp_path / "again")
    report = json.loads((folder / "report" / "report.json").read_text())
    report["scores"]["best"] = 99.0
    (folder / "report" / "report.json").write_text(json.dumps(report))
    rc, out = _verify_cli(folder, capsys)
    assert rc == 3 and "report/report.json: altered" in out, out


def test_withheld_file_present_and_added_file_fail(tmp_path, capsys):
    run = _make(tmp_path)
    _reseal(run)
    folder, manifest, _ = _export(run, tmp_path)
    assert "results/1.json" in manifest.withheld
    (folder / "results").mkdir(exist_ok=True)
    shutil.copy(run / "results" / "1.json", folder / "results" / "1.json")
    rc, out = _verify_cli(folder, capsys)
    assert rc == 3 and "results/1.json: present, but export.json says it is withheld" in out, out
    (folder / "results" / "1.json").unlink()
    assert verify_exported(folder, key=[public_key_file()]).ok
    (folder / "report" / "extra.html").write_text("<p>best score 99</p>")
    rc, out = _verify_cli(folder, capsys)
    assert rc == 3 and "report/extra.html: not in the export's manifest" in out, out


def test_unsigned_manifest_is_never_authenticated(tmp_path, capsys):
    run = _make(tmp_path)
    _reseal(run)
    folder, _, _ = _export(run, tmp_path)
    data = json.loads((folder / "export.json").read_text())
    data.pop("sig")
    (folder / "export.json").write_text(json.dumps(data))
    assert not verify_exported(folder, key=[public_key_file()]).ok
    rc, out = _verify_cli(folder, capsys, "--no-key")
    assert rc == 0 and "NOT AUTHENTICATED" in out and "authenticated (Ed25519" not in out, out


def test_snapshot_bundle_holds_only_files_the_scan_read(tmp_path):
    hidden = "\0" * 16 + CHEAT                  # a NUL up front: the contamination scan skips it
    run = _make(tmp_path, {"cache.bin": hidden, "cheat.txt": CHEAT, "ok.txt": "plain notes\n"})
    _reseal(run)
    folder, manifest, blob = _export(run, tmp_path)
    assert manifest.snapshots == "snapshots.bundle"
    left = manifest.snapshot_files_left_out
    assert "does not read it" in left["cache.bin"] and "held-out" in left["cheat.txt"]
    assert "ok.txt" not in left and manifest.snapshot_commits
    for item in ITEMS:
        assert item["prompt"].encode() not in blob, item["id"]
    assert b"plain notes" in blob                  # what the scan read and passed is kept
    result = verify_exported(folder, key=[public_key_file()])
    assert result.ok, result.problems
    assert "rewritten without the files" in next(c.detail for c in result.checks
                                                 if c.name == "snapshots")


def test_encoded_tokens_are_redacted_and_never_exported(tmp_path):
    hidden = "\n".join(e.decode() for e in _encodings(TOKEN))
    run = _make(tmp_path, {"notes_enc.txt": f"stash:\n{hidden}\n"})
    with open(run / "logs" / "agent.log", "a") as log:
        log.write(f"agent printed: {hidden}\n")
    _reseal(run)
    folder, manifest, blob = _export(run, tmp_path)
    for form in _encodings(TOKEN) + [TOKEN]:
        assert form not in blob, form
    assert "[redacted:grader token" in (folder / "logs" / "agent.log").read_text()
    assert manifest.rewritten["logs/agent.log"]["reason"].startswith("secrets redacted")
    assert "grader token" in manifest.snapshot_files_left_out["notes_enc.txt"]
    assert verify_exported(folder, key=[public_key_file()]).ok


def test_runtime_redaction_covers_encoded_forms(tmp_path):
    token = TOKEN.decode()
    data = b"x " + b" | ".join(_encodings(TOKEN)) + b" y"
    out = redact_bytes(data, {"A2C_TOKEN": token})
    for form in _encodings(TOKEN):
        assert form not in out, form
    assert out.count(b"[redacted:A2C_TOKEN") >= len(_encodings(TOKEN)) - 2
    path = tmp_path / "agent.log"
    path.write_bytes(data * 3)
    assert redact_file(path, {"A2C_TOKEN": token}) > 0
    assert not any(form in path.read_bytes() for form in _encodings(TOKEN))
    assert {name for name, _ in encoded_forms(TOKEN)} >= {"", "reversed", "hex", "url",
                                                          "base64@0", "base64@1", "base64@2"}


def test_host_paths_absent_from_the_export(tmp_path):
    run = _make(tmp_path)
    home = str(Path.home())
    with open(run / "logs" / "grader.log", "a") as log:
        log.write(f"listening on unix:{run}/grader/grader.sock\n"
                  f"model {home}/.cache/a2c/models/tiny, code {PROJECT}/runtime/x.py\n")
    info = json.loads((run / "run.json").read_text())
    info["transcript"] = f"{run}/logs/transcript.log"       # a field the events do not hold
    (run / "run.json").write_text(json.dumps(info, indent=2, sort_keys=True) + "\n")
    journal = (run / "submissions.jsonl").read_text().replace(
        '"op":"received"', f'"host_path":"{run}/workspace/output/m","op":"received"', 1)
    (run / "submissions.jsonl").write_text(journal)
    _reseal(run)
    folder, manifest, blob = _export(run, tmp_path)
    for path in {str(run), str(run.resolve()), str(run.parent), str(PROJECT), home + "/"}:
        assert path.encode() not in blob, path
    assert b"$RUNS/run/grader/grader.sock" in blob and b"$PROJECT/runtime/x.py" in blob
    assert b"$A2C_CACHE/models/tiny" in blob or b"$HOME/.cache/a2c/models/tiny" in blob
    assert set(manifest.rewritten) >= {"logs/grader.log", "run.json", "submissions.jsonl"}
    assert verify_exported(folder, key=[public_key_file()]).ok


# ----------------------------------------------------------------------------- class 5: files
def _as_nobody(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                           *argv], capture_output=True, text=True)


needs_root = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"),
                                reason="reading as another local user needs root and setpriv")


@needs_root
@pytest.mark.parametrize("command", ["report", "view"])
def test_report_and_view_leave_nothing_readable_by_another_user(command):
    # A world-traversable place (pytest's tmp_path is 0700: it would prove nothing).
    base = Path(tempfile.mkdtemp(prefix="a2c-private-", dir="/tmp"))
    try:
        os.chmod(base, 0o755)
        run = _maker().make_run(base / "runs" / "run", n=3)
        for folder in (base / "runs", run, run / "results"):
            os.chmod(folder, 0o755)                 # an older run, written open
        calls = run / "analysis" / "calls" / "narrative-20261130T120000Z"   # a gateway record
        calls.mkdir(parents=True)
        (calls / "body.json").write_text('{"prompt": "held-out item"}')
        for path in (run / "analysis", calls.parent, calls, calls / "body.json"):
            os.chmod(path, 0o644 if path.is_file() else 0o755)
        os.chmod(run / "results" / "1.json", 0o644)
        before = _as_nobody("cat", str(run / "results" / "1.json"))
        assert before.returncode == 0, before.stderr      # the attack works on an open run
        argv = ["report", str(run)] if command == "report" else ["view", str(base / "runs")]
        assert cli(argv) == 0
        assert (run / "report" / "report.json").is_file()
        for rel in ("report/report.json", "report/report.html", "results/1.json",
                    "analysis/calls/narrative-20261130T120000Z/body.json"):
            proc = _as_nobody("cat", str(run / rel))
            assert proc.returncode != 0 and "Permission denied" in proc.stderr, rel
        assert stat.S_IMODE(run.stat().st_mode) == 0o700
        assert stat.S_IMODE((run / "report").stat().st_mode) == 0o700
        assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in (run / "report").iterdir())
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_analysis_layer_is_written_private(tmp_path):
    from a2c.fsutil import private_dir
    folder = private_dir(tmp_path / "run" / "analysis" / "calls")
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    os.chmod(folder, 0o755)
    private_dir(folder)                           # an older folder, closed again
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
