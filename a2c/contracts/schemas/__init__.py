"""JSON Schemas (Draft 2020-12) of the records, generated from the record classes.

`python -m a2c.contracts.schemas` (re)writes `a2c/contracts/schemas/*.schema.json`;
`python -m a2c.contracts.schemas --check` exits 1 when a committed schema differs from the classes.
The schemas are permissive the way the readers are: extra keys are allowed and fields with a
default may be missing (an older record still validates); what is there must have the right type.
"""

from __future__ import annotations

from a2c.contracts.schema_of import SCHEMA_DIR, load_schema

from .generate import generate_all, write_all

__all__ = ["SCHEMA_DIR", "generate_all", "load_schema", "write_all"]
