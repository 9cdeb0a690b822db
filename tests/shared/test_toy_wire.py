"""A fifth wire in one file: a tiny JSON format on its own path, registered by `@register`-style
`register(Toy)`, is routed, admitted, metered and recorded by the real gateway process and
answered by the scripted driver, with no other file knowing it. This is the proof that a wire
is one class plus its registration (issue 33)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from a2c.contracts.run_paths import RunPaths
from a2c.unixhttp import UnixHTTPConnection
from a2c.wires import (
    WIRES,
    Answer,
    Conversation,
    Endpoint,
    Item,
    Tool,
    ToolCall,
    Turn,
    Usage,
    Wire,
    register,
)
from a2c.wires.base import Reading
from a2c.wires.records import group
from a2c.wires.strict import int_field
from a2c.wires.usage import count

MODEL = "claude-sonnet-4-5"        # a priced model, so the call has a cost
SCRIPT = """\
apiVersion: a2c/v1
kind: DriverScript
id: toy-script
side: {text: A title, usage: {input_tokens: 7, output_tokens: 2}}
turns:
  - run: echo one
    usage: {input_tokens: 11, output_tokens: 3, cache_read_tokens: 5}
"""


class Toy(Wire):
    """Request: {"model", "max_tokens", "tools": [{"name", "parameters"}], "turns": [{"by":
    "user" | "model", "text"}]}; answer: {"model", "text", "calls": [{"name", "args"}], "usage":
    {"in", "cached", "out"}}; error: {"toy_error": {"kind", "message"}}."""

    name = "toy-json"
    provider = "toy"
    rank = 4
    endpoints = (Endpoint("/toy/v1/generate", "generate"),)

    def read_request(self, body: dict) -> Reading:
        return Reading(cap=int_field(body, "max_tokens", "max_tokens", 1))

    def set_output_cap(self, body: dict, cap: int) -> None:
        body["max_tokens"] = cap

    def read_usage(self, obj: Any, u: Usage) -> None:
        if isinstance(obj, dict) and isinstance(obj.get("usage"), dict):
            u.model = obj.get("model") or u.model
            u.input_tokens = count(obj["usage"].get("in"))
            u.cache_read_tokens = count(obj["usage"].get("cached"))
            u.output_tokens = count(obj["usage"].get("out"))
            u.seen = True

    def usage_fields(self, u: Usage) -> dict:
        return {"in": u.input_tokens, "cached": u.cache_read_tokens, "out": u.output_tokens}

    def error(self, status: int, kind: str, message: str) -> dict:
        return {"toy_error": {"kind": kind, "message": message}}

    def request_items(self, body: dict) -> list[Item]:
        return [Item("assistant" if t.get("by") == "model" else "user", t.get("text", ""))
                for t in body.get("turns") or []]

    def response(self, body: dict) -> Turn:
        return Turn(body.get("text", ""), "", [ToolCall("", c["name"], c["args"])
                                               for c in body.get("calls") or []],
                    body.get("model"), self.usage_of(body))

    def conversation(self, body: dict, model: str = "", stream: bool = False) -> Conversation:
        tools = [Tool(t["name"], t.get("parameters") or {}) for t in body.get("tools") or []]
        results, first = group([(t.get("by") == "model", t.get("text", ""))
                                for t in body.get("turns") or []])
        return Conversation(self.name, str(body.get("model", "")), tools, first, results)

    def answer(self, answer: Answer) -> dict:
        return {"model": answer.model, "text": answer.text,
                "calls": [{"name": c.name, "args": c.arguments} for c in answer.calls],
                "usage": self.usage_fields(answer.usage)}


@contextmanager
def registered():
    """The toy wire in the registry for one test (the other tests see the built-in four)."""
    register(Toy)
    try:
        yield WIRES[Toy.name]
    finally:
        WIRES.pop(Toy.name)


def serve_gateway(run_dir: str) -> int:
    """The gateway process's entry point here: register the toy wire, then serve."""
    from a2c.runtime.driver_gateway.server import main
    register(Toy)
    return main([run_dir])


def _start_gateway(run_dir: Path) -> subprocess.Popen:
    boot = ("import importlib.util, sys; spec = importlib.util.spec_from_file_location("
            "'toy_wire', sys.argv[1]); mod = importlib.util.module_from_spec(spec); "
            "spec.loader.exec_module(mod); sys.exit(mod.serve_gateway(sys.argv[2]))")
    proc = subprocess.Popen([sys.executable, "-c", boot, __file__, str(run_dir)],
                            stdout=open(run_dir / "gateway.log", "wb"), stderr=subprocess.STDOUT)
    ready = RunPaths(run_dir).driver_ready
    deadline = time.monotonic() + 30
    while not ready.is_file():
        assert proc.poll() is None, (run_dir / "gateway.log").read_text()
        assert time.monotonic() < deadline, "the gateway did not start"
        time.sleep(0.05)
    return proc


def _post(paths: RunPaths, key: str, path: str, body: dict) -> tuple[int, dict]:
    conn = UnixHTTPConnection(str(paths.driver_socket), 10)
    try:
        conn.request("POST", path, body=json.dumps(body).encode(),
                     headers={"Content-Type": "application/json", "x-api-key": key})
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read())
    finally:
        conn.close()


def test_a_fifth_wire_is_one_class(tmp_path, monkeypatch):
    from a2c.agents.scripted_driver import ScriptedDriver, parse
    from a2c.runtime.driver_gateway import prepare_gateway, read_key, read_totals

    request = {"model": MODEL, "max_tokens": 64,
               "tools": [{"name": "bash", "parameters": {
                   "type": "object", "properties": {"command": {"type": "string"}}}}],
               "turns": [{"by": "user", "text": "list the files"}]}
    with registered(), ScriptedDriver(parse(SCRIPT, "toy.yaml"), model=MODEL) as driver:
        # the scripted driver answers the toy wire on its own path, in its own format
        monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
        monkeypatch.delenv("A2C_DRIVERS_FILE", raising=False)
        monkeypatch.setenv("A2C_DRIVER_TOY_BASE_URL", f"http://127.0.0.1:{driver.port}")
        monkeypatch.setenv("A2C_DRIVER_TOY_KEY_ENV", "")
        monkeypatch.setenv("A2C_DRIVER_TOY_WIRES", Toy.name)
        run = tmp_path / "run"
        (run / "logs").mkdir(parents=True)
        paths = RunPaths(run)
        config = prepare_gateway(paths, f"toy/{MODEL}",
                                 {"driver": {"default": MODEL, "wire": Toy.name}}, {})
        assert config["wires"] == [Toy.name] and config["agent_wire"] == Toy.name
        gateway = _start_gateway(run)
        try:
            key = read_key(run)
            status, answer = _post(paths, key, "/toy/v1/generate", request)
            refused, error = _post(paths, key, "/toy/v1/generate", dict(request, model="x"))
        finally:
            gateway.send_signal(signal.SIGTERM)
            gateway.wait(timeout=15)
        served = driver.entries

    assert status == 200, answer
    assert answer["calls"] == [{"name": "bash", "args": {"command": "echo one"}}]
    assert answer["usage"] == {"in": 11, "cached": 5, "out": 3}
    assert [(s["wire"], s["turn"]) for s in served] == [(Toy.name, 0)]
    assert refused == 400 and error["toy_error"]["kind"] == "model"   # the toy's error shape

    totals = read_totals(run)
    assert (totals["calls"], totals["input_tokens"], totals["cache_read_tokens"],
            totals["output_tokens"]) == (1, 11, 5, 3)
    assert totals["cost_usd"] > 0
    events = [json.loads(line) for line in paths.events.read_text().splitlines()]
    # in the order the calls ended (the gateway records a call once its answer is sent, so the
    # refusal, answered at once, may come first under load)
    calls = sorted((e["data"] for e in events if e["type"] == "driver_call"),
                   key=lambda c: c["status"])
    assert [(c["wire"], c["path"], c["status"], c.get("error")) for c in calls] == [
        (Toy.name, "/toy/v1/generate", 200, None), (Toy.name, "/toy/v1/generate", 400, "model")]
    assert (calls[0]["input_tokens"], calls[0]["output_tokens"]) == (11, 3)
    assert not os.path.exists(paths.driver_socket)
