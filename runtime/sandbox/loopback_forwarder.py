"""A TCP port on the sandbox's own loopback that leads to a Unix socket bound into it.

Scaffolds want a base URL (`http://127.0.0.1:PORT`), and the sandbox has no network: the driver
gateway is a Unix socket bound in at /run/a2c/driver.sock. The agent's launcher runs

    A2C_DRIVER_URL="$(python -m a2c.runtime.sandbox.loopback_forwarder \\
                        --socket "$A2C_DRIVER_SOCKET" --daemon)"

which binds 127.0.0.1:0 (or --port), forks into the background once the port is bound (so the
URL printed is already accepting), prints the URL and returns. The background copy relays bytes
both ways between each TCP connection and a fresh connection to the socket (one thread per
direction, TCP_NODELAY: an SSE event goes out as soon as it comes in), and exits once the
process that started it (the launcher: the foreground's parent, or --parent PID) is gone, so it
never outlives the agent. It speaks no HTTP and imports only the standard library, to start in
a few tens of milliseconds.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import threading
import time

BUF = 65536


def _start_time(pid: int) -> str | None:
    """The process's start time (field 22 of /proc/PID/stat): a pid reused later differs."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
        return stat.rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        return None


def _alive(pid: int, started: str | None) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return started is None or _start_time(pid) == started


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    try:
        while True:
            data = src.recv(BUF)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def _relay(client: socket.socket, path: str) -> None:
    try:
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        upstream.connect(path)
    except OSError:
        client.close()
        return
    back = threading.Thread(target=_pipe, args=(upstream, client), daemon=True)
    back.start()
    _pipe(client, upstream)
    back.join()
    client.close()
    upstream.close()


def serve(listener: socket.socket, path: str, parent: int | None,
          parent_started: str | None, poll: float = 0.25) -> None:
    """Accept and relay until the parent is gone."""
    if parent is not None:
        def watch() -> None:
            while _alive(parent, parent_started):
                time.sleep(poll)
            os._exit(0)
        threading.Thread(target=watch, daemon=True).start()
    while True:
        try:
            client, _ = listener.accept()
        except InterruptedError:
            continue
        except OSError:
            return
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=_relay, args=(client, path), daemon=True).start()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m a2c.runtime.sandbox.loopback_forwarder",
                                 description="Relay a loopback TCP port to a Unix socket.")
    ap.add_argument("--socket", required=True, help="the Unix socket to reach")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0, help="TCP port (default: any free one)")
    ap.add_argument("--daemon", action="store_true",
                    help="fork into the background after binding; print the URL and return")
    ap.add_argument("--parent", type=int, default=None,
                    help="exit when this pid is gone (default: the process that started us)")
    args = ap.parse_args(argv)
    if not os.path.exists(args.socket):
        print(f"loopback_forwarder: {args.socket}: no such socket", file=sys.stderr)
        return 2
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((args.host, args.port))
    except OSError as exc:
        print(f"loopback_forwarder: cannot bind {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 2
    listener.listen(128)
    url = f"http://{args.host}:{listener.getsockname()[1]}"
    parent = args.parent if args.parent is not None else os.getppid()
    parent_started = _start_time(parent)
    if args.daemon:
        sys.stdout.flush()
        if os.fork() > 0:
            print(url, flush=True)
            os._exit(0)
        os.setsid()
        # Let go of the caller's stdout/stderr: `$(...)` waits until every writer closes them.
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        os.close(devnull)
    else:
        print(url, flush=True)
    serve(listener, args.socket, parent, parent_started)
    return 0


if __name__ == "__main__":
    sys.exit(main())
