"""The lines `a2c check` prints, one per point (PASS, WARN, FAIL, SKIP), and its exit status."""

from __future__ import annotations

from dataclasses import dataclass, field

EXIT_FAILED = 1
EXIT_CANNOT_CHECK = 3


@dataclass
class Report:
    """The numbered lines, printed as they come; failures decide the exit status. A WARN line
    passes: the point holds, with a reason to read (a gain that is small for the budget)."""

    failed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    warned: list[str] = field(default_factory=list)
    cannot_check: bool = False

    def ok(self, point: str, text: str) -> None:
        self._line("PASS", point, text)

    def warn(self, point: str, text: str) -> None:
        self.warned.append(point)
        self._line("WARN", point, text)

    def fail(self, point: str, text: str) -> None:
        self.failed.append(point)
        self._line("FAIL", point, text)

    def skip(self, point: str, text: str) -> None:
        self.skipped.append(point)
        self._line("SKIP", point, text)

    @staticmethod
    def _line(status: str, point: str, text: str) -> None:
        """One line per point: a model output's newlines are shown as \\n."""
        print(f"{status} {point} {text}".replace("\n", "\\n"), flush=True)

    def note(self, text: str) -> None:
        print(f"     {text}", flush=True)

    def finish(self, task: str, elapsed_s: float) -> int:
        """The closing line; the exit status: 0 passed, 1 a point failed, 3 not checkable here."""
        if self.failed:
            print(f"a2c check {task}: {len(self.failed)} point(s) failed ({elapsed_s:.1f}s)",
                  flush=True)
            return EXIT_FAILED
        if self.cannot_check:
            print(f"a2c check {task}: could not be checked here ({elapsed_s:.1f}s)", flush=True)
            return EXIT_CANNOT_CHECK
        notes = [f"{len(self.warned)} warning(s): read the WARN line"] if self.warned else []
        notes += [f"{len(self.skipped)} skipped"] if self.skipped else []
        print(f"a2c check {task}: passed ({elapsed_s:.1f}s{''.join(', ' + n for n in notes)})",
              flush=True)
        return 0
