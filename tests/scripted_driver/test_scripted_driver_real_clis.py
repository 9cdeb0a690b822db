"""The real agent CLIs against the scripted driver (directly, no gateway, no bubblewrap): each
runs a command, writes a file, polls until a condition holds, and stops, with its own tools.
Slow; skipped for a CLI that is not installed. The full runs through the gateway and the sandbox
are tests/agents/: the shipped SFT recipe through each CLI, in bubblewrap and in docker (the
recipe's own flow is checked there, not again here with a stubbed trainer)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from a2c.agents.scripted_driver import ScriptedDriver, parse
from a2c.runtime.scaffold_tools import find_command, search_path

pytestmark = pytest.mark.slow

SCRIPT = r"""
apiVersion: a2c/v1
kind: DriverScript
id: cli-probe
usage: {input_tokens: 10, output_tokens: 2, cache_read_tokens: 3}
side: {text: Probe, usage: {input_tokens: 1, output_tokens: 1}}
turns:
  - run: echo hello > greeting.txt; cat greeting.txt
    timeout: 20
  - write: {path: sub/note.txt, content: "line 1\n$HOME 'q' `t`\n"}
  - run: "[ -f flag ] && echo FLAG''_SEEN || { touch flag; echo waiting; }"
    until: FLAG_SEEN
    timeout: 20
  - say: All done here.
"""
CODEX_CONFIG = """model = "gpt-5-codex"
model_provider = "a2c"
approval_policy = "never"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false
web_search = "disabled"
[model_providers.a2c]
name = "a2c scripted driver"
base_url = "{url}/v1"
env_key = "A2C_DRIVER_KEY"
wire_api = "responses"
[features]
apps = false
plugins = false
goals = false
[agents]
enabled = false
[analytics]
enabled = false
"""


def _mini() -> str | None:
    """`a2c agents install` links `mini` into a2c's tool prefix's bin/ (the venv's)."""
    return find_command("mini")


def _setup(name: str, url: str, home: Path) -> tuple[list[str], dict]:
    """(argv, extra environment) for scaffold `name` pointed at `url`, config under `home`."""
    if name == "claude-code":
        return (["claude", "-p", "do it", "--output-format", "stream-json", "--verbose",
                 "--dangerously-skip-permissions", "--model", "claude-sonnet-4-5"],
                {"ANTHROPIC_BASE_URL": url, "ANTHROPIC_API_KEY": "k",
                 "CLAUDE_CONFIG_DIR": str(home / ".claude"), "DISABLE_AUTOUPDATER": "1",
                 "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_TELEMETRY": "1",
                 "ANTHROPIC_SMALL_FAST_MODEL": "claude-sonnet-4-5"})
    if name == "codex":
        (home / ".codex").mkdir()
        (home / ".codex" / "config.toml").write_text(CODEX_CONFIG.replace("{url}", url))
        return (["codex", "exec", "--json", "--skip-git-repo-check",
                 "--dangerously-bypass-approvals-and-sandbox", "--model", "gpt-5-codex",
                 "do it"], {"CODEX_HOME": str(home / ".codex"), "A2C_DRIVER_KEY": "k"})
    if name == "gemini-cli":
        (home / ".gemini").mkdir()
        (home / ".gemini" / "settings.json").write_text(json.dumps({
            "security": {"auth": {"selectedType": "gemini-api-key"},
                         "folderTrust": {"enabled": False}},
            "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
            "privacy": {"usageStatisticsEnabled": False}, "telemetry": {"enabled": False}}))
        return (["gemini", "-p", "do it", "--output-format", "stream-json",
                 "--approval-mode=yolo", "--model", "gemini-2.5-pro"],
                {"GOOGLE_GEMINI_BASE_URL": url, "GEMINI_API_KEY": "k",
                 "GEMINI_CLI_TRUST_WORKSPACE": "true"})
    if name.startswith("opencode"):
        npm, base = {"opencode": ("@ai-sdk/anthropic", "/v1"),
                     "opencode-chat": ("@ai-sdk/openai-compatible", "/v1"),
                     "opencode-gemini": ("@ai-sdk/google", "/v1beta")}[name]
        (home / ".config" / "opencode").mkdir(parents=True)
        (home / ".config" / "opencode" / "opencode.json").write_text(json.dumps({
            "autoupdate": False, "share": "disabled",
            "permission": {"edit": "allow", "bash": "allow", "webfetch": "allow"},
            "provider": {"a2c": {"npm": npm, "name": "a2c", "options": {
                "baseURL": f"{url}{base}", "apiKey": "k"},
                "models": {"claude-sonnet-4-5": {"name": "claude-sonnet-4-5"}}}}}))
        return (["opencode", "run", "--format", "json", "--model", "a2c/claude-sonnet-4-5",
                 "do it"], {f"OPENCODE_DISABLE_{k}": "1" for k in (
                     "AUTOUPDATE", "MODELS_FETCH", "DEFAULT_PLUGINS", "LSP_DOWNLOAD", "SHARE",
                     "CLAUDE_CODE")})
    config = home / "mini.yaml"
    config.write_text(json.dumps({
        "agent": {"mode": "yolo", "confirm_exit": False, "cost_limit": 0, "step_limit": 20},
        "environment": {"timeout": 600},
        "model": {"model_name": "openai/scripted-model", "cost_tracking": "ignore_errors",
                  "model_kwargs": {"api_base": f"{url}/v1", "api_key": "k",
                                   "drop_params": True}}}))
    return ([_mini(), "-y", "--exit-immediately", "-c", "mini.yaml", "-c", str(config),
             "-o", str(home / "traj.json"), "-t", "do it"],
            {"MSWEA_CONFIGURED": "true", "MSWEA_GLOBAL_CONFIG_DIR": str(home),
             "MSWEA_SILENT_STARTUP": "1", "MSWEA_COST_TRACKING": "ignore_errors",
             "LITELLM_LOCAL_MODEL_COST_MAP": "True"})


BINARIES = {"claude-code": "claude", "codex": "codex", "gemini-cli": "gemini",
            "opencode": "opencode", "opencode-chat": "opencode", "opencode-gemini": "opencode"}


@pytest.fixture
def open_tmp():
    """A folder the CLI's unprivileged uid can reach: under /tmp itself, not pytest's base folder
    (which any pytest session starting beside this one, a side job's, makes private again)."""
    folder = Path(tempfile.mkdtemp(prefix="a2c-real-cli-"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.parametrize("name", ["claude-code", "codex", "gemini-cli", "opencode",
                                  "opencode-chat", "opencode-gemini", "mini-swe-agent"])
def test_real_cli_plays_the_script(name, open_tmp):
    tmp_path = open_tmp
    binary = _mini() if name == "mini-swe-agent" else find_command(BINARIES[name])
    if not binary:
        pytest.skip(f"{name}: `{BINARIES.get(name, 'mini')}` is not installed where the sandbox "
                    f"looks ({search_path()}); a2c agents install")
    home, ws = tmp_path / "home", tmp_path / "ws"
    home.mkdir()
    ws.mkdir()
    with ScriptedDriver(parse(SCRIPT), log=tmp_path / "replies.jsonl", model="m") as driver:
        argv, extra = _setup(name, f"http://127.0.0.1:{driver.port}", home)
        env = {"PATH": f"{search_path()}{os.pathsep}{os.environ['PATH']}", "HOME": str(home),
               **extra}
        # Claude Code refuses to skip permissions as root: the node CLIs run as nobody. Not
        # mini-swe-agent: its venv's python links to the interpreter under the operator's home
        # (/root, 0700 here), which only the sandbox's binds put in another uid's reach.
        if os.geteuid() == 0 and name != "mini-swe-agent":
            for path in (tmp_path, *tmp_path.rglob("*")):
                path.chmod(0o777)
            argv = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *argv]
        proc = subprocess.run(argv, cwd=ws, env=env, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=240)
        entries = driver.entries
    assert proc.returncode == 0, (proc.stdout[-2000:], proc.stderr[-2000:])
    assert (ws / "greeting.txt").read_text() == "hello\n"
    assert (ws / "sub" / "note.txt").read_text() == "line 1\n$HOME 'q' `t`\n"
    turns = [(e["turn"], e["kind"]) for e in entries if e["kind"] != "side"]
    assert turns == [(0, "run"), (1, "write"), (2, "run"), (2, "run"), (3, "say")], entries
    played = [e for e in entries if e["kind"] != "side"]
    assert all(e["usage"] == {"input_tokens": 10, "output_tokens": 2, "cache_read_tokens": 3}
               for e in played)
