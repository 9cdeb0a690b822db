"""a2c/unixhttp.py: the one Unix-socket HTTP client and server base (bodies whole or chunked,
over-limit bodies refused, JSON answers, the socket's mode from the start)."""

from __future__ import annotations

import json
import stat

from a2c.unixhttp import (
    DRAIN_LIMIT,
    BodyTooLarge,
    Handler,
    connect,
    listen_unix,
    serve_in_thread,
)


class Echo(Handler):
    def do_POST(self):  # noqa: N802
        try:
            body = self.read_body(limit=16)
        except BodyTooLarge:
            self.send_json(413, {"error": "too large"})
            return
        self.send_json(200, {"got": body.decode(), "peer": self.address_string()},
                       {"Cache-Control": "no-store"}, newline=True)


def test_round_trip_over_a_unix_socket(tmp_path):
    sock = tmp_path / "sub" / "s.sock"
    sock.parent.mkdir()
    sock.write_text("stale")                    # whatever was left at the path goes
    server = listen_unix(sock, Echo, mode=0o660, marker="x")
    try:
        assert stat.S_IMODE(sock.stat().st_mode) == 0o660 and server.marker == "x"
        serve_in_thread(server, "echo", poll_interval=0.05)
        conn = connect(f"unix:{sock}", timeout=5)
        conn.request("POST", "/", body=b"hello")
        resp = conn.getresponse()
        raw = resp.read()
        assert resp.status == 200 and raw.endswith(b"\n")
        assert json.loads(raw) == {"got": "hello", "peer": "unix"}
        assert resp.getheader("Cache-Control") == "no-store"
        conn.request("POST", "/", body=iter([b"abc", b"def"]),
                     headers={"Transfer-Encoding": "chunked"}, encode_chunked=True)
        assert json.loads(conn.getresponse().read())["got"] == "abcdef"
        conn.close()
        # over the limit: the client hears why, even while still writing a body larger than
        # the socket's buffer (read and dropped up to DRAIN_LIMIT, not a broken pipe)
        for size in (17, DRAIN_LIMIT):
            conn = connect(f"unix:{sock}", timeout=5)
            conn.request("POST", "/", body=b"x" * size)
            assert conn.getresponse().status == 413
            conn.close()
    finally:
        server.shutdown()
        server.server_close()


def test_connect_names_tcp_too():
    conn = connect("http://127.0.0.1:8123/", timeout=1)
    assert (conn.host, conn.port) == ("127.0.0.1", 8123)


def test_a_full_listen_queue_is_waited_on_not_taken_for_an_absent_server(tmp_path):
    """Linux answers a Unix connect with a timeout at once with EAGAIN while the listen queue
    is full; the client waits for room up to its timeout, as a TCP connect would."""
    import socket
    import threading
    import time

    import pytest

    path = str(tmp_path / "busy.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(0)
    queued = []
    try:
        while True:                       # fill the queue: nobody accepts yet
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.setblocking(False)
            try:
                s.connect(path)
            except BlockingIOError:
                s.close()
                break
            queued.append(s)
        started = time.monotonic()
        with pytest.raises(TimeoutError, match="queue stayed full"):
            connect(f"unix:{path}", timeout=0.3).connect()
        assert time.monotonic() - started >= 0.3
        threading.Timer(0.2, lambda: [server.accept() for _ in range(len(queued) + 1)]).start()
        conn = connect(f"unix:{path}", timeout=5)
        conn.connect()                    # room was made after 0.2 s
        conn.close()
    finally:
        for s in queued:
            s.close()
        server.close()


def _refused(folder, what):
    """listen_unix at folder/s.sock is refused, naming `what`, and leaves the folder as it was."""
    import pytest

    from a2c.unixhttp import UnsafeSocketFolder
    before = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else None
    with pytest.raises(UnsafeSocketFolder, match=what):
        listen_unix(folder / "s.sock", Echo)
    assert not (folder / "s.sock").exists()
    if before is not None:
        assert sorted(p.name for p in folder.iterdir()) == before


def test_a_socket_folder_others_can_write_or_own_is_refused(tmp_path):
    import os

    import pytest
    open_folder = tmp_path / "open"
    open_folder.mkdir()
    (open_folder / "theirs.txt").write_text("kept")
    open_folder.chmod(0o777)
    _refused(open_folder, "writable by others")

    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    _refused(tmp_path / "link", "not a link")

    sticky = tmp_path / "sticky"
    sticky.mkdir()
    sticky.chmod(0o1777)            # /tmp's way: nobody else can remove our socket there
    listen_unix(sticky / "s.sock", Echo).server_close()

    if os.getuid() != 0:
        pytest.skip("making a folder another user owns needs root")
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o755)
    os.chown(theirs, 65534, 65534)
    _refused(theirs, "belongs to uid 65534")
