"""service.json: one writer (0600, atomic), one reader."""

from __future__ import annotations

import json
import stat

import pytest

from a2c.contracts.service_config import (
    ServiceConfig,
    update_service_config,
    write_service_config,
)
from a2c.errors import RunError


def test_write_then_load(tmp_path):
    path = write_service_config(tmp_path, token="t", socket_path="/tmp/x.sock",
                                output_dir=tmp_path / "out", port=None)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert json.loads(path.read_text())["output_dir"] == str(tmp_path / "out")
    update_service_config(tmp_path, deadline_unix=12.5)
    cfg = ServiceConfig.load(tmp_path)
    assert cfg.token == "t" and cfg.deadline_unix == 12.5 and cfg.agent_output_dir == str(
        tmp_path / "out")


def test_missing_fields_are_refused(tmp_path):
    write_service_config(tmp_path, token="t", output_dir="/o")
    with pytest.raises(RunError, match="needs socket_path or port"):
        ServiceConfig.load(tmp_path)
