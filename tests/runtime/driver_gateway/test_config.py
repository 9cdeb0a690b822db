"""Resolving a driver string to an upstream: built-ins, the drivers file (schema-checked, errors
with file:line:col: field), A2C_DRIVER_* variables, and one clear line for each refusal."""

from __future__ import annotations

import json

import pytest

from a2c.contracts.run_paths import RunPaths
from a2c.errors import RunError
from a2c.runtime.driver_gateway import prepare_gateway, providers
from a2c.runtime.driver_gateway.config import BUILTIN_PROVIDERS, find_script

CLAUDE = {"driver": {"default": "claude-sonnet-4-5", "wire": "anthropic"}}
CODEX = {"driver": {"default": "gpt-5-codex", "wire": "openai-responses"}}


@pytest.fixture
def env(monkeypatch, tmp_path):
    for var in list(__import__("os").environ):
        if var.startswith("A2C_DRIVER") or var.endswith("_API_KEY"):
            monkeypatch.delenv(var)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    return monkeypatch


def _drivers(tmp_path, env, text):
    path = tmp_path / "drivers.yaml"
    path.write_text(text)
    env.setenv("A2C_DRIVERS_FILE", str(path))
    return path


def test_builtin_provider(env, tmp_path):
    env.setenv("ANTHROPIC_API_KEY", "sk-ant-secret")
    paths = RunPaths(tmp_path / "run")
    config = prepare_gateway(paths, "anthropic/claude-sonnet-4-5", CLAUDE,
                             {"driver_tokens": 1000, "driver_cost_usd": 2.5})
    assert config["upstream"]["base_url"] == "https://api.anthropic.com"
    assert config["upstream"]["key_env"] == "ANTHROPIC_API_KEY"
    assert config["budget"] == {"driver_tokens": 1000, "driver_cost_usd": 2.5,
                                "driver_calls": None}
    assert config["price"]["model"] == "claude-sonnet-4-5" and config["price"]["source"]
    text = paths.driver_config.read_text()
    assert "sk-ant-secret" not in text and json.loads(text) == config
    assert paths.driver.stat().st_mode & 0o777 == 0o700
    key = paths.driver_key.read_text()
    prepare_gateway(paths, "anthropic/claude-sonnet-4-5", CLAUDE, {})
    assert paths.driver_key.read_text() == key        # a resume keeps the agent's key


def test_refusals_name_the_fix(env, tmp_path):
    paths = RunPaths(tmp_path / "run")
    with pytest.raises(RunError, match=r"\$OPENAI_API_KEY is not set; export"):
        prepare_gateway(paths, "openai/gpt-5-codex", CODEX, {})
    with pytest.raises(RunError, match=r"unknown provider 'mistral'.*A2C_DRIVER_MISTRAL_BASE_URL"):
        prepare_gateway(paths, "mistral/large", CODEX, {})
    env.setenv("ANTHROPIC_API_KEY", "x")
    with pytest.raises(RunError, match=r"the agent speaks openai-responses, provider "
                                       r"'anthropic' serves anthropic"):
        prepare_gateway(paths, "anthropic/claude-sonnet-4-5", CODEX, {})
    with pytest.raises(RunError, match="write provider/model"):
        prepare_gateway(paths, "claude", {"driver": {}}, {})
    with pytest.raises(RunError, match=r"scripted driver 'nope': no script nope.yaml"):
        prepare_gateway(paths, "scripted:nope", CLAUDE, {})
    assert not paths.driver_config.exists()


def test_a_scaffold_of_several_wires_gets_the_first_its_upstream_serves(env, tmp_path):
    """OpenCode speaks three wires: an OpenAI driver gets openai-chat, a Gemini one gemini, and
    the agent is told which (A2C_DRIVER_WIRE picks its opencode.json provider)."""
    from a2c.runtime.driver_gateway import agent_env
    opencode = {"driver": {"default": "anthropic/claude-sonnet-4-5",
                           "wires": ["anthropic", "openai-chat", "gemini"], "wire": "anthropic"}}
    env.setenv("OPENAI_API_KEY", "x")
    env.setenv("GEMINI_API_KEY", "y")
    for driver, wire in (("openai/gpt-5", "openai-chat"), ("gemini/gemini-2.5-pro", "gemini")):
        run = tmp_path / wire
        assert prepare_gateway(RunPaths(run), driver, opencode, {})["agent_wire"] == wire
        assert agent_env(run)["A2C_DRIVER_WIRE"] == wire
    scripted = prepare_gateway(RunPaths(tmp_path / "s"), "scripted:sft-recipe", opencode, {})
    assert scripted["agent_wire"] == "anthropic"     # the scripted driver serves every wire


def test_model_without_provider_takes_the_agents_wire(env, tmp_path):
    env.setenv("OPENAI_API_KEY", "x")
    config = prepare_gateway(RunPaths(tmp_path / "run"), "gpt-5-codex", CODEX, {})
    assert config["provider"] == "openai" and config["model"] == "gpt-5-codex"


def test_variables_configure_a_local_server(env, tmp_path):
    env.setenv("A2C_DRIVER_LOCAL_BASE_URL", "http://127.0.0.1:8000/v1")
    env.setenv("A2C_DRIVER_LOCAL_WIRES", "openai-chat, anthropic")
    env.setenv("A2C_DRIVER_LOCAL_KEY_ENV", "")
    config = prepare_gateway(RunPaths(tmp_path / "run"), "local/Qwen3-8B",
                             {"driver": {"wire": "anthropic"}}, {})
    assert config["upstream"] == {**config["upstream"], "base_url": "http://127.0.0.1:8000/v1",
                                  "key_env": None}
    assert config["wires"] == ["openai-chat", "anthropic"] and config["price"] is None
    env.setenv("A2C_DRIVER_LOCAL_WIRES", "openai,anthropic")
    with pytest.raises(RunError, match="A2C_DRIVER_LOCAL_WIRES: unknown wire 'openai'"):
        providers()
    env.setenv("A2C_DRIVER_LOCAL_WIRES", "anthropic")
    env.setenv("A2C_DRIVER_OPENAI_BASE_URL", "ftp://x")
    with pytest.raises(RunError, match="not an http:// or https:// URL"):
        providers()


def test_drivers_file(env, tmp_path):
    _drivers(tmp_path, env, "providers:\n  gpubox:\n    base_url: http://gpu-box:8000\n"
             "    wires: [openai-chat, anthropic]\n    allow_models: [Qwen/Qwen3-8B]\n"
             "  anthropic:\n    base_url: https://proxy.example/anthropic\n")
    p = providers()
    assert p["gpubox"].wires == ("openai-chat", "anthropic") and p["gpubox"].key_env is None
    # a built-in's fields are overridden one by one
    assert p["anthropic"].base_url == "https://proxy.example/anthropic"
    assert p["anthropic"].key_env == BUILTIN_PROVIDERS["anthropic"]["key_env"]
    config = prepare_gateway(RunPaths(tmp_path / "run"), "gpubox/Qwen/Qwen3-8B",
                             {"driver": {"wire": "openai-chat"}}, {})
    assert config["model"] == "Qwen/Qwen3-8B" and config["upstream"]["key_env"] is None


def test_the_vllm_provider_name_is_reserved(env, tmp_path):
    """`vllm/MODEL` is a server a2c starts itself: a provider of that name is refused, named."""
    _drivers(tmp_path, env, "providers:\n  vllm:\n    base_url: http://gpu-box:8000\n")
    with pytest.raises(RunError, match="provider name 'vllm' is reserved .* rename it"):
        providers()
    env.delenv("A2C_DRIVERS_FILE")
    env.setenv("A2C_DRIVER_VLLM_BASE_URL", "http://127.0.0.1:8000")
    with pytest.raises(RunError, match="provider name 'vllm' is reserved"):
        providers()


def test_drivers_file_errors_name_file_line_and_field(env, tmp_path):
    path = _drivers(tmp_path, env, "providers:\n  local:\n    base_url: http://x:1\n"
                    "    wires: [openai, anthropic]\n    key_env: 'my key'\n    colour: red\n")
    with pytest.raises(RunError) as err:
        providers()
    lines = str(err.value).splitlines()
    assert len(lines) == 3                                       # every problem, in file order
    assert lines[0].startswith(f"{path}:3:5: providers.local: Additional properties are not "
                               "allowed ('colour' was unexpected)")
    assert lines[1].startswith(f"{path}:4:13: providers.local.wires[0]: 'openai' is not one of")
    assert lines[2].startswith(f"{path}:5:14: providers.local.key_env: 'my key' does not match")
    _drivers(tmp_path, env, "providers:\n  local: [oops\n")
    with pytest.raises(RunError, match=r"drivers.yaml:\d+:\d+: not valid YAML"):
        providers()
    _drivers(tmp_path, env, "providers:\n  local:\n    wires: [anthropic]\n")
    with pytest.raises(RunError, match="provider 'local' has no base URL; set "
                                       "A2C_DRIVER_LOCAL_BASE_URL"):
        providers()
    env.setenv("A2C_DRIVERS_FILE", str(tmp_path / "missing.yaml"))
    with pytest.raises(RunError, match="names a file that does not exist"):
        providers()


def test_scripted_driver_config(env, tmp_path):
    script = tmp_path / "my-script.yaml"
    script.write_text("turns: []\n")
    assert find_script(str(script)) == script.resolve()
    config = prepare_gateway(RunPaths(tmp_path / "run"), f"scripted:{script}",
                             {"driver": {"default": "anthropic/claude-sonnet-4-5",
                                         "wire": "anthropic"}}, {"driver_cost_usd": 0.01})
    assert config["scripted"]["script"] == str(script.resolve())
    assert config["model"] == "claude-sonnet-4-5"            # provider prefix stripped
    assert config["price"]["model"] == "claude-sonnet-4-5"   # priced as the model it plays
    assert len(config["wires"]) == 4
