"""The HTML report in real headless Chromium: scripts run, the plot is laid out, no console
errors, and a screenshot is saved as an artifact (tmp_path; $A2C_SCREENSHOT_OUT to keep a copy)."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from a2c.analysis.report import write_report


def _helpers():
    import importlib.util
    import sys

    path = Path(__file__).with_name("chromium_page.py")
    spec = importlib.util.spec_from_file_location("a2c_test_chromium_page", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


_page = _helpers()
chromium, open_page, screenshot = _page.chromium, _page.open_page, _page.screenshot

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(chromium() is None, reason="chromium is not installed")]


def test_browser_detects_console_errors(tmp_path):
    """The console check itself works: a page that logs an error and throws is caught."""
    page = tmp_path / "bad.html"
    page.write_text("<html><body><script>console.error('boom'); nope();</script></body></html>")
    messages = open_page(page).console
    assert any("boom" in m for m in messages)
    assert any("nope is not defined" in m for m in messages)


@pytest.mark.parametrize("forced", [False, True], ids=["verified", "forced-unverified"])
def test_report_in_headless_chromium(fixture_run, tmp_path, forced):
    if forced:
        lines = (fixture_run / "events.jsonl").read_bytes().splitlines(keepends=True)
        lines[4] = lines[4].replace(b'"type":"', b'"type":"x')
        (fixture_run / "events.jsonl").write_bytes(b"".join(lines))
    report, paths = write_report(fixture_run, tmp_path / "report", force=forced)
    check = open_page(paths.html)
    assert check.console == [], check.console
    body = re.search(r"<body[^>]*>", check.dom).group(0)
    n = report["metrics"]["n_submissions"]
    assert f'data-plot-points="{n}"' in body  # the inline script ran to the end
    assert 'data-plot-box="860x340"' in body  # the plot is laid out at full size
    svg = re.search(r'<svg [^>]*id="score-plot".*?</svg>', check.dom, re.DOTALL).group(0)
    assert len(re.findall(r'class="sub (?:valid|invalid)', svg)) == n
    assert ('id="unverified"' in check.dom) is forced
    shot = tmp_path / f"report-{'forced' if forced else 'verified'}.png"
    assert screenshot(paths.html, shot) == []
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 30_000  # a blank page compresses to a few kB
    keep = os.environ.get("A2C_SCREENSHOT_OUT")
    if keep and not forced:
        Path(keep).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, keep)


def test_driver_steps_in_headless_chromium(fixture_run, maker, tmp_path):
    """The driver section's steps and a level-3 episode lay out in a real browser: no console
    errors, collapsed text opens, nothing runs off the page."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "trajectory"))
    import driver_record

    driver_record.add_to_run(fixture_run, maker, "codex", stream=True, exhausted_at=960.0)
    _, paths = write_report(fixture_run, tmp_path / "report")
    check = open_page(paths.html)
    assert check.console == [], check.console
    assert check.dom.count('class="step agent"') == 6 and 'id="shell-commands"' in check.dom
    shot = tmp_path / "driver.png"
    assert screenshot(paths.html, shot) == []
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
