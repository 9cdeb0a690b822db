"""`python -m a2c.contracts.schemas [--check]`: write (or check) the records' JSON Schemas."""

from __future__ import annotations

import sys

from .generate import SCHEMA_DIR, generate_all, render


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    stale = []
    for name, schema in generate_all().items():
        path = SCHEMA_DIR / f"{name}.schema.json"
        text = render(schema)
        if "--check" in argv:
            if not path.is_file() or path.read_text(encoding="utf-8") != text:
                stale.append(path)
        else:
            from a2c.fsutil import write_text_atomic

            write_text_atomic(path, text)
            print(path)
    for path in stale:
        print(f"{path}: differs from the record classes; run python -m a2c.contracts.schemas",
              file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
