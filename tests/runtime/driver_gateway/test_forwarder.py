"""The sandbox-side loopback forwarder: a TCP port that leads to the gateway's Unix socket,
relays a stream as it comes, and dies with the process that started it."""

from __future__ import annotations

import http.client
import json
import socket
import subprocess
import sys
import threading
import time

from gateway_fakes import MODEL

FORWARDER = [sys.executable, "-m", "a2c.runtime.sandbox.loopback_forwarder"]


def _refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return False
    except OSError:
        return True


def test_forwarder_relays_a_stream_and_dies_with_its_parent(gateway_factory, fake):
    fake.hold = threading.Event()
    gw = gateway_factory(fake.url)
    # The launcher is a shell; the forwarder daemonizes and the shell goes on (as launch.sh).
    launcher = subprocess.Popen(
        ["sh", "-c", f'URL="$({" ".join(FORWARDER)} --socket {gw.paths.driver_socket} '
                     '--daemon)"; echo "$URL"; exec sleep 60'],
        stdout=subprocess.PIPE, text=True)
    try:
        url = launcher.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:")
        port = int(url.rsplit(":", 1)[1])
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("POST", "/v1/messages", headers={"x-api-key": gw.key,
                                                      "Content-Type": "application/json"},
                     body=json.dumps({"model": MODEL, "stream": True, "messages": []}))
        resp = conn.getresponse()
        assert resp.status == 200
        first = resp.read1(65536)
        assert b"message_start" in first and b"message_stop" not in first   # not buffered
        fake.hold.set()
        assert b"message_stop" in resp.read()
        # keep-alive through the forwarder: a second call on the same connection
        conn.request("POST", "/v1/messages", headers={"x-api-key": gw.key},
                     body=json.dumps({"model": MODEL, "messages": []}))
        assert conn.getresponse().read() and gw.totals(2)["calls"] == 2
        conn.close()
        # wrong key through the forwarder is refused like any other
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("POST", "/v1/messages", headers={"x-api-key": "nope"}, body=b"{}")
        assert conn.getresponse().status == 401
        conn.close()
    finally:
        launcher.kill()
        launcher.wait()
    deadline = time.monotonic() + 5
    while not _refused(port) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _refused(port), "the forwarder outlived its launcher"


def test_forwarder_foreground_and_errors(tmp_path):
    out = subprocess.run(FORWARDER + ["--socket", str(tmp_path / "none.sock")],
                         capture_output=True, text=True, timeout=10)
    assert out.returncode == 2 and "no such socket" in out.stderr
    # a fixed port, foreground, --parent: exits when that pid is gone
    sock_path = tmp_path / "s.sock"
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(str(sock_path))
    srv.listen(1)
    sleeper = subprocess.Popen(["sleep", "60"])
    fwd = subprocess.Popen(FORWARDER + ["--socket", str(sock_path), "--parent",
                                        str(sleeper.pid)], stdout=subprocess.PIPE, text=True)
    try:
        url = fwd.stdout.readline().strip()
        port = int(url.rsplit(":", 1)[1])
        c = socket.create_connection(("127.0.0.1", port))
        peer, _ = srv.accept()
        c.sendall(b"ping")
        assert peer.recv(4) == b"ping"
        peer.sendall(b"pong")
        assert c.recv(4) == b"pong"
        c.close()
        peer.close()
        sleeper.kill()
        sleeper.wait()
        assert fwd.wait(timeout=5) == 0
    finally:
        sleeper.kill()
        fwd.kill()
        srv.close()
