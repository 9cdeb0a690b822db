"""HTTP over a Unix socket (or loopback TCP): the one client connection and the one server base
of every service the runtime runs on a socket (the grader service, the driver gateway, the
environment service proxies, the scripted driver).

    conn = connect("unix:/run/a2c/grader.sock", timeout=30)   # or "http://127.0.0.1:8000"
    conn.request("GET", "/health"); conn.getresponse().read()

    class MyHandler(Handler): ...                  # send_json / send_body / read_body
    server = listen_unix(path, MyHandler, mode=0o660, gid=agent_gid)
    serve_in_thread(server, "my-service")

The servers make one daemon thread per connection (a connection limit, where a service needs
one, mixes in on top: a2c/connlimit.py). A socket is created with its final
mode (never wider, even briefly) after any stale one at its path is removed.

Standard library only and in the bottom layer, because the agent's side imports it too: the
grading client the environments' adapters use (`runtime/grader_service/client.py`, the
one grading-service file the sandbox shows) reaches its socket through it.
"""

from __future__ import annotations

import hmac
import http.client
import http.server
import json
import os
import socket
import socketserver
import stat
import sys
import threading
import time
from pathlib import Path
from typing import Any

UNIX_PREFIX = "unix:"
DRAIN_LIMIT = 1 << 20   # an over-limit body up to this size is read (and dropped) before the refusal


class UnixHTTPConnection(http.client.HTTPConnection):
    """`http.client.HTTPConnection` whose socket is the Unix socket at `socket_path`."""

    def __init__(self, socket_path: str, timeout: float = 30.0):
        super().__init__("localhost", timeout=timeout)
        self.socket_path = str(socket_path)

    def connect(self) -> None:
        """Connect, waiting while the server's listen queue is full: with a timeout, Linux
        answers a Unix connect at once with EAGAIN there (a TCP connect would wait), so a
        busy server would look absent."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        deadline = (time.monotonic() + self.timeout if isinstance(self.timeout, (int, float))
                    else None)
        try:
            while True:
                try:
                    sock.connect(self.socket_path)
                    break
                except BlockingIOError:
                    if deadline is not None and time.monotonic() >= deadline:
                        raise TimeoutError(f"{self.socket_path}: the server's queue stayed "
                                           f"full for {self.timeout:g} s") from None
                    time.sleep(0.01)
        except OSError:
            sock.close()
            raise
        self.sock = sock


def connect(url: str, timeout: float = 30.0) -> http.client.HTTPConnection:
    """A (not yet opened) connection for `unix:/path.sock` or `http://host[:port]`."""
    if url.startswith(UNIX_PREFIX):
        return UnixHTTPConnection(url[len(UNIX_PREFIX):], timeout)
    rest = url.split("://", 1)[-1].rstrip("/")
    host, _, port = rest.partition(":")
    return http.client.HTTPConnection(host, int(port or 80), timeout=timeout)


def token_matches(presented: str | None, expected: str) -> bool:
    """A presented key or token against the expected one, in constant time."""
    return bool(presented) and hmac.compare_digest(presented.encode(), expected.encode())


class BodyTooLarge(ValueError):
    """A request body over the handler's limit (the connection is then closed)."""


class Handler(http.server.BaseHTTPRequestHandler):
    """The plumbing every service's handler shares: quiet by default (each service keeps its
    own record), a peer name for Unix sockets, bodies read whole (Content-Length or chunked),
    answers framed with a Content-Length, chunked streams."""

    protocol_version = "HTTP/1.1"
    peer = "unix"      # address_string() on a Unix socket, which has no client address

    def address_string(self) -> str:
        addr = self.client_address
        return addr[0] if isinstance(addr, tuple) and addr else self.peer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's name
        pass

    def read_body(self, limit: int | None = None) -> bytes:
        """The request body, chunked or by Content-Length; BodyTooLarge over `limit` bytes."""
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            parts, size_so_far = [], 0
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass    # trailers
                    break
                size_so_far += size
                if limit is not None and size_so_far > limit:
                    self.close_connection = True
                    raise BodyTooLarge("request body too large")
                parts.append(self.rfile.read(size))
                self.rfile.readline()
            return b"".join(parts)
        length = int(self.headers.get("Content-Length") or 0)
        if limit is not None and length > limit:
            self.close_connection = True
            if length <= DRAIN_LIMIT:
                # read what the client is sending before refusing it: closed on a client still
                # writing, it would get a broken pipe instead of the answer that says why
                try:
                    self.rfile.read(length)
                except OSError:
                    pass
            raise BodyTooLarge("request body too large")
        return self.rfile.read(length) if length else b""

    def send_body(self, status: int, data: bytes, headers: dict[str, str] | None = None,
                  reason: str | None = None) -> None:
        """One whole answer: status, `headers`, Content-Length, the bytes."""
        self.send_response(status, reason)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def send_json(self, status: int, value: Any, headers: dict[str, str] | None = None, *,
                  ensure_ascii: bool = True, newline: bool = False) -> None:
        data = json.dumps(value, ensure_ascii=ensure_ascii).encode("utf-8")
        self.send_body(status, data + b"\n" if newline else data,
                       {"Content-Type": "application/json", **(headers or {})})

    def write_chunk(self, data: bytes) -> None:
        """One chunk of a `Transfer-Encoding: chunked` answer, sent at once."""
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def end_chunks(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


class _QuietWhenTheClientLeft:
    """A caller that hangs up before its answer (a refused body, a timeout on its side) is no
    server error: nothing to print on the service's log but a traceback of a closed socket."""

    def handle_error(self, request, client_address) -> None:
        if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            return
        super().handle_error(request, client_address)


class UnixServer(_QuietWhenTheClientLeft, socketserver.ThreadingMixIn,
                 socketserver.UnixStreamServer):
    """A threading HTTP server on a Unix socket (one daemon thread per connection)."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64


class LoopbackServer(_QuietWhenTheClientLeft, http.server.ThreadingHTTPServer):
    """A threading HTTP server on TCP (loopback: every caller binds 127.0.0.1)."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64


def remove_stale(path: str | os.PathLike) -> None:
    """Remove whatever is at a socket's path (a socket of a process that died, a symlink)."""
    path = Path(path)
    if path.exists() or path.is_symlink():
        path.unlink()


class UnsafeSocketFolder(PermissionError):
    """A socket's folder that someone else could swap the socket in."""


def check_socket_folder(folder: str | os.PathLike) -> None:
    """Refuse a folder another local user could have made or can write in (a symlink, owned by
    someone else, or writable by group or others without the sticky bit): whoever can replace
    a service's socket there answers its clients in its place, the grading API included. Root's
    folders and sticky ones such as /tmp are fine: nobody else can remove our socket there."""
    folder = Path(folder)
    st = os.lstat(folder)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise UnsafeSocketFolder(f"{folder}: a socket's folder must be a real folder, not a link")
    if st.st_uid not in (os.getuid(), 0):
        raise UnsafeSocketFolder(f"{folder}: a socket's folder belongs to uid {st.st_uid}, not to "
                                 f"this user ({os.getuid()}): it may have been made to take the "
                                 "socket over; remove it, or use a shorter run path")
    if st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
        raise UnsafeSocketFolder(f"{folder}: a socket's folder is writable by others "
                                 f"(mode {stat.S_IMODE(st.st_mode):o}): anyone could swap the "
                                 "socket; make it 0700 or 0755")


def listen_unix(path: str | os.PathLike, handler: type[Handler], *, mode: int = 0o660,
                gid: int | None = None, server_cls: type[UnixServer] = UnixServer,
                **attrs: Any) -> UnixServer:
    """A server listening at `path` (its folder made, a stale socket removed), the socket
    given `mode` and group `gid` when set; `attrs` become attributes of the server, for the
    handler to read. The folder must be safe (`check_socket_folder`). A mode closed to others is
    in force from the bind on (the umask says so
    while binding: the process-wide umask is touched only in a service's own process, which
    binds before it starts other threads); an open one (0666: the agent may be another uid)
    is set just after."""
    path = Path(path)
    path.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
    check_socket_folder(path.parent)
    remove_stale(path)
    closed = not mode & 0o007
    old_umask = os.umask(0o777 & ~mode) if closed else None
    try:
        server = server_cls(str(path), handler)
    finally:
        if old_umask is not None:
            os.umask(old_umask)
    for key, value in attrs.items():
        setattr(server, key, value)
    if gid is not None:
        os.chown(path, -1, gid)
    os.chmod(path, mode)
    return server


def serve_in_thread(server: socketserver.BaseServer, name: str,
                    poll_interval: float = 0.5) -> threading.Thread:
    """`server.serve_forever` in a daemon thread, started."""
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": poll_interval},
                              daemon=True, name=name)
    thread.start()
    return thread
