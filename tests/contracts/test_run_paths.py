"""RunPaths' short socket folder under the shared temporary directory: its name is predictable,
so one another user made first is refused, never used to bind the grader's socket."""

from __future__ import annotations

import os
import shutil

import pytest

from a2c.contracts.run_paths import SOCKET_LIMIT, RunPaths
from a2c.errors import A2CError


def _long_run(tmp_path):
    run_dir = tmp_path / ("r" * SOCKET_LIMIT) / "run"
    paths = RunPaths(run_dir)
    folder = paths.temp_socket_dirs()[0]
    shutil.rmtree(folder, ignore_errors=True)
    return paths, folder


def test_a_long_run_path_gets_its_own_private_short_folder(tmp_path):
    paths, folder = _long_run(tmp_path)
    try:
        sock = paths.socket
        assert sock.parent == folder and len(str(sock)) < SOCKET_LIMIT
        assert folder.stat().st_mode & 0o777 == 0o700
        assert paths.socket == sock                 # found again, still fine
        assert paths.driver_socket.parent == folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_a_short_folder_others_can_write_in_is_refused(tmp_path):
    paths, folder = _long_run(tmp_path)
    folder.mkdir()
    folder.chmod(0o777)
    try:
        with pytest.raises(A2CError, match=f"{folder}: writable by others"):
            paths.socket
        assert folder.stat().st_mode & 0o777 == 0o777   # left as found, for its owner to see
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_our_own_short_folder_left_readable_is_closed_and_used(tmp_path):
    paths, folder = _long_run(tmp_path)
    folder.mkdir(mode=0o755)
    try:
        assert paths.socket.parent == folder
        assert folder.stat().st_mode & 0o777 == 0o700
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_a_short_folder_another_user_made_first_is_refused(tmp_path):
    if os.getuid() != 0:
        pytest.skip("making a folder another user owns needs root")
    paths, folder = _long_run(tmp_path)
    folder.mkdir(mode=0o700)
    os.chown(folder, 65534, 65534)
    try:
        with pytest.raises(A2CError, match="made by uid 65534"):
            paths.socket
    finally:
        shutil.rmtree(folder, ignore_errors=True)
