"""Open a page in real headless Chromium: DOM after scripts ran, console messages, screenshot."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars", "--enable-logging=stderr", "--v=0"]
CONSOLE = re.compile(r":CONSOLE(?:\(\d+\)|:\d+)\]\s*(.*)")


def chromium() -> str | None:
    for name in (os.environ.get("A2C_CHROMIUM"), "/usr/bin/chromium", "chromium",
                 "chromium-browser", "google-chrome"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


@dataclass
class PageCheck:
    dom: str
    console: list[str]


def _run(args: list[str], timeout: float) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory(prefix="a2c-chromium-") as profile:
        return subprocess.run([chromium(), *FLAGS, f"--user-data-dir={profile}", *args],
                              capture_output=True, text=True, timeout=timeout, check=False)


def _console(stderr: str) -> list[str]:
    return [m.group(1) for line in stderr.splitlines() for m in [CONSOLE.search(line)] if m]


def open_page(page: Path, timeout: float = 90) -> PageCheck:
    proc = _run(["--dump-dom", page.resolve().as_uri()], timeout)
    return PageCheck(dom=proc.stdout, console=_console(proc.stderr))


def screenshot(page: Path, out: Path, size: str = "1100,2400", timeout: float = 90) -> list[str]:
    proc = _run([f"--window-size={size}", f"--screenshot={out}", page.resolve().as_uri()],
                timeout)
    return _console(proc.stderr)
