"""`--driver scripted:NAME`: the gateway starts the project's scripted driver as its upstream
(one server for all four wires) and meters exactly the usage the script reports."""

from __future__ import annotations

import importlib.util
import json

import pytest
from gateway_fakes import MODEL, Gateway, request_body, wire_path

from a2c.contracts.run_paths import RunPaths
from a2c.errors import RunError
from a2c.runtime.driver_gateway import DriverGatewayProcess, prepare_gateway

pytestmark = pytest.mark.skipif(importlib.util.find_spec("a2c.agents.scripted_driver") is None,
                                reason="a2c.agents.scripted_driver is not in this checkout")


def test_scripted_driver_behind_the_gateway(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    try:
        from a2c.runtime.driver_gateway.config import find_script
        find_script("sft-recipe")
    except RunError:
        pytest.skip("the shipped script specs/drivers/sft-recipe.yaml is not in this checkout")
    run = tmp_path / "run"
    (run / "logs").mkdir(parents=True)
    paths = RunPaths(run)
    prepare_gateway(paths, "scripted:sft-recipe",
                    {"driver": {"default": f"anthropic/{MODEL}", "wire": "anthropic"}}, {})
    proc = DriverGatewayProcess(run)
    proc.start()
    gw = Gateway(run, proc)
    try:
        n = 0
        for wire in ("anthropic", "openai-chat", "openai-responses", "gemini"):
            for stream in (False, True):
                gw.conn.request("POST", wire_path(wire, stream),
                                body=json.dumps(request_body(wire, stream)),
                                headers={"x-api-key": gw.key, "Content-Type": "application/json"})
                resp = gw.conn.getresponse()
                assert resp.status == 200, resp.read()
                resp.read()
                n += 1
        totals = gw.totals(n)
    finally:
        gw.conn.close()
        proc.stop()
    assert not proc.scripted or proc.scripted.poll() is not None      # stopped with the gateway
    served = [json.loads(line) for line in paths.scripted_driver_log.read_text().splitlines()]
    assert len(served) == n == totals["calls"]
    for field in ("input_tokens", "output_tokens", "cache_read_tokens"):
        assert totals[field] == sum(s["usage"].get(field, 0) for s in served), field
    assert totals["cost_usd"] > 0                  # priced as the model it impersonates
    config = json.loads(paths.driver_config.read_text())
    assert config["upstream"]["base_url"].startswith("http://127.0.0.1:")
