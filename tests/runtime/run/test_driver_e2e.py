"""End to end with the real driver gateway and a fake upstream on the host's loopback: a shell
"scaffold" in bubblewrap, as the unprivileged agent user, calls the gateway over its Unix socket
with the run's key (200, metered, recorded as driver_call) and with a wrong key (401); no
provider key is readable anywhere it looks; nothing but its own loopback is reachable. And the
statuses a run ends with when its agent fails or never submits."""

from __future__ import annotations

import json
import os

import pytest
from driver_helpers import DRIVER, FAKE_KEY, FakeUpstream, configure_fake_provider, make_cli_agent
from scripted_agents import make_agent

from a2c.contracts.events import read_events, verify_events
from a2c.runtime import run as run_mod
from a2c.runtime.sandbox.local import bwrap_works

HAVE_BWRAP = bwrap_works()

PROBE = r"""
A2C_DRIVER_URL="$(python3 -m a2c.runtime.sandbox.loopback_forwarder --socket "$A2C_DRIVER_SOCKET" --daemon)"
export A2C_DRIVER_URL
python3 - <<'PY'
import glob, json, os, socket, urllib.request

def call(key):
    body = json.dumps({"model": os.environ["A2C_DRIVER_MODEL"], "max_tokens": 16,
                       "messages": [{"role": "user", "content": "hi"}]}).encode()
    head = ("POST /v1/messages HTTP/1.1\r\nHost: gateway\r\nx-api-key: %s\r\n"
            "anthropic-version: 2023-06-01\r\ncontent-type: application/json\r\n"
            "content-length: %d\r\nconnection: close\r\n\r\n" % (key, len(body)))
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(30)
    s.connect(os.environ["A2C_DRIVER_SOCKET"])
    s.sendall(head.encode() + body)
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.close()
    return int(data.split(b" ", 2)[1]), data.partition(b"\r\n\r\n")[2].decode(errors="replace")

out = {"uid": os.getuid(), "home": os.environ.get("HOME"),
       "agent_home": os.environ.get("A2C_AGENT_HOME"),
       "socket": os.environ.get("A2C_DRIVER_SOCKET")}
out["right"], out["right_body"] = call(os.environ["A2C_DRIVER_KEY"])
out["wrong"], out["wrong_body"] = call("a2c-drv-not-the-key")
out["url"] = os.environ["A2C_DRIVER_URL"]
req = urllib.request.Request(
    out["url"] + "/v1/messages", method="POST",
    data=json.dumps({"model": os.environ["A2C_DRIVER_MODEL"], "max_tokens": 16,
                     "messages": [{"role": "user", "content": "again"}]}).encode(),
    headers={"x-api-key": os.environ["A2C_DRIVER_KEY"], "content-type": "application/json",
             "anthropic-version": "2023-06-01"})
with urllib.request.urlopen(req, timeout=30) as resp:
    out["forwarded"] = resp.status
open(os.path.join(os.environ["HOME"], "written-by-agent"), "w").write("ok")

dump = []
for path in sorted(glob.glob("/proc/[0-9]*/environ")):
    try:
        dump.append(open(path, "rb").read().decode(errors="replace"))
    except OSError:
        pass
for root in ("/run/a2c", os.environ["HOME"], os.environ["A2C_WORKSPACE"]):
    for folder, dirs, files in os.walk(root):
        for name in files:
            try:
                dump.append(open(os.path.join(folder, name), "rb").read().decode(errors="replace"))
            except OSError:
                pass
out["dumped"] = len(dump)
open("dump.txt", "w").write("\n".join(dump))

reach = {}
for host, port in (("127.0.0.1", int(os.environ["UPSTREAM_PORT"])), ("1.1.1.1", 443),
                   ("10.0.0.1", 80)):
    s = socket.socket()
    s.settimeout(3)
    try:
        s.connect((host, port))
        reach[f"{host}:{port}"] = "connected"
    except OSError as exc:
        reach[f"{host}:{port}"] = type(exc).__name__
    s.close()
out["reach"] = reach
out["interfaces"] = [line.split(":")[0].strip() for line in open("/proc/net/dev").readlines()[2:]]
json.dump(out, open("probe.json", "w"), indent=1)
PY
echo "probe done"
"""


@pytest.mark.slow
@pytest.mark.skipif(not HAVE_BWRAP, reason="bubblewrap not available")
def test_scaffold_reaches_only_the_gateway_with_its_key_and_sees_no_provider_key(tmp_path,
                                                                                  monkeypatch):
    with FakeUpstream() as upstream:
        configure_fake_provider(monkeypatch, upstream.port)
        agent = make_cli_agent(tmp_path, "probe-cli", PROBE)
        opts = run_mod.RunOptions(bundle="arith", agent=str(agent), model="tiny", budget="90s",
                                  runs_dir=tmp_path / "runs", driver=DRIVER, driver_calls=10,
                                  agent_env={"UPSTREAM_PORT": str(upstream.port)})
        ctx = run_mod.prepare(opts, report=lambda _: None)
        summary = run_mod.execute(ctx, report=lambda _: None)
    ws = ctx.run_dir / "workspace"
    probe = json.loads((ws / "probe.json").read_text())
    assert probe["uid"] != 0 if os.geteuid() == 0 else True
    assert probe["home"] == probe["agent_home"] == "/run/a2c/home"
    assert probe["socket"] == "/run/a2c/driver.sock"
    assert probe["right"] == 200, probe
    assert "hello from the fake upstream" in probe["right_body"]
    assert probe["wrong"] == 401, probe
    assert probe["url"].startswith("http://127.0.0.1:") and probe["forwarded"] == 200, probe
    assert (ctx.run_dir / "agent-home" / "written-by-agent").read_text() == "ok"
    # the upstream saw the two calls with the run's key, with the provider key the gateway
    # added, not the run's key
    assert len(upstream.requests) == 2
    headers = {k.lower(): v for k, v in upstream.requests[0]["headers"].items()}
    assert headers.get("x-api-key") == FAKE_KEY
    run_key = ctx.paths.driver_key.read_text().strip()
    assert run_key not in json.dumps(headers)
    # no provider key anywhere the agent could read; none in the record either
    assert probe["dumped"] > 3
    assert FAKE_KEY not in (ws / "dump.txt").read_text()
    for path in ctx.run_dir.rglob("*"):
        if path.is_file() and not path.is_symlink():
            assert FAKE_KEY.encode() not in path.read_bytes(), path
    # only its own loopback: the host's upstream port and the outside are unreachable
    assert probe["interfaces"] == ["lo"], probe
    assert all(v != "connected" for v in probe["reach"].values()), probe["reach"]
    # metered and recorded
    calls = [e["data"] for e in read_events(ctx.paths.events) if e["type"] == "driver_call"]
    assert sorted(c["status"] for c in calls) == [200, 200, 401], calls
    ok = next(c for c in calls if c["status"] == 200)
    assert ok["input_tokens"] == 11 and ok["output_tokens"] == 7
    run = json.loads(ctx.paths.run_json.read_text())
    assert run["driver_usage"]["input_tokens"] == 22
    assert run["budget"]["driver_calls"] == 10
    assert summary["driver_usage"]["tokens"] == 36 and summary["driver"] == DRIVER
    assert summary["status"] == run["status"] == "no_submission"
    assert "probe done" in "\n".join(run["agent_log_tail"])
    assert verify_events(ctx.paths.events).ok
    assert not ctx.paths.driver_socket.exists() or not _gateway_alive(ctx)


def _gateway_alive(ctx) -> bool:
    try:
        pid = int(ctx.paths.driver_pid.read_text())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return False
    return True


@pytest.mark.slow
def test_an_agent_that_exits_non_zero_ends_agent_failed_with_its_log_tail(tmp_path):
    script = "".join(f"echo 'step {i}'\n" for i in range(30)) + "echo 'fatal: no luck' >&2\nexit 3\n"
    agent = make_agent(tmp_path, "failing", script)
    opts = run_mod.RunOptions(bundle="arith", agent=str(agent), model="tiny", budget="60s",
                              runs_dir=tmp_path / "runs")
    ctx = run_mod.prepare(opts, report=lambda _: None)
    summary = run_mod.execute(ctx, report=lambda _: None)
    assert summary["status"] == "agent_failed"
    assert summary["agent_log_tail"][-1] == "fatal: no luck"
    assert len(summary["agent_log_tail"]) == 20 and summary["agent_log_tail"][0] == "step 11"
    run = json.loads(ctx.paths.run_json.read_text())
    assert run["status"] == "agent_failed" and run["agent_log_tail"] == summary["agent_log_tail"]
    assert "driver_usage" not in summary
    finished = [e for e in read_events(ctx.paths.events) if e["type"] == "run_finished"]
    assert finished[-1]["data"]["status"] == "agent_failed"
    with pytest.raises(Exception, match="already ended"):
        run_mod.resume(ctx.run_dir, report=lambda _: None)


@pytest.mark.slow
def test_an_agent_that_never_submits_ends_no_submission(tmp_path):
    agent = make_agent(tmp_path, "idle", "echo 'looked around, did nothing'\n")
    opts = run_mod.RunOptions(bundle="arith", agent=str(agent), model="tiny", budget="60s",
                              runs_dir=tmp_path / "runs")
    ctx = run_mod.prepare(opts, report=lambda _: None)
    summary = run_mod.execute(ctx, report=lambda _: None)
    assert summary["status"] == "no_submission"
    assert summary["agent_log_tail"] == ["looked around, did nothing"]
