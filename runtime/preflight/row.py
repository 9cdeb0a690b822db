"""One row of `a2c doctor` and of a pre-flight (`Check`), its statuses, and the probe the rows
share (run a command, keep its first line).

Why apart: every group of checks (isolation.py, demo.py, optional.py) makes rows and the sets
(`__init__.py`) order them; the row is the one thing they all need.
"""

from __future__ import annotations

import subprocess
from dataclasses import asdict, dataclass

OK, WARN, MISSING = "ok", "warn", "missing"
STATUSES = (OK, WARN, MISSING)
PROBE_TIMEOUT_S = 20


@dataclass(frozen=True)
class Check:
    """One row: what was checked, ok | warn | missing, what was found, the command that fixes
    it (None when nothing needs fixing), and whether the demo needs it (`required`; a required
    row that is `warn` works as it is: a model prepared on first use, a key the first run
    makes)."""

    name: str
    status: str
    detail: str
    fix: str | None = None
    required: bool = False

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"check {self.name}: status {self.status!r} is not one of "
                             f"{', '.join(STATUSES)}")

    @property
    def ok(self) -> bool:
        return self.status == OK

    def as_dict(self) -> dict:
        return asdict(self)

    def line(self) -> str:
        """One line for a pre-flight: `name: detail (fix: command)`."""
        return f"{self.name}: {self.detail}" + (f" (fix: {self.fix})" if self.fix else "")


def run_probe(argv: list[str]) -> tuple[bool, str]:
    """(it exited 0, the first line it printed): a probe that starts the least that answers."""
    try:
        proc = subprocess.run(argv, capture_output=True, timeout=PROBE_TIMEOUT_S, text=True)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, str(exc)
    first = (proc.stderr or proc.stdout).strip().splitlines()
    return proc.returncode == 0, first[0][:200] if first else f"exit {proc.returncode}"
