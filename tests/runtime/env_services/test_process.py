"""Declared environment services (runtime/env_services/process.py): start, health wait, clear failures, stop."""

from __future__ import annotations

import dataclasses
import socket
import sys
import time
import urllib.request

import pytest

from a2c.contracts.spec import ServiceSpec
from a2c.runtime.env_services import (
    EnvServiceError,
    env_services_running,
    probe,
    start_env_service,
    start_env_services,
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_server(port: int, delay: float = 0.0) -> str:
    """A shell command: a tiny HTTP server answering 200 on every path, after `delay` seconds."""
    code = (f"import time,http.server as h;time.sleep({delay});"
            f"h.HTTPServer(('127.0.0.1',{port}),h.SimpleHTTPRequestHandler).serve_forever()")
    return f"{sys.executable} -c \"{code}\""


def test_start_health_and_stop(tmp_path):
    port = free_port()
    spec = ServiceSpec(name="web", command=http_server(port, 0.3), port=port, health="/",
                       startup_timeout_s=20)
    group = start_env_services([spec], log_dir=tmp_path)
    try:
        assert group.alive() == {"web": True}
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as r:
            assert r.status == 200
    finally:
        group.stop()
    assert not probe(spec)
    assert (tmp_path / "service-web.log").is_file()


def test_port_placeholder_python_on_path_and_tcp_probe(tmp_path):
    port = free_port()
    code = ("import socket,time;s=socket.socket();"
            "s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1);"
            "s.bind(('127.0.0.1',{port}));s.listen();time.sleep(60)")
    spec = ServiceSpec(name="tcp", command=f'python -c "{code}"', port=port, startup_timeout_s=20)
    with env_services_running([spec], log_dir=tmp_path) as group:
        assert list(group.alive().values()) == [True]
        proc = group.services[0].proc
    assert proc.poll() is not None          # stopped on leaving the block


def test_exit_before_ready_names_the_service_and_log(tmp_path):
    spec = ServiceSpec(name="broken", command="echo boom-on-start >&2; exit 3", port=free_port(),
                       health="/health", startup_timeout_s=10)
    with pytest.raises(EnvServiceError) as err:
        start_env_service(spec, log_dir=tmp_path)
    msg = str(err.value)
    assert "'broken'" in msg and "status 3" in msg and "boom-on-start" in msg


def test_health_timeout_stops_the_process_and_earlier_services(tmp_path):
    good_port, bad_port = free_port(), free_port()
    good = ServiceSpec(name="good", command=http_server(good_port), port=good_port, health="/",
                       startup_timeout_s=20)
    # listens on the wrong port, so its health check never answers
    slow = ServiceSpec(name="slow", command=http_server(free_port()), port=bad_port,
                       health="/health", startup_timeout_s=1.0)
    started = time.monotonic()
    with pytest.raises(EnvServiceError, match=r"'slow' not healthy within 1s"):
        start_env_services([good, slow], log_dir=tmp_path)
    assert time.monotonic() - started < 15
    time.sleep(0.3)
    assert not probe(good)      # the first one was stopped too


def test_port_already_in_use_is_refused(tmp_path):
    port = free_port()
    spec = ServiceSpec(name="a", command=http_server(port), port=port, health="/",
                       startup_timeout_s=20)
    with env_services_running([spec], log_dir=tmp_path):
        with pytest.raises(EnvServiceError, match="already in use"):
            start_env_service(dataclasses.replace(spec, name="b"), log_dir=tmp_path)


def test_runner_starts_and_stops_the_bundles_services(tmp_path):
    """The run's TaskServices start and stop a bundle's declared service."""
    import json

    from a2c.runtime.run.task_services import TaskServices

    port = free_port()
    (tmp_path / "bundle").mkdir()
    svc = {"name": "web", "command": http_server(port), "port": port, "health": "/",
           "startup_timeout_s": 20}
    (tmp_path / "bundle" / "bundle.json").write_text(json.dumps({"task": {"environment": {"services": [svc]}}}))
    said = []
    services = TaskServices(tmp_path, said.append)
    services.start()
    try:
        assert probe(ServiceSpec.from_dict(svc)) and "web" in said[0]
    finally:
        services.stop()
    assert services.services is None and not probe(ServiceSpec.from_dict(svc))
    assert (tmp_path / "logs" / "service-web.log").is_file()
