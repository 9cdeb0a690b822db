"""The rendered INSTRUCTIONS.md keeps its lines apart: a block tag at the end of a line (Jinja's
trim_blocks) once swallowed the newline after "top-p: 1.0" (issue 25)."""

from __future__ import annotations

import re

from a2c.paths import project_root


def test_generation_settings_are_one_per_line():
    pages = sorted((project_root() / "generated").glob("*/workspace/INSTRUCTIONS.md"))
    assert pages
    for page in pages:
        text = page.read_text(encoding="utf-8")
        assert not re.search(r"top-p: [\d.]+- ", text), page
        line = next(ln for ln in text.splitlines() if "top-p:" in ln)
        assert re.search(r"top-p: [\d.]+( · stop at: .*)?$", line), (page, line)
