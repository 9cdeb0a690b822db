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


# Under pytest-xdist (`-n 3`, what the README's test command and CI run), tests of one group run
# one after the other on one worker while the other workers take everything else:
#   heavy — a budgeted run whose gain or route needs the machine's cores (SmolLM2 trained within a
#           deadline), or a test that measures time: two of them at once would starve each other;
#   ray   — a local Ray instance: one at a time on the machine.
_GROUPS = {"heavy": "heavy", "ray": "ray"}


def pytest_collection_modifyitems(config, items):
    for item in items:
        for marker, group in _GROUPS.items():
            if item.get_closest_marker(marker):
                item.add_marker(pytest.mark.xdist_group(group))
    if config.getoption("--runslow"):
        return
    skip_slow = pytest.mark.skip(reason="slow: run with --runslow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip_slow)
