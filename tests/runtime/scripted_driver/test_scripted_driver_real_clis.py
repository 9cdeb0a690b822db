"""The real agent CLIs against the scripted driver (directly, no gateway, no bubblewrap): each
runs a command, writes a file, polls until a condition holds, and stops, with its own tools.
Slow; skipped for a CLI that is not installed. The full runs through the gateway and the sandbox
are tests/agents/ (H3b)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from a2c.runtime.scripted_driver import ScriptedDriver, parse

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
    """`a2c agents install` links `mini` beside the interpreter; PATH need not hold that folder."""
    beside = Path(sys.executable).parent / "mini"
    return (os.environ.get("A2C_MINI_SWE_AGENT_BIN") or shutil.which("mini")
            or (str(beside) if beside.exists() else None))


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


@pytest.mark.parametrize("name", ["claude-code", "codex", "gemini-cli", "opencode",
                                  "opencode-chat", "opencode-gemini", "mini-swe-agent"])
def test_real_cli_plays_the_script(name, tmp_path):
    binary = _mini() if name == "mini-swe-agent" else shutil.which(BINARIES[name])
    if not binary:
        pytest.skip(f"{name} is not installed")
    home, ws = tmp_path / "home", tmp_path / "ws"
    home.mkdir()
    ws.mkdir()
    with ScriptedDriver(parse(SCRIPT), log=tmp_path / "replies.jsonl", model="m") as driver:
        argv, extra = _setup(name, f"http://127.0.0.1:{driver.port}", home)
        env = {"PATH": os.environ["PATH"], "HOME": str(home), **extra}
        if os.geteuid() == 0:       # Claude Code refuses to skip permissions as root
            for path in (tmp_path, *tmp_path.rglob("*")):
                path.chmod(0o777)
            for parent in tmp_path.parents:
                parent.chmod(parent.stat().st_mode | 0o011)
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


FAKE_TRAINER = """import os, pathlib, time
time.sleep(4)
out = pathlib.Path(os.environ["A2C_OUTPUT_DIR"]) / "model"
out.mkdir(parents=True, exist_ok=True)
(out / "config.json").write_text("{}")
pathlib.Path("train.status").write_text("TRAINING_DONE\\n")
"""
FAKE_SUBMIT = "#!/bin/sh\necho \"submission 1: queued ($*)\"; touch .submitted\n"
FAKE_CLIENT = ("import os\nprint('  1  scored    42.00  output/model' if os.path.exists("
               "'.submitted') else 'no submissions yet')\nif os.path.exists('.submitted'):\n"
               "    print('best: submission 1 with 42.00')\n")


def _recipe_with_a_fake_trainer() -> str:
    """sft-recipe as shipped, but the trainer it writes only sleeps and saves a stub model."""
    import yaml

    from a2c.runtime.scripted_driver import shipped
    data = yaml.safe_load(shipped("sft-recipe").read_text())
    writer = next(t for t in data["turns"] if "write" in t)
    writer["write"]["content"] = FAKE_TRAINER
    return yaml.safe_dump(data, sort_keys=False)


@pytest.mark.parametrize("name", ["claude-code", "codex", "gemini-cli", "opencode",
                                  "mini-swe-agent"])
def test_real_cli_runs_the_sft_recipe_flow(name, tmp_path):
    """The shipped recipe's commands (look, write, background start, poll, submit, poll the
    score, stop) through each CLI, with the workspace's tools faked and the trainer stubbed."""
    binary = _mini() if name == "mini-swe-agent" else shutil.which(BINARIES[name])
    if not binary:
        pytest.skip(f"{name} is not installed")
    home, ws, bin_dir = tmp_path / "home", tmp_path / "ws", tmp_path / "bin"
    for folder in (home, ws, bin_dir, tmp_path / "data", tmp_path / "model"):
        folder.mkdir()
    python = "/usr/bin/python3"         # reachable by an unprivileged user (a pyenv shim is not)
    if not os.access(python, os.X_OK):
        pytest.skip("no /usr/bin/python3 for the workspace's python")
    (bin_dir / "python").symlink_to(python)
    (tmp_path / "data" / "train.jsonl").write_text('{"prompt": "1+1", "answer": "2"}\n')
    (ws / "run_meta.json").write_text('{"task": {"prompt_template": "{prompt}"}}')
    (ws / "INSTRUCTIONS.md").write_text("# Task\n")
    (ws / "submit").write_text(FAKE_SUBMIT)
    (ws / "submit").chmod(0o755)
    (ws / "a2c_client.py").write_text(FAKE_CLIENT)
    with ScriptedDriver(parse(_recipe_with_a_fake_trainer()), model="m") as driver:
        argv, extra = _setup(name, f"http://127.0.0.1:{driver.port}", home)
        env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "HOME": str(home),
               "A2C_WORKSPACE": str(ws), "A2C_OUTPUT_DIR": str(ws / "output"),
               "A2C_DATA_DIR": str(tmp_path / "data"), "A2C_BASE_MODEL": str(tmp_path / "model"),
               **extra}
        if os.geteuid() == 0:
            for path in (tmp_path, *tmp_path.rglob("*")):
                if not path.is_symlink():
                    path.chmod(0o777)
            for parent in tmp_path.parents:
                parent.chmod(parent.stat().st_mode | 0o011)
            argv = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *argv]
        proc = subprocess.run(argv, cwd=ws, env=env, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=300)
        entries = [e for e in driver.entries if e["kind"] != "side"]
    assert proc.returncode == 0, (proc.stdout[-2000:], proc.stderr[-2000:])
    assert (ws / "train_sft.py").read_text() == FAKE_TRAINER
    assert (ws / "train.status").read_text() == "TRAINING_DONE\n"
    assert (ws / "output" / "model" / "config.json").exists() and (ws / ".submitted").exists()
    names = [t.name for t in parse(_recipe_with_a_fake_trainer()).turns]
    played = [names[e["turn"]] for e in entries]
    assert played[:3] == ["look", "write-trainer", "start-training"], played
    assert played[-3:] == ["submit", "wait-score", "done"], played
    assert set(played[3:-3]) == {"wait-training"}
