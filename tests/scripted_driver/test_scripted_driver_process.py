"""`python -m a2c.agents.scripted_driver`: binds loopback, writes its port, logs each reply as
one JSON line, stops on SIGTERM; a bad script is refused before anything is bound."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from sd_client import ask, get, request_body
from sd_requests import SCRIPT, history, shell_tools


def _start(tmp_path, script_path, *extra):
    port_file, log = tmp_path / "port", tmp_path / "replies.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "a2c.agents.scripted_driver", "--script",
                             str(script_path), "--port-file", str(port_file), "--log", str(log),
                             *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 20
    while not port_file.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.time() < deadline, "no port file"
        time.sleep(0.05)
    return proc, int(port_file.read_text()), log


def test_process_serves_logs_and_stops_on_sigterm(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(SCRIPT)
    proc, port, log = _start(tmp_path, path, "--model", "gpt-5-codex")
    try:
        base = f"http://127.0.0.1:{port}"
        assert get(base, "/v1/models")[1]["data"][0]["id"] == "gpt-5-codex"
        first = ask(base, "openai-responses",
                    request_body("openai-responses", tools=shell_tools("openai-responses"),
                                 stream=True), stream=True)
        second = ask(base, "anthropic",
                     request_body("anthropic", messages=history("anthropic", ["one"]),
                                  tools=shell_tools("anthropic")))
        assert first["calls"][0][1]["command"] == "echo one"
        assert second["calls"][0][1]["command"] == "cat status.txt"
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, err
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(e["turn"], e["wire"], e["stream"], e["kind"]) for e in entries] == [
        (0, "openai-responses", True, "run"), (1, "anthropic", False, "run")]
    assert entries[0]["model"] == "m-1" and entries[0]["via"] == "shell"
    assert sum(e["usage"]["input_tokens"] for e in entries) == 11 + 22
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]


def test_bad_script_exits_2_with_the_position(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("apiVersion: a2c/v1\nkind: DriverScript\nid: x\nturns: []\n")
    proc = subprocess.run([sys.executable, "-m", "a2c.agents.scripted_driver", "--script",
                           str(path), "--port-file", str(tmp_path / "port")],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2
    assert f"{path}:4:8: turns: [] should be non-empty" in proc.stderr
    assert not (tmp_path / "port").exists()


def test_check_a_shipped_script_by_name():
    proc = subprocess.run([sys.executable, "-m", "a2c.agents.scripted_driver", "--script",
                           "sft-recipe", "--check"], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0 and "sft-recipe.yaml" in proc.stdout
