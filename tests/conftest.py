"""Shared test configuration: `--runslow` enables the end-to-end tests CI always runs."""

from __future__ import annotations

import os
import tempfile

import pytest

# The record keys (a2c.contracts.record_key) of this test session, never the operator's own: the
# signing key (Ed25519, record.ed25519 + .pub) and the legacy HMAC key file's place.
_KEYS = tempfile.mkdtemp(prefix="a2c-test-key-")
os.environ["A2C_RECORD_KEY_FILE"] = os.path.join(_KEYS, "record.key")
os.environ["A2C_RECORD_SIGNING_KEY"] = os.path.join(_KEYS, "record.ed25519")


def pytest_addoption(parser):
    parser.addoption("--runslow", action="store_true", default=False,
                     help="also run tests marked slow (end-to-end; CI always does)")


def pytest_configure(config):
    config.addinivalue_line("markers", "vllm_server: the judge against a real vLLM server; "
                            "skipped unless A2C_VLLM_SERVER_TEST=1 (nox -s vllm)")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--runslow"):
        return
    skip_slow = pytest.mark.skip(reason="slow: run with --runslow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip_slow)
