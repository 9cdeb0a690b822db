"""Helpers for the scaffold tests: a `cli` agent bundle, a fake upstream provider on loopback
configured through A2C_DRIVER_FAKE_* variables, and a fake provider key on the host."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from scripted_agents import make_agent

FAKE_KEY = "sk-fake-provider-3a9c1f0e5b7d2468ace13579bdf02468"
DRIVER = "fake/claude-sonnet-4-5"


def make_cli_agent(root, agent_id: str, script: str, pass_env=None, check: str | None = None,
                   npm=("@example/fake-cli@1.2.3",)):
    install = {"npm": list(npm), "pip": [], "commands": []}
    if check:
        install["check"] = check
    return make_agent(root, agent_id, script, pass_env=pass_env, type="cli",
                      driver={"required": True, "default": "anthropic/claude-sonnet-4-5",
                              "models": [], "wire": "anthropic"},
                      install=install)


class FakeUpstream:
    """An Anthropic-style upstream on 127.0.0.1:0: answers POST /v1/messages with a fixed reply
    and usage; remembers every request (path, headers, body)."""

    def __init__(self):
        self.requests: list[dict] = []
        upstream = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):  # noqa: N802
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                upstream.requests.append({"path": self.path, "headers": dict(self.headers),
                                          "body": body})
                reply = json.dumps({
                    "id": "msg_fake", "type": "message", "role": "assistant",
                    "model": "claude-sonnet-4-5", "stop_reason": "end_turn",
                    "content": [{"type": "text", "text": "hello from the fake upstream"}],
                    "usage": {"input_tokens": 11, "output_tokens": 7}}).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


def configure_fake_provider(monkeypatch, port: int = 9) -> None:
    """Provider `fake` (anthropic wire) at 127.0.0.1:PORT, its key in FAKE_PROVIDER_API_KEY."""
    monkeypatch.setenv("A2C_DRIVER_FAKE_BASE_URL", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("A2C_DRIVER_FAKE_KEY_ENV", "FAKE_PROVIDER_API_KEY")
    monkeypatch.setenv("A2C_DRIVER_FAKE_WIRES", "anthropic")
    monkeypatch.setenv("FAKE_PROVIDER_API_KEY", FAKE_KEY)
    monkeypatch.delenv("A2C_DRIVERS_FILE", raising=False)


def process_gone(pid: int) -> bool:
    """No process `pid` any more; a zombie the test process does not reap counts as gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    except OSError:
        return True


FAKE_VLLM = Path(__file__).with_name("fake_vllm.py")


def fake_vllm_executable(folder: Path) -> Path:
    """A `vllm` script in `folder`/bin that runs the stand-in server (fake_vllm.py)."""
    exe = folder / "bin" / "vllm"
    exe.parent.mkdir(exist_ok=True)
    exe.write_text(f"#!/bin/sh\nexec {sys.executable} {FAKE_VLLM} \"$@\"\n")
    exe.chmod(0o755)
    return exe


def fake_model(tmp_path: Path, model_type: str = "qwen2", **config) -> Path:
    """A model folder as a vllm/ driver names it: config.json, weights, generation defaults."""
    folder = tmp_path / "My-Model"
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text(json.dumps({"model_type": model_type, **config}))
    (folder / "model.safetensors").write_bytes(b"weights" * 100)
    (folder / "generation_config.json").write_text(json.dumps(
        {"temperature": 0.7, "top_p": 0.8, "bos_token_id": 1}))
    return folder


def gone_within(pid: int, seconds: float) -> bool:
    """Whether process `pid` is gone within `seconds` (a group's SIGTERM takes a moment to land
    on a loaded machine)."""
    deadline = time.monotonic() + seconds
    while not process_gone(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True
