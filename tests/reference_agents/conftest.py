"""Fixtures shared by the reference agents' tests."""

from __future__ import annotations

from unittest import mock

import pytest


@pytest.fixture(scope="session")
def tiny_path(tmp_path_factory):
    """The built-in tiny model, prepared once in a cache of the test session's own."""
    from a2c.runtime.models import prepare_builtin
    root = tmp_path_factory.mktemp("cache")
    with mock.patch.dict("os.environ", {"A2C_CACHE": str(root)}):
        return prepare_builtin("tiny")
