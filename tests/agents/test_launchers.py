"""The compiled scaffold launchers (generated/agents/<id>/launch.sh), run with a stub in place of
each CLI: they point the scaffold at the gateway (variables and configuration files in HOME, with
${VAR} expanded and nothing else), start the loopback forwarder when no URL is given, and refuse
to start without the gateway's key."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from a2c.compiler.build import build_specs
from a2c.paths import project_root

SCAFFOLDS = ["claude-code", "codex", "gemini-cli", "opencode", "mini-swe-agent", "openhands"]
URL = "http://127.0.0.1:9"

STUB = r'''
import json, os, sys, urllib.request
home = os.environ["HOME"]
files = {}
for root, _dirs, names in os.walk(home):
    for name in names:
        path = os.path.join(root, name)
        files[os.path.relpath(path, home)] = {"text": open(path).read(),
                                              "mode": oct(os.stat(path).st_mode & 0o777)}
health = None
if os.environ.get("STUB_PROBE"):
    req = urllib.request.Request(os.environ["A2C_DRIVER_URL"] + "/a2c/health",
                                 headers={"x-api-key": os.environ["A2C_DRIVER_KEY"]})
    health = json.loads(urllib.request.urlopen(req, timeout=10).read())
json.dump({"argv": sys.argv[1:], "env": dict(os.environ), "files": files, "health": health,
           "cwd": os.getcwd()}, open(os.environ["STUB_OUT"], "w"))
'''


def agent_of(bundle: Path) -> dict:
    return json.loads((bundle / "agent.json").read_text())["agent"]


def run_launcher(bundle: Path, tmp_path: Path, env: dict | None = None,
                 drop: tuple = ()) -> tuple[subprocess.CompletedProcess, dict | None]:
    agent = agent_of(bundle)
    stub_dir, home, ws = tmp_path / "bin", tmp_path / "home", tmp_path / "ws"
    for folder in (stub_dir, home, ws):
        folder.mkdir(exist_ok=True)
    (tmp_path / "stub.py").write_text(STUB)
    command = agent["install"]["check"]
    stub = stub_dir / command
    stub.write_text(f"#!/bin/sh\nexec {sys.executable} {tmp_path / 'stub.py'} \"$@\"\n")
    stub.chmod(0o755)
    prompt = tmp_path / "prompt.md"
    prompt.write_text("Train the model; it's \"quoted\" and has $HOME in it.\n")
    base = {"PATH": f"{stub_dir}:{Path(sys.executable).parent}:/usr/bin:/bin",
            "HOME": str(home), "A2C_WORKSPACE": str(ws), "A2C_PROMPT_FILE": str(prompt),
            "A2C_DRIVER_KEY": "k-test", "A2C_DRIVER_URL": URL, "A2C_DRIVER_MODEL": "m-1",
            "A2C_DRIVER_WIRE": "openai-chat", "STUB_OUT": str(tmp_path / "stub.json")}
    base.update(env or {})
    for key in drop:
        base.pop(key, None)
    proc = subprocess.run(["bash", str(bundle / "launch.sh")], env=base, capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL)
    out = tmp_path / "stub.json"
    return proc, (json.loads(out.read_text()) if out.is_file() else None)


@pytest.mark.parametrize("agent_id", SCAFFOLDS)
def test_launcher_points_the_scaffold_at_the_gateway(agent_id, tmp_path):
    bundle = project_root() / "generated" / "agents" / agent_id
    agent = agent_of(bundle)
    proc, seen = run_launcher(bundle, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert seen["cwd"] == str(tmp_path / "ws")
    prompt = (tmp_path / "prompt.md").read_text().rstrip("\n")
    assert prompt in seen["argv"]                          # the prompt, one argument, verbatim
    env = seen["env"]
    assert env["A2C_DRIVER_URL"] == URL and env["A2C_DRIVER_MODEL"] == "m-1"
    for key, value in agent["launch"]["env"].items():
        expected = (value.replace("${A2C_DRIVER_URL}", URL).replace("${A2C_DRIVER_KEY}", "k-test")
                    .replace("${A2C_DRIVER_MODEL}", "m-1").replace("${HOME}", str(tmp_path / "home"))
                    .replace("${A2C_DRIVER_CONTEXT:-0}", "0"))   # not known: not told
        assert env[key] == expected, key
    assert set(seen["files"]) >= set(agent["launch"]["files"])
    for rel, content in agent["launch"]["files"].items():
        written = seen["files"][rel]
        assert written["mode"] == "0o600"
        assert "${" not in written["text"]
        assert written["text"] == (content.replace("${A2C_DRIVER_URL}", URL)
                                   .replace("${A2C_DRIVER_KEY}", "k-test")
                                   .replace("${A2C_DRIVER_MODEL}", "m-1")
                                   .replace("${A2C_DRIVER_WIRE}", "openai-chat"))
    text = json.dumps(env) + json.dumps(seen["files"])
    assert URL in text and "m-1" in text
    assert "k-test" in text                                # the gateway key, not a provider's


def test_codex_config_names_the_gateway(tmp_path):
    proc, seen = run_launcher(project_root() / "generated" / "agents" / "codex", tmp_path)
    assert proc.returncode == 0, proc.stderr
    import tomllib
    config = tomllib.loads(seen["files"][".codex/config.toml"]["text"])
    provider = config["model_providers"][config["model_provider"]]
    assert provider == {"name": "a2c driver gateway", "base_url": URL + "/v1",
                        "env_key": "A2C_DRIVER_KEY", "wire_api": "responses"}
    assert config["model"] == "m-1" and seen["env"]["CODEX_HOME"].endswith("/home/.codex")


def test_scaffolds_are_told_the_served_context_only_when_known(tmp_path):
    """A vllm/ driver's context reaches Claude Code (CLAUDE_CODE_MAX_CONTEXT_TOKENS) and Codex
    (model_context_window), so that they compact before the server refuses the conversation;
    a closed provider's run tells them nothing (0 is Claude Code's "not set")."""
    root = project_root() / "generated" / "agents"
    for told in (None, "32768"):
        env = {"A2C_DRIVER_CONTEXT": told} if told else {}
        where = tmp_path / (told or "unknown")
        where.mkdir()
        (where / "claude").mkdir()
        (where / "codex").mkdir()
        proc, claude = run_launcher(root / "claude-code", where / "claude", env)
        assert proc.returncode == 0, proc.stderr
        assert claude["env"]["CLAUDE_CODE_MAX_CONTEXT_TOKENS"] == (told or "0")
        proc, codex = run_launcher(root / "codex", where / "codex", env)
        assert proc.returncode == 0, proc.stderr
        flag = ["-c", f"model_context_window={told}"]
        argv = codex["argv"]
        pairs = [argv[i:i + 2] for i in range(len(argv) - 1)]
        assert (flag in pairs) == bool(told)
        assert not any(a.startswith("model_context_window") for a in argv) or told


def test_json_and_yaml_configs_parse(tmp_path):
    import yaml
    for agent_id, rel in (("gemini-cli", ".gemini/settings.json"),
                          ("opencode", ".config/opencode/opencode.json"),
                          ("mini-swe-agent", ".config/mini-swe-agent/a2c.yaml")):
        proc, seen = run_launcher(project_root() / "generated" / "agents" / agent_id,
                                  tmp_path / agent_id if (tmp_path / agent_id).mkdir() is None
                                  else tmp_path)
        assert proc.returncode == 0, proc.stderr
        yaml.safe_load(seen["files"][rel]["text"])        # JSON is YAML too
    oc = json.loads((tmp_path / "opencode" / "home" / ".config/opencode/opencode.json").read_text())
    # one provider per wire OpenCode speaks; the run's wire (here openai-chat) picks the model's
    bases = {"a2c-anthropic": "/v1", "a2c-openai-chat": "/v1", "a2c-gemini": "/v1beta"}
    assert {name: p["options"] for name, p in oc["provider"].items()} == {
        name: {"baseURL": URL + base, "apiKey": "{env:A2C_DRIVER_KEY}"}
        for name, base in bases.items()}
    assert oc["model"] == "a2c-openai-chat/m-1"
    assert all("m-1" in p["models"] for p in oc["provider"].values())
    assert "--model" in seen_argv(tmp_path / "opencode") and \
        "a2c-openai-chat/m-1" in seen_argv(tmp_path / "opencode")


def seen_argv(folder: Path) -> list[str]:
    return json.loads((folder / "stub.json").read_text())["argv"]


def test_launcher_needs_the_gateway_key(tmp_path):
    bundle = project_root() / "generated" / "agents" / "claude-code"
    proc, seen = run_launcher(bundle, tmp_path, drop=("A2C_DRIVER_KEY",))
    assert proc.returncode != 0 and seen is None
    assert "A2C_DRIVER_KEY is not set" in proc.stderr


def test_launcher_without_a_socket_or_url_stops(tmp_path):
    bundle = project_root() / "generated" / "agents" / "codex"
    proc, seen = run_launcher(bundle, tmp_path, drop=("A2C_DRIVER_URL",))
    assert proc.returncode != 0 and seen is None
    assert "A2C_DRIVER_SOCKET is not set" in proc.stderr


class _Health(BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({"ok": self.headers.get("x-api-key") == "k-test",
                           "path": self.path}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class _UnixHTTPServer(HTTPServer):
    address_family = socket.AF_UNIX

    def server_bind(self):
        self.socket.bind(self.server_address)

    def get_request(self):
        conn, _ = self.socket.accept()
        return conn, ("unix", 0)


def test_launcher_starts_the_loopback_forwarder(tmp_path):
    pytest.importorskip("a2c.runtime.sandbox.loopback_forwarder")
    sock = tmp_path / "driver.sock"
    server = _UnixHTTPServer(str(sock), _Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        bundle = project_root() / "generated" / "agents" / "gemini-cli"
        proc, seen = run_launcher(bundle, tmp_path, drop=("A2C_DRIVER_URL",),
                                  env={"A2C_DRIVER_SOCKET": str(sock), "STUB_PROBE": "1"})
    finally:
        server.shutdown()
        server.server_close()
    assert proc.returncode == 0, proc.stderr
    assert seen["env"]["A2C_DRIVER_URL"].startswith("http://127.0.0.1:")
    assert seen["env"]["GOOGLE_GEMINI_BASE_URL"] == seen["env"]["A2C_DRIVER_URL"]
    assert seen["health"] == {"ok": True, "path": "/a2c/health"}


AGENT_SPEC = """\
apiVersion: a2c/v1
kind: Agent
id: toy
title: Toy
type: cli
version: 1.0.0
install: {npm: ["toy-cli@1.0.0"], check: toy}
launch:
  command: toy "$A2C_PROMPT"
  env: {TOY_URL: "${A2C_DRIVER_URL}/x"}
  files:
    cfg/literal.txt: |
      url=${A2C_DRIVER_URL} model=${A2C_DRIVER_MODEL}${A2C_DRIVER_MODEL}
      $HOME `id` $(echo no) \\n 'single' "double" ${NOT A VAR} $${A2C_DRIVER_KEY}
    other.json: '{"k": "${A2C_DRIVER_KEY}"}'
driver: {wire: openai-chat, default: local/m}
transcript: {source: stdout, format: text}
"""


def toy_bundle(tmp_path: Path, spec: str = AGENT_SPEC) -> Path:
    specs = tmp_path / "specs" / "agents"
    specs.mkdir(parents=True)
    (specs / "toy.yaml").write_text(spec)
    (bundle,) = build_specs([specs / "toy.yaml"], tmp_path / "out")
    return bundle


def test_files_expand_only_braced_variables(tmp_path):
    bundle = toy_bundle(tmp_path)
    proc, seen = run_launcher(bundle, tmp_path)
    assert proc.returncode == 0, proc.stderr
    text = (tmp_path / "home" / "cfg" / "literal.txt").read_text()
    assert text == (f"url={URL} model=m-1m-1\n"
                    "$HOME `id` $(echo no) \\n 'single' \"double\" ${NOT A VAR} $k-test\n")
    assert (tmp_path / "home" / "other.json").read_text() == '{"k": "k-test"}\n'
    assert stat.S_IMODE(os.stat(tmp_path / "home" / "other.json").st_mode) == 0o600
    assert seen["env"]["TOY_URL"] == URL + "/x"


def test_files_with_an_unset_variable_stop_the_launch(tmp_path):
    bundle = toy_bundle(tmp_path, AGENT_SPEC.replace("${A2C_DRIVER_KEY}\"}", "${TOY_UNSET}\"}"))
    proc, seen = run_launcher(bundle, tmp_path)
    assert proc.returncode != 0 and seen is None
    assert "${TOY_UNSET} in other.json is not set" in proc.stderr


@pytest.mark.parametrize("bad, path", [
    ('install: {npm: ["toy-cli"], check: toy}', "install.npm[0]"),
    ("driver: {wire: grpc, default: local/m}", "driver.wire"),
    ("  files:\n    ../escape: x\n", "launch.files"),
])
def test_bad_scaffold_specs_are_refused(tmp_path, bad, path):
    spec = AGENT_SPEC
    if bad.startswith("install"):
        spec = spec.replace('install: {npm: ["toy-cli@1.0.0"], check: toy}', bad)
    elif bad.startswith("driver"):
        spec = spec.replace("driver: {wire: openai-chat, default: local/m}", bad)
    else:
        spec = spec.replace("  files:\n", bad, 1).replace("    cfg/literal.txt", "    cfg.txt", 1)
    specs = tmp_path / "specs" / "agents"
    specs.mkdir(parents=True)
    (specs / "toy.yaml").write_text(spec)
    from a2c.errors import A2CError
    with pytest.raises(A2CError) as info:
        build_specs([specs / "toy.yaml"], tmp_path / "out")
    assert path in str(info.value)
