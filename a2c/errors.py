"""User-facing errors.

Every error a user can cause (bad spec, bad path, refused request) is raised as an `A2CError`
so the CLI can print one clear message and exit with a meaningful status instead of a traceback.
"""

from __future__ import annotations


class A2CError(Exception):
    """An error caused by the user's input or environment; printed without a traceback."""

    exit_code = 1


class SpecError(A2CError):
    """One or more spec problems. `problems` holds every message (file:line:col: path: what)."""

    exit_code = 2

    def __init__(self, problems: list[str] | str):
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        super().__init__("\n".join(self.problems))


class SpecDeprecationWarning(FutureWarning):
    """A spec uses a field name a later a2c will refuse (compiler/renamed.py); a FutureWarning,
    so it is shown by default: it is meant for the spec's author. The CLI prints it as one line."""


class BundleError(A2CError):
    """A bundle is missing, stale, tampered with or from an incompatible compiler."""

    exit_code = 2


class RunError(A2CError):
    """A run could not be started, resumed or completed."""

    exit_code = 1
