"""A fake provider on loopback that speaks the four wire formats (JSON and SSE) with known usage,
and helpers to start a real gateway process on a throwaway run against it."""

from __future__ import annotations

from pathlib import Path

import pytest
from gateway_fakes import MODEL, PROVIDER_KEY, FakeProvider, Gateway, write_drivers

from a2c.contracts.run_paths import RunPaths
from a2c.runtime.driver_gateway import DriverGatewayProcess, prepare_gateway


@pytest.fixture
def provider_env(monkeypatch, tmp_path):
    monkeypatch.setenv("FAKE_PROVIDER_KEY", PROVIDER_KEY)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    for var in ("A2C_DRIVERS_FILE",):
        monkeypatch.delenv(var, raising=False)
    return monkeypatch


@pytest.fixture
def fake():
    f = FakeProvider()
    yield f
    f.close()


def start_gateway(tmp_path: Path, base_url: str, monkeypatch, budget=None, name="run",
                  wire=None, driver=f"fake/{MODEL}", **extra) -> Gateway:
    monkeypatch.setenv("A2C_DRIVERS_FILE", str(write_drivers(tmp_path, base_url, **extra)))
    run_dir = tmp_path / name
    run_dir.mkdir()
    (run_dir / "logs").mkdir()
    agent = {"driver": {"default": MODEL, **({"wire": wire} if wire else {})}}
    prepare_gateway(RunPaths(run_dir), driver, agent, budget or {})
    proc = DriverGatewayProcess(run_dir)
    proc.start()
    return Gateway(run_dir, proc)


@pytest.fixture
def gateway_factory(provider_env, tmp_path):
    made: list[Gateway] = []

    def make(base_url, **kw):
        gw = start_gateway(tmp_path, base_url, provider_env, name=f"run{len(made)}", **kw)
        made.append(gw)
        return gw

    yield make
    for gw in made:
        gw.conn.close()
        gw.proc.stop()
