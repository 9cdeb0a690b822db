"""The one bubblewrap builder and probe (runtime/sandbox/bwrap.py): the override turns every
sandbox's bubblewrap off alike, and the builder writes the options in the order it is told."""

from __future__ import annotations

import pytest

from a2c.runtime.graders import code_exec
from a2c.runtime.sandbox import bwrap, evaluator_box
from a2c.runtime.sandbox.bwrap import Bwrap


def test_the_override_turns_off_all_three_sandboxes(monkeypatch):
    monkeypatch.setenv("A2C_NO_BWRAP", "1")
    assert bwrap.bwrap_path() is None and not bwrap.available()
    assert not evaluator_box.available()
    assert not code_exec.bwrap_available()
    assert code_exec.isolation("auto")[0] == "rlimits"
    with pytest.raises(RuntimeError, match="bubblewrap requested"):
        code_exec.isolation("bubblewrap")


def test_one_probe_decides_for_every_sandbox(monkeypatch):
    monkeypatch.delenv("A2C_NO_BWRAP", raising=False)
    monkeypatch.setattr(bwrap, "bwrap_path", lambda: "/nowhere/bwrap")
    assert not bwrap.bwrap_works("/nowhere/bwrap")
    assert not code_exec.bwrap_available() and not evaluator_box.available()


def test_the_builder_keeps_the_order_it_is_given(tmp_path):
    (tmp_path / "f").write_text("x")
    argv = (Bwrap("/usr/bin/bwrap").proc().dev().tmpfs("/tmp", perms="1777")
            .ro_bind(tmp_path).bind(tmp_path, "/w").hide_file(tmp_path / "f")
            .dir("/run/a", perms="0755").unshare("net", "cgroup-try").caps("CAP_SETUID")
            .die_with_parent().new_session().chdir("/w").command("python", "-c", "pass"))
    assert argv == ["/usr/bin/bwrap", "--proc", "/proc", "--dev", "/dev", "--perms", "1777",
                    "--tmpfs", "/tmp", "--ro-bind", str(tmp_path), str(tmp_path),
                    "--bind", str(tmp_path), "/w", "--ro-bind", "/dev/null", str(tmp_path / "f"),
                    "--perms", "0755", "--dir", "/run/a", "--unshare-net",
                    "--unshare-cgroup-try", "--cap-drop", "ALL", "--cap-add", "CAP_SETUID",
                    "--die-with-parent", "--new-session", "--chdir", "/w", "--",
                    "python", "-c", "pass"]


def test_system_folders_keep_their_symlinks(tmp_path):
    real = tmp_path / "usr"
    real.mkdir()
    (tmp_path / "lib").symlink_to("usr")
    (tmp_path / "file").write_text("")
    argv = Bwrap().system([str(real), str(tmp_path / "lib"), str(tmp_path / "none")]).argv
    assert argv == ["bwrap", "--ro-bind", str(real), str(real),
                    "--symlink", "usr", str(tmp_path / "lib")]
    assert Bwrap().system([str(tmp_path / "file")], dirs_only=True).argv == ["bwrap"]
