"""The agent's proxy to the WebShop service (runtime/env_services/proxy.py): training sessions
pass, held-out and random ones are refused, also from inside the bubblewrap sandbox."""

from __future__ import annotations

import json
import sys
import time

import pytest
from l3_webshop_helpers import FIXTURE_COMMAND
from l3_webshop_helpers import webshop_fixture as fx

from a2c.contracts.spec import TaskSpec
from a2c.runtime.env_services.proxy import EnvServiceProxy, agent_proxies, service_url_var
from a2c.runtime.envs.base import EnvCrash
from a2c.runtime.envs.webshop.env import WebShopEnv, agent_path_filter
from a2c.runtime.sandbox import SandboxSpec
from a2c.runtime.sandbox.docker import container_kwargs
from a2c.runtime.sandbox.local import LocalBackend, build_bwrap_argv, bwrap_works

TRAIN = [{"id": "fixed_1", "session": "fixed_1"}, {"id": "fixed_2", "session": "fixed_2"}]


@pytest.fixture()
def proxy(webshop_url, tmp_path):
    gw = EnvServiceProxy(tmp_path / "s" / "webshop.sock", webshop_url, agent_path_filter(TRAIN),
                         log_path=tmp_path / "proxy.log").start()
    yield gw
    gw.stop()


def buy(env: WebShopEnv, goal: dict) -> tuple[float, bool]:
    product = fx.BY_ASIN[goal["asin"]]
    actions = [f"search[{product['name']} {' '.join(goal['attributes'])}]",
               f"click[{goal['asin']}]", *[f"click[{o}]" for o in goal["goal_options"]],
               "click[Buy Now]"]
    for action in actions:
        _, reward, done, _ = env.step(action)
    return reward, done


def test_the_filter_knows_webshops_routes():
    allow = agent_path_filter(TRAIN)
    assert allow("/fixed_1") and allow("/search_results/fixed_2/shoes/1")
    assert allow("/item_page/fixed_1/B01/%5B%27shoes%27%5D/1/%7B%7D?x=1")
    assert allow("/done/fixed_1/B01/%7B%7D")
    for path in ("/fixed_0", "/", "/abc", "/search_results/fixed_0/q/1", "/static/x.css",
                 "/fixed_1/../fixed_0", "/search_results/fixed_1%2F..%2Ffixed_0/q/1",
                 "/search_results", "/health"):
        assert not allow(path), path


def test_training_session_plays_through_the_proxy_held_out_is_refused(proxy, monkeypatch,
                                                                          tmp_path):
    monkeypatch.setenv(service_url_var("webshop"), f"unix:{proxy.socket_path}")
    env = WebShopEnv({"id": "fixed_1"}, {"base_url": "http://127.0.0.1:9"})  # proxy wins
    assert env.base_url == f"unix:{proxy.socket_path}"
    obs, info = env.reset()
    assert fx.GOALS[1]["instruction_text"] in obs
    assert buy(env, fx.GOALS[1]) == (1.0, True)
    for session in ("fixed_0", "random-session"):
        with pytest.raises(EnvCrash, match="403.*outside the agent's training split"):
            WebShopEnv({"id": session}).reset()
    assert proxy.counts["denied"] == 2 and proxy.counts["forwarded"] >= 5
    log = (tmp_path / "proxy.log").read_text().splitlines()
    assert any(line.endswith("/fixed_0 403") for line in log)


def test_a_flood_of_idle_connections_cannot_take_the_runtimes_threads(proxy, monkeypatch):
    """The proxy runs as threads of the runtime: connections that send nothing are bounded
    (the longest idle closed to make room) and a training session still plays."""
    import socket
    import threading

    from a2c.runtime.env_services.proxy import MAX_CONNECTIONS
    before = threading.active_count()
    flood = []
    try:
        for _ in range(MAX_CONNECTIONS * 4):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(None)
            s.connect(str(proxy.socket_path))
            flood.append(s)
        deadline = time.monotonic() + 10
        while threading.active_count() > before + MAX_CONNECTIONS + 2 and \
                time.monotonic() < deadline:
            time.sleep(0.1)
        assert threading.active_count() <= before + MAX_CONNECTIONS + 2
        monkeypatch.setenv(service_url_var("webshop"), f"unix:{proxy.socket_path}")
        obs, _ = WebShopEnv({"id": "fixed_2"}).reset()
        assert fx.GOALS[2]["instruction_text"] in obs
    finally:
        for s in flood:
            s.close()


def test_service_down_is_an_env_crash_not_a_hang(tmp_path, monkeypatch):
    gw = EnvServiceProxy(tmp_path / "w.sock", "http://127.0.0.1:9", agent_path_filter(TRAIN),
                         timeout=5).start()
    try:
        monkeypatch.setenv(service_url_var("webshop"), f"unix:{gw.socket_path}")
        with pytest.raises(EnvCrash, match="502"):
            WebShopEnv({"id": "fixed_1"}).reset()
        assert gw.counts["failed"] == 1
    finally:
        gw.stop()
    assert not gw.socket_path.exists()
    with pytest.raises(ValueError, match="http://"):
        EnvServiceProxy(tmp_path / "x.sock", "unix:/nowhere", agent_path_filter(TRAIN))


def test_agent_proxies_only_for_an_adapter_with_a_filter(tmp_path, webshop_url):
    records = tmp_path / "train.jsonl"
    records.write_text("".join(json.dumps(r) + "\n" for r in TRAIN))
    port = int(webshop_url.rsplit(":", 1)[1])
    services = [{"name": "webshop", "command": "x", "port": port}]
    task = {"grader": {"env": {"kind": "webshop"}}, "environment": {"services": services}}
    gws = agent_proxies(TaskSpec.from_dict(task), records, tmp_path / "socks", log_dir=tmp_path)
    try:
        assert list(gws) == ["webshop"] and gws["webshop"].allow("/fixed_2")
        assert not gws["webshop"].allow("/fixed_0")
    finally:
        for gw in gws.values():
            gw.stop()
    two = [*services, {"name": "other", "command": "y", "port": 1}]
    assert agent_proxies(TaskSpec.from_dict({**task, "environment": {"services": two}}), records,
                         tmp_path) == {}
    named = {"grader": {"env": {"kind": "webshop", "options": {"service": "other"}}},
             "environment": {"services": two}}
    gws = agent_proxies(TaskSpec.from_dict(named), records, tmp_path / "socks2")
    try:
        assert list(gws) == ["other"]
    finally:
        for gw in gws.values():
            gw.stop()
    tw = {"grader": {"env": {"kind": "textworld"}}, "environment": {"services": services}}
    assert agent_proxies(TaskSpec.from_dict(tw), records, tmp_path) == {}          # files, no service to guard
    assert agent_proxies(TaskSpec.from_dict({"grader": {"env": {"kind": "webshop"}}}), records,
                         tmp_path) == {}


def _spec(tmp_path, command, sockets) -> SandboxSpec:
    run = tmp_path / "run"
    for name in ("workspace", "data", "model", "logs"):
        (run / name).mkdir(parents=True, exist_ok=True)
    (run / "model" / "config.json").write_text("{}")
    return SandboxSpec(command=command, workspace=run / "workspace", data_dir=run / "data",
                       model_dir=run / "model", socket_path=None,
                       log_path=run / "logs" / "agent.log", command_log=None,
                       env={service_url_var("webshop"): "unix:/run/a2c/env/webshop.sock"},
                       marker=f"gw-{time.time_ns()}", env_service_sockets=sockets)


def test_sandboxes_mount_the_proxy_folder(tmp_path):
    spec = _spec(tmp_path, ["true"], tmp_path / "socks")
    argv = build_bwrap_argv(spec, python_dirs=[])
    i = argv.index(str(tmp_path / "socks"))
    assert argv[i - 1] == "--bind" and argv[i + 1] == "/run/a2c/env"
    volumes = container_kwargs(spec, "img")["volumes"]
    assert volumes[str(tmp_path / "socks")] == {"bind": "/run/a2c/env", "mode": "rw"}
    assert "/run/a2c/env" not in build_bwrap_argv(_spec(tmp_path, ["true"], None), python_dirs=[])


PLAY = r"""
import json
from a2c.runtime.envs.base import EnvCrash
from a2c.runtime.envs.webshop.env import WebShopEnv
out = {}
obs, info = WebShopEnv({"id": "fixed_1"}).reset()
out["train"] = obs[:200]
try:
    WebShopEnv({"id": "fixed_0"}).reset()
    out["heldout"] = "reached"
except EnvCrash as exc:
    out["heldout"] = str(exc)
open("result.json", "w").write(json.dumps(out))
"""


@pytest.mark.skipif(not bwrap_works(), reason="bubblewrap not available")
def test_agent_in_bwrap_reaches_training_sessions_only(proxy, tmp_path):
    spec = _spec(tmp_path, [sys.executable, "-c", PLAY], proxy.socket_path.parent)
    proc = LocalBackend(use_bwrap=True).start(spec)
    assert proc.wait(timeout=120) == 0, spec.log_path.read_text()
    out = json.loads((spec.workspace / "result.json").read_text())
    assert fx.GOALS[1]["instruction_text"][:40] in out["train"]
    assert "403" in out["heldout"], out


def test_runner_opens_the_proxy_with_the_service_and_closes_it(tmp_path):
    """run.py: the service starts, the proxy for the agent's split opens beside it, both stop."""
    import socket

    from a2c.contracts.run_paths import env_service_socket_dir as _env_service_socket_dir
    from a2c.runtime.run.task_services import TaskServices

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    svc = {"name": "webshop", "port": port, "health": "/health", "startup_timeout_s": 30,
           "command": f"{FIXTURE_COMMAND} --port {{port}}"}
    task = {"grader": {"env": {"kind": "webshop"}}, "environment": {"services": [svc]}}
    (tmp_path / "bundle").mkdir()
    (tmp_path / "bundle" / "bundle.json").write_text(json.dumps({"task": task}))
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in TRAIN))
    said = []
    services = TaskServices(tmp_path, said.append)
    services.start()
    try:
        gw = services.proxies["webshop"]
        assert gw.socket_path.parent == _env_service_socket_dir(tmp_path)
        assert gw.socket_path.exists()
        assert "proxy" in said[-1]
        obs, _ = WebShopEnv({"id": "fixed_2"}, {"base_url": f"unix:{gw.socket_path}"}).reset()
        assert fx.GOALS[2]["instruction_text"] in obs
    finally:
        services.stop()
    assert services.proxies == {} and not gw.socket_path.exists()
