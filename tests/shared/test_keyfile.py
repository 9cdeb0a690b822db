"""`a2c.fsutil.KeyFile`: a key file is read only when private and regular, created whole and once."""

from __future__ import annotations

import os
import threading

import pytest

from a2c.errors import A2CError
from a2c.fsutil import KeyFile, KeyFileError


def test_create_then_read(tmp_path):
    key = KeyFile(tmp_path / "secrets" / "k.key", "the test key")
    assert not key.exists()
    assert key.create(b"secret") is True
    assert key.read() == b"secret"
    assert (key.path.stat().st_mode & 0o777) == 0o600
    assert (key.path.parent.stat().st_mode & 0o777) == 0o700
    assert [p.name for p in key.path.parent.iterdir()] == ["k.key"]   # no temporary left


def test_create_never_overwrites(tmp_path):
    key = KeyFile(tmp_path / "k.key")
    assert key.create(b"first")
    assert key.create(b"second") is False
    assert key.read() == b"first"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k.key"]


def test_racing_creators_agree_on_one_key(tmp_path):
    key = KeyFile(tmp_path / "k.key")
    seen = []

    def one(n):
        seen.append(key.read_or_create(lambda: os.urandom(32)))

    threads = [threading.Thread(target=one, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(seen)) == 1 and len(seen[0]) == 32


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o620])
def test_a_key_others_can_reach_is_refused(tmp_path, mode):
    path = tmp_path / "k.key"
    path.write_bytes(b"x")
    path.chmod(mode)
    with pytest.raises(KeyFileError, match=rf"the data key is readable or writable by others "
                                           rf"\(mode {mode:o}\); chmod 600 it"):
        KeyFile(path, "the data key").read()


def test_not_a_regular_file_is_refused(tmp_path):
    (tmp_path / "k.key").mkdir(mode=0o700)
    with pytest.raises(KeyFileError, match="not a regular file|cannot read"):
        KeyFile(tmp_path / "k.key").read()


def test_missing_is_one_clear_error(tmp_path):
    with pytest.raises(KeyFileError, match=r"k.key: cannot read the token"):
        KeyFile(tmp_path / "k.key", "the token").read()
    assert issubclass(KeyFileError, A2CError)


def test_symlink_followed_unless_nofollow(tmp_path):
    real = tmp_path / "real.key"
    KeyFile(real).create(b"mounted")
    link = tmp_path / "link.key"
    link.symlink_to(real)
    assert KeyFile(link).read() == b"mounted"
    with pytest.raises(KeyFileError, match="cannot read"):
        KeyFile(link, nofollow=True).read()


def test_the_data_key_uses_it(tmp_path):
    from a2c.runtime.data.heldout_seed import installation_key
    path = tmp_path / "secrets" / "data.key"
    key = installation_key(path)
    assert len(key) == 32 and installation_key(path) == key
    path.chmod(0o644)
    with pytest.raises(KeyFileError, match="the data key is readable or writable by others"):
        installation_key(path)
