"""`a2c export RUN --public` (issue 27 item 4): every byte of the archive — and every object of the
snapshot bundle inside it — is free of held-out items, gold answers, the grader token, the gateway
key and the signing key, and the unpacked archive verifies with the public key alone, naming what
was withheld."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import tarfile
from pathlib import Path

import pytest
from scripted_agents import make_agent

from a2c.analysis.contamination import normalise
from a2c.analysis.export import export_public, verify_exported
from a2c.cli.main import main as cli
from a2c.contracts.record_key import public_key_file, signing_key_file

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "runs" / "make_fixture_run.py"
ARITH = "What is {a} plus {b}? End your reply with '#### ' followed by the number."


def _maker():
    spec = importlib.util.spec_from_file_location("a2c_make_fixture_run_export", FIXTURE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _archive_bytes(archive: Path, tmp: Path) -> tuple[bytes, Path]:
    """Every member's bytes, plus every object of snapshots.bundle; and the unpacked folder."""
    out = tmp / "unpacked"
    with tarfile.open(archive) as tar:
        chunks = [tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()]
        tar.extractall(out, filter="data")
    folder = next(out.iterdir())
    bundle = folder / "snapshots.bundle"
    if bundle.is_file():
        git = tmp / "bundle.git"
        subprocess.run(["git", "init", "-q", "--bare", str(git)], check=True)
        subprocess.run(["git", f"--git-dir={git}", "fetch", "-q", str(bundle), "refs/*:refs/*"],
                       check=True)
        chunks.append(subprocess.run(["git", f"--git-dir={git}", "cat-file",
                                      "--batch-all-objects", "--batch"], capture_output=True,
                                     check=True).stdout)
    return b"\n".join(chunks), folder


def _assert_clean(blob: bytes, items: list[dict], secrets: dict[str, bytes]) -> None:
    flat = normalise(blob.decode("utf-8", "replace"))
    for item in items:
        assert normalise(item["prompt"]) not in flat, item["id"]
        assert json.dumps(item).encode() not in blob, item["id"]
        pair = normalise(f"{item['prompt']} {item['answer']}")
        assert pair not in flat, item["id"]
    for name, value in secrets.items():
        assert value not in blob, name


def _signing_secrets() -> dict[str, bytes]:
    pem = signing_key_file().read_bytes()
    body = b"".join(line for line in pem.splitlines() if not line.startswith(b"-----"))
    return {"signing key PEM": pem.strip(), "signing key body": body}


def test_export_of_a_fixture_run_withholds_what_holds_items_and_verifies(tmp_path):
    maker = _maker()
    run = maker.make_run(tmp_path / "run", n=3)
    items = [{"id": f"test-{i}", "prompt": ARITH.format(a=40 + i, b=17 + 3 * i),
              "answer": str(57 + 4 * i)} for i in range(6)]
    (run / "grader" / "heldout.jsonl").write_text("".join(json.dumps(i) + "\n" for i in items))
    token = b"tok-" + b"ab12" * 8
    (run / "grader" / "token").write_bytes(token)
    (run / "driver").mkdir()
    key = b"gw-" + b"cd34" * 8
    (run / "driver" / "gateway.key").write_bytes(key)
    (run / "driver" / "totals.json").write_text("{}")
    with open(run / "logs" / "grader.log", "a") as log:     # a log that echoed an item
        log.write(f"debug: {items[2]['prompt']} -> {items[2]['answer']}\n")
    maker.reseal(run)
    archive, manifest = export_public(run, tmp_path / "out.tar.gz")
    assert "logs/grader.log" in manifest.withheld
    assert manifest.withheld["logs/grader.log"]["sealed"]["sha256"]
    assert "driver/gateway.key" in manifest.withheld
    assert manifest.snapshots == "snapshots.bundle"
    blob, folder = _archive_bytes(archive, tmp_path)
    _assert_clean(blob, items, {"token": token, "gateway key": key, **_signing_secrets()})
    result = verify_exported(folder, key=[public_key_file()])
    assert result.ok, result.problems
    withheld = next(c for c in result.checks if c.name == "withheld")
    assert "logs/grader.log" in withheld.detail and "results/1.json" in withheld.detail
    # The CLI: `a2c verify` of the folder uses the manifest; a lying manifest fails.
    assert cli(["verify", str(folder), "--public-key", str(public_key_file())]) == 0
    data = json.loads((folder / "export.json").read_text())
    data["withheld"]["logs/grader.log"]["sealed"]["sha256"] = "0" * 64
    (folder / "export.json").write_text(json.dumps(data))
    assert not verify_exported(folder, key=[public_key_file()]).ok
    # A file the archive keeps, edited, still fails.
    (folder / "export.json").write_text(json.dumps(manifest.to_dict()))
    (folder / "submissions.jsonl").write_text("")
    assert not verify_exported(folder, key=[public_key_file()]).ok


def test_export_refuses_without_public_flag_and_unsealed_runs(tmp_path, capsys):
    maker = _maker()
    run = maker.make_run(tmp_path / "run", n=1)
    assert cli(["export", str(run)]) != 0
    assert "--public" in capsys.readouterr().err
    lines = (run / "events.jsonl").read_text().splitlines()[:-1]   # the seal cut off
    (run / "events.jsonl").write_text("\n".join(lines) + "\n")
    assert cli(["export", str(run), "--public", "--out", str(tmp_path / "x.tgz")]) != 0
    assert "not sealed" in capsys.readouterr().err


TOKEN_THEN_COPY = r"""
echo "token: $A2C_TOKEN"
echo "$A2C_TOKEN" > notes_token.txt
exec python3 -m a2c.agents.reference.copy
"""


@pytest.mark.slow
def test_public_export_of_a_real_run(tmp_path):
    from a2c.runtime import run as run_mod

    agent = make_agent(tmp_path, "copy-and-print", TOKEN_THEN_COPY)
    opts = run_mod.RunOptions(bundle="arith", agent=str(agent), model="tiny", budget="40s",
                              runs_dir=tmp_path / "runs", snapshot_every_s=1)
    ctx = run_mod.prepare(opts, report=lambda _: None)
    token = ctx.run_dir.joinpath("grader", "token").read_bytes().strip()
    summary = run_mod.execute(ctx, report=lambda _: None)
    assert summary["submissions"] >= 1, summary
    items = [json.loads(line) for line in
             (ctx.run_dir / "grader" / "heldout.jsonl").read_text().splitlines()]
    if (ctx.run_dir / "grader" / "final.jsonl").is_file():
        items += [json.loads(line) for line in
                  (ctx.run_dir / "grader" / "final.jsonl").read_text().splitlines()]
    archive = tmp_path / "public.tar.gz"
    assert cli(["export", str(ctx.run_dir), "--public", "--out", str(archive)]) == 0
    blob, folder = _archive_bytes(archive, tmp_path)
    assert b"snapshot" in blob and (folder / "events.jsonl").is_file()
    _assert_clean(blob, items, {"token": token, **_signing_secrets()})
    result = verify_exported(folder, key=[public_key_file()])
    assert result.ok and result.authenticated, result.problems
    assert cli(["verify", str(folder), "--public-key", str(public_key_file())]) == 0
