"""`a2c sweep`'s local Ray instance listens on loopback only: every socket its processes (GCS,
raylet, workers) listen on is 127.0.0.1 or ::1 (a2c/sweep/engine.py connect)."""

from __future__ import annotations

import ipaddress
import socket

import pytest

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'a2c[sweep]')")
psutil = pytest.importorskip("psutil")


def _listening(procs) -> list[tuple[str, str, int]]:
    """(process name, address, port) of every TCP listener and bound UDP socket of `procs`."""
    out = []
    for proc in procs:
        try:
            conns = proc.net_connections(kind="inet")
            name = proc.name()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        for conn in conns:
            if conn.status == psutil.CONN_LISTEN or (conn.type == socket.SOCK_DGRAM
                                                     and not conn.raddr):
                out.append((name, conn.laddr.ip, conn.laddr.port))
    return out


def _loopback(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%")[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped:   # ::ffff:127.0.0.1
        ip = ip.ipv4_mapped
    return ip.is_loopback


@pytest.mark.slow
def test_the_local_instance_listens_on_loopback_only():
    from a2c.sweep.engine import connect
    if ray.is_initialized():   # another test's instance: start ours as `a2c sweep` does
        ray.shutdown()
    connected = connect(None, num_cpus=1)
    try:
        # a task, so a worker starts and listens too
        assert connected.get(connected.remote(lambda: 1).remote()) == 1
        me = psutil.Process()   # the driver's own core worker listens too
        ray_procs = [me, *me.children(recursive=True)]
        listeners = _listening(ray_procs)
        names = {name for name, _, _ in listeners}
        print("listening:", sorted(listeners))
        assert {"gcs_server", "raylet"} <= names, listeners
        assert [entry for entry in listeners if not _loopback(entry[1])] == []
        assert {n["NodeManagerAddress"] for n in connected.nodes()} == {"127.0.0.1"}
    finally:
        connected.shutdown()


@pytest.mark.parametrize("address,loopback", [("127.0.0.1", True), ("::1", True),
                                              ("::ffff:127.0.0.1", True), ("0.0.0.0", False),
                                              ("::", False), ("192.0.2.2", False)])
def test_loopback_reading(address, loopback):
    assert _loopback(address) is loopback
