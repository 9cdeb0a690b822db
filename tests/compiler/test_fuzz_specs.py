"""Mutated shipped specs through validate and build: only the project's own errors, nothing written.

Each case takes a shipped spec (task, agent, suite or base), applies one to three seeded mutations
(lines deleted, duplicated, swapped or re-indented; scalars replaced by mappings, lists, YAML tags,
aliases, huge numbers or non-UTF-8 bytes; a character replaced by YAML punctuation; truncation;
inserted tags and anchors) and pushes it
through `validate` and `build` in this process. Any exception other than an A2CError is a crash;
a spec that errors must leave its output directory empty.

`python tests/compiler/test_fuzz_specs.py SEED [N]` runs one seed by hand and prints every crash.
"""

from __future__ import annotations

import random
import shutil
import sys
import traceback
from pathlib import Path

from a2c.compiler.build import build_specs, load_all
from a2c.errors import A2CError
from a2c.paths import SPECS_DIR

CASES = 1000
SEED = 20261201

SCALARS = [
    "{a: 1}", "[1, 2]", "[]", "{}", "{file: {a: 1}}", "!!python/object:os.system x",
    "!!python/object/apply:os.system ['true']", "!!binary zz", "!!int abc", "!!float x",
    "!!bool maybe", "!!timestamp never", "!!map x", "!!set {a}", "!foo bar", "!!str", "*nope",
    "&a [*a]", "&b {k: *b}", "99999999999999999999999999999", "-99999999999999999999",
    "1.0e+400", ".inf", "-.inf", ".nan", "-1", "0", '""', "null", "~", "true", "'x' 'y'",
    "2020-01-01", "0x1F", "1_000", "12h", "1.5h", "0s", "a" * 300, "'\\u0000'", "\"\\x00\"",
    "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]", "? a", "- x", "|", ">-",
    "&anchor", "*anchor", "{a: 1, a: 2}", "!!omap [a: 1]", "!!pairs [a: 1]", "%TAG ! x",
]
INSERTS = [
    "x: &a [*a]", "y: &b {k: *b}", "<<: {a: 1}", "!!python/object:os.system x: 1",
    "tag: !!python/name:os.system", "z: !!binary aGVsbG8=", "deep: " + "[" * 200 + "]" * 200,
    "deep: " + "{a: " * 120 + "1" + "}" * 120, "--- !!map", "...", "? [a, b]\n: c",
    "%YAML 1.1", "&top", "*top", "extends: ../tasks/arith.yaml", "extends: {a: 1}",
    "extends: ''", "kind: {a: 1}", "kind: [Task]", "id: {a: 1}", "apiVersion: [1]",
]


def _shipped() -> list[Path]:
    return sorted(p for p in SPECS_DIR.rglob("*.y*ml") if p.is_file())


def _scalar_spans(line: str) -> list[tuple[int, int]]:
    """Where a `key: value` or `- value` line's value sits, if it has one."""
    spans = []
    stripped = line.lstrip(" ")
    head = len(line) - len(stripped)
    if stripped.startswith("- "):
        spans.append((head + 2, len(line)))
    colon = line.find(": ", head)
    if colon > 0 and not stripped.startswith("#"):
        spans.append((colon + 2, len(line)))
    return spans


def mutate(text: str, rng: random.Random) -> bytes:
    lines = text.split("\n")
    raw_tail = b""
    for _ in range(rng.randint(1, 3)):
        if not lines:
            lines = [""]
        i = rng.randrange(len(lines))
        op = rng.randrange(11)
        if op == 0:
            del lines[i]
        elif op == 1:
            lines.insert(i, lines[i])
        elif op == 2:
            j = rng.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
        elif op == 3:
            delta = rng.choice([-4, -2, -1, 1, 2, 3])
            lines[i] = " " * max(0, len(lines[i]) - len(lines[i].lstrip(" ")) + delta) \
                + lines[i].lstrip(" ")
        elif op in (4, 5, 6):
            spans = [s for k, ln in enumerate(lines) for s in
                     ((k, *span) for span in _scalar_spans(ln))]
            if spans:
                k, a, b = rng.choice(spans)
                lines[k] = lines[k][:a] + rng.choice(SCALARS) + lines[k][b:]
        elif op == 7:
            indent = rng.choice(["", "  ", "    "])
            lines.insert(i, indent + rng.choice(INSERTS))
        elif op == 8:
            joined = "\n".join(lines)
            cut = rng.randrange(len(joined) + 1)
            lines = joined[:cut].split("\n")
        elif op == 9 and lines[i]:
            k = rng.randrange(len(lines[i]))
            lines[i] = lines[i][:k] + rng.choice(":-[]{}&*!|>'\"%@`#,? \\") + lines[i][k + 1:]
        else:
            raw_tail = rng.choice([b"\xff", b"\xe9t\xe9", b"\x00", b"\xc3", b"\xed\xa0\x80"])
            k = rng.randrange(len(lines))
            lines[k] = lines[k] + "\udcff"       # placeholder, replaced by raw bytes below
    data = "\n".join(lines).encode("utf-8", errors="surrogateescape")
    if raw_tail:
        data = data.replace(b"\xff", raw_tail, 1)
    return data


def run_cases(workdir: Path, seed: int, cases: int) -> tuple[list[str], int]:
    """Push `cases` mutated specs through validate and build; return (crashes, errors seen)."""
    specs = workdir / "specs"
    shutil.copytree(SPECS_DIR, specs, ignore=shutil.ignore_patterns("__pycache__", "*.py"))
    originals = {p: p.read_text(encoding="utf-8") for p in _shipped()}
    targets = [(specs / p.relative_to(SPECS_DIR), text) for p, text in originals.items()]
    rng = random.Random(seed)
    crashes, errors = [], 0
    for n in range(cases):
        path, text = rng.choice(targets)
        path.write_bytes(mutate(text, rng))
        spec = specs / "tasks" / "gsm8k.yaml" if path.parent.name == "base" else path
        out = workdir / "out" / str(n)
        try:
            try:
                load_all([spec])
            except A2CError:
                errors += 1
                try:
                    build_specs([spec], out)
                except A2CError:
                    pass
                else:
                    crashes.append(f"case {n} ({path.name}): validate failed but build passed")
                if out.exists() and any(out.rglob("*")):
                    crashes.append(f"case {n} ({path.name}): a failing spec wrote {out}")
            else:
                build_specs([spec], out)
        except A2CError:
            pass          # e.g. a valid base file that is not a buildable spec on its own
        except Exception as exc:     # noqa: BLE001 - the point: anything else is a crash
            frame = traceback.extract_tb(exc.__traceback__)[-1]
            crashes.append(f"case {n} ({path.name}): {type(exc).__name__}: {str(exc)[:200]} "
                           f"at {Path(frame.filename).name}:{frame.lineno}")
        finally:
            path.write_text(text, encoding="utf-8")
            shutil.rmtree(out, ignore_errors=True)
    return crashes, errors


def test_mutated_specs_give_only_project_errors(tmp_path):
    crashes, errors = run_cases(tmp_path, SEED, CASES)
    assert not crashes, "\n".join(crashes)
    assert errors > CASES // 3          # the mutations do reach the error paths


if __name__ == "__main__":   # pragma: no cover - manual exploration with other seeds
    import tempfile
    seed = int(sys.argv[1]) if len(sys.argv) > 1 else SEED
    count = int(sys.argv[2]) if len(sys.argv) > 2 else CASES
    with tempfile.TemporaryDirectory() as tmp:
        found, errs = run_cases(Path(tmp), seed, count)
    print("\n".join(found))
    print(f"seed {seed}: {count} cases, {errs} spec errors, {len(found)} crashes")
