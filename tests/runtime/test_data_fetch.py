"""`a2c data fetch/list`: streamed, checksummed, atomic, traversal-safe — served from loopback only."""

from __future__ import annotations

import hashlib
import http.server
import io
import json
import threading
import zipfile
from functools import partial

import pytest

from a2c.cli import main
from a2c.runtime.data import fetch
from a2c.runtime.data.fetch import Archive, Dataset


def _zip(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, body in members.items():
            zf.writestr(name, body)
    return buf.getvalue()


@pytest.fixture
def server(tmp_path):
    root = tmp_path / "www"
    root.mkdir()
    handler = partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *a, **k: None
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    yield root, f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def tiny(server):
    """A registered data set 'tiny' of two archives served from loopback."""
    root, base = server
    a = _zip({"json_2.1.1/valid_unseen/t1/trial/traj_data.json": b'{"task_type": "x"}'})
    b = _zip({"json_2.1.1/valid_unseen/t1/trial/game.tw-pddl": b'{"solvable": true}'})
    (root / "a.zip").write_bytes(a)
    (root / "b.zip").write_bytes(b)
    ds = Dataset("tiny", "test data", (Archive(f"{base}/a.zip", hashlib.sha256(a).hexdigest()),
                                       Archive(f"{base}/b.zip")), expect="json_2.1.1/valid_unseen")
    fetch.register_dataset(ds)
    yield root, base
    fetch.DATASETS.pop("tiny", None)


def test_fetch_extracts_records_hashes_and_is_idempotent(tiny, tmp_path, capsys):
    dest = tmp_path / "cache" / "tiny"
    assert main(["data", "fetch", "tiny", "--dest", str(dest)]) == 0
    assert (dest / "json_2.1.1/valid_unseen/t1/trial/game.tw-pddl").read_bytes() == b'{"solvable": true}'
    manifest = json.loads((dest / "a2c-data.json").read_text())
    assert [a["pinned"] for a in manifest["archives"]] == [True, False]
    err = capsys.readouterr().err
    assert "not pinned upstream" in err and manifest["archives"][1]["sha256"] in err
    assert sorted(p.name for p in dest.parent.iterdir()) == ["tiny"]          # no temp left
    assert main(["data", "fetch", "tiny", "--dest", str(dest)]) == 0
    assert "already fetched" in capsys.readouterr().err


def test_checksum_mismatch_leaves_nothing(tiny, tmp_path, capsys):
    root, _ = tiny
    (root / "a.zip").write_bytes(_zip({"json_2.1.1/valid_unseen/evil": b"changed"}))
    dest = tmp_path / "cache" / "tiny"
    assert main(["data", "fetch", "tiny", "--dest", str(dest)]) != 0
    assert "checksum mismatch for a.zip" in capsys.readouterr().err
    assert not dest.exists() and list(dest.parent.iterdir()) == []


def test_traversal_member_is_refused(tmp_path, server, capsys):
    root, base = server
    (root / "evil.zip").write_bytes(_zip({"ok.txt": b"fine", "../escaped.txt": b"boom"}))
    fetch.register_dataset(Dataset("evil", "bad archive", (Archive(f"{base}/evil.zip"),)))
    try:
        dest = tmp_path / "cache" / "evil"
        assert main(["data", "fetch", "evil", "--dest", str(dest)]) != 0
        assert "refusing archive member '../escaped.txt'" in capsys.readouterr().err
        assert not dest.exists() and not (tmp_path / "cache" / "escaped.txt").exists()
        assert list(dest.parent.iterdir()) == []
    finally:
        fetch.DATASETS.pop("evil", None)


def test_mirror_option_and_http_error(tiny, tmp_path, capsys):
    root, base = tiny
    (root / "m").mkdir()
    for f in ("a.zip", "b.zip"):
        (root / "m" / f).write_bytes((root / f).read_bytes())
    dest = tmp_path / "c2"
    assert main(["data", "fetch", "tiny", "--dest", str(dest), "--mirror", f"{base}/m"]) == 0
    assert f"{base}/m/a.zip" in capsys.readouterr().err
    assert main(["data", "fetch", "tiny", "--dest", str(tmp_path / "c3"),
                 "--mirror", f"{base}/missing"]) != 0
    assert "download of" in capsys.readouterr().err and not (tmp_path / "c3").exists()


def test_file_url_mirror_and_list(tiny, tmp_path, monkeypatch, capsys):
    root, _ = tiny
    monkeypatch.setenv("A2C_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("A2C_DATA_MIRROR", root.as_uri())
    assert main(["data", "list"]) == 0
    out = capsys.readouterr().out
    assert "alfworld" in out and "tiny" in out and "not fetched" in out
    assert main(["data", "fetch", "tiny"]) == 0
    assert fetch.dataset_path("tiny") == tmp_path / "cache" / "data" / "tiny"
    main(["data", "list"])
    assert f"fetched: {tmp_path / 'cache' / 'data' / 'tiny'}" in capsys.readouterr().out


def test_unknown_dataset_and_alfworld_urls(capsys):
    assert main(["data", "fetch", "nope"]) != 0
    assert "unknown data set 'nope'" in capsys.readouterr().err
    names = [a.filename for a in fetch.DATASETS["alfworld"].archives]
    assert names == ["json_2.1.1_json.zip", "json_2.1.2_tw-pddl.zip"]
