"""a2c.cpu_share: the threads torch may use are the cores other runnable tasks leave free,
read from the kernel's count of runnable tasks now (not the lagging load average)."""

from __future__ import annotations

import subprocess
import sys
import time

from a2c import cpu_share


def _loadavg(tmp_path, monkeypatch, text):
    path = tmp_path / "loadavg"
    path.write_text(text)
    monkeypatch.setattr(cpu_share, "LOADAVG", path)


def test_the_reader_is_not_counted_and_the_median_is_taken(tmp_path, monkeypatch):
    _loadavg(tmp_path, monkeypatch, "0.10 0.20 0.30 3/412 9999\n")
    assert cpu_share.runnable_others(samples=3, gap_s=0) == 2
    _loadavg(tmp_path, monkeypatch, "0.10 0.20 0.30 1/412 9999\n")
    assert cpu_share.runnable_others(samples=1) == 0


def test_an_unreadable_count_falls_back_to_every_core(tmp_path, monkeypatch):
    _loadavg(tmp_path, monkeypatch, "garbage\n")
    assert cpu_share.runnable_others() is None
    monkeypatch.setattr(cpu_share, "LOADAVG", tmp_path / "absent")
    monkeypatch.setattr(cpu_share.os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    assert cpu_share.free_threads(cores=4) == 4


def test_threads_are_the_free_cores_at_least_one(tmp_path, monkeypatch):
    monkeypatch.setattr(cpu_share.os, "getloadavg", lambda: (1.0, 1.0, 1.0))
    for running, threads in (("1", 4), ("2", 3), ("4", 1), ("9", 1)):
        _loadavg(tmp_path, monkeypatch, f"1.00 1.00 1.00 {running}/300 1\n")
        assert cpu_share.free_threads(cores=4) == threads
    _loadavg(tmp_path, monkeypatch, "1.00 1.00 1.00 1/300 1\n")
    monkeypatch.setattr(cpu_share.os, "getloadavg", lambda: (6.0, 1.0, 1.0))
    assert cpu_share.free_threads(cores=4) == 1          # a minute of overload: one thread


def test_a_real_busy_process_takes_a_core(monkeypatch):
    """On this machine: a spinning child is seen as runnable by the kernel's count."""
    monkeypatch.setattr(cpu_share.os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    idle = cpu_share.runnable_others()
    assert idle is not None
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        time.sleep(0.3)
        assert cpu_share.runnable_others() >= 2
        assert cpu_share.free_threads(cores=2) == 1
    finally:
        for proc in busy:
            proc.kill()
            proc.wait()
