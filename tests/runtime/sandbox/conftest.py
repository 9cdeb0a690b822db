"""Fixtures for the sandbox tests: a Docker engine (skipped in one line where none can start)
and the arith task's image with its agent layers, built once per test session."""

from __future__ import annotations

import time

import pytest


@pytest.fixture(scope="session")
def docker_client():
    """The engine's client; the test skips with one line where no engine answers (CI starts one
    with scripts/docker_engine.sh before the tests)."""
    from a2c.errors import RunError
    try:
        from a2c.runtime.sandbox.docker_engine import client
        return client()
    except RunError as exc:
        pytest.skip(f"no Docker engine: {exc}")


@pytest.fixture(scope="session")
def arith_image(docker_client):
    """arith's task image (the offline base under it when the pinned one cannot be pulled),
    built once per session; {tag, seconds, built, steps}, printed for the record."""
    from a2c.runtime.run.resolve import resolve_agent_bundle, resolve_task_bundle
    from a2c.runtime.sandbox.docker_agent_layer import ensure_run_image
    start = time.monotonic()
    built = ensure_run_image(docker_client, resolve_task_bundle("arith"),
                             resolve_agent_bundle("ref-sft"), report=print)
    print(f"arith image {built.tag}: {'built' if built.built else 'present'} in "
          f"{time.monotonic() - start:.1f} s {built.steps}")
    return built
