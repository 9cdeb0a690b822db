"""A fake provider on loopback that speaks the four wire formats (JSON and SSE) with known usage,
and helpers to start a real gateway process on a throwaway run against it."""

from __future__ import annotations

import pytest
from gateway_fakes import PROVIDER_KEY, FakeProvider, Gateway, start_gateway


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
