"""The built-in models and whether each is prepared in the cache: `a2c models list`'s rows and
`a2c doctor`'s model rows, read from the registry in runtime/models.py (which builds them)."""

from __future__ import annotations

from dataclasses import dataclass

from a2c.runtime.models import BUILTINS, builtin_dir, is_prepared


@dataclass(frozen=True)
class ModelState:
    """A built-in model and its cache state."""

    name: str
    description: str
    prepared: bool
    path: str


def list_models() -> list[ModelState]:
    """Every built-in, by name, with its cache state."""
    return [ModelState(name, spec.description, is_prepared(name), str(builtin_dir(name)))
            for name, spec in sorted(BUILTINS.items())]
