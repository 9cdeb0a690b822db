"""Data generators: built-in tasks whose data the project makes itself, deterministic from a seed.

A generator is `fn(params: dict, seed: int, out_dir: Path) -> {split: [records]}`. It may write
files into `out_dir` (for example text-game files) and reference them from records by paths
relative to `out_dir`. Register one with `@register("name")`. An environment kind brings its own
generator (`EnvKind.generator`, `EnvKind.data_generator()`, runtime/envs/registry.py); it is
imported the first time it is asked for, so the data layer does not depend on the engines.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path

from a2c.contracts.records import Record
from a2c.errors import A2CError

Generator = Callable[[dict, int, Path], dict]

_REGISTRY: dict[str, Generator] = {}


class DataError(A2CError):
    """Data cannot be found, loaded, sliced or mapped as the task says."""


def register(name: str) -> Callable[[Generator], Generator]:
    def wrap(fn: Generator) -> Generator:
        _REGISTRY[name] = fn
        return fn
    return wrap


def _env_generators() -> dict:
    """Generator name -> the environment kind that brings it."""
    from a2c.runtime.envs.registry import generators as env_generators
    return env_generators()


def get_generator(name: str) -> Generator:
    if name in _REGISTRY:
        return _REGISTRY[name]
    kind = _env_generators().get(name)
    if kind is None:
        raise DataError(f"unknown data generator {name!r}; known: {', '.join(names())}")
    try:
        return kind.data_generator()
    except ModuleNotFoundError as exc:
        raise DataError(f"generator {name!r} (environment kind {kind.name!r}) needs module "
                        f"{exc.name} ({exc})") from None


def names() -> list[str]:
    return sorted(set(_REGISTRY) | set(_env_generators()))


# --------------------------------------------------------------------------------------------
# arithmetic: "What is A plus B?" with a '#### C' answer format
# --------------------------------------------------------------------------------------------
ARITH_QUESTION = "What is {a} plus {b}? End your reply with '#### ' followed by the number."


@dataclass
class ArithmeticParams(Record):
    """The arithmetic generator's params, each default once."""

    low: int = 10
    high: int = 99
    train_size: int = 1000
    test_size: int = 100


@register("arithmetic")
def arithmetic(params: dict, seed: int, out_dir: Path, heldout_seed: int | None = None,
               heldout_splits: tuple[str, ...] = ()) -> dict:
    """Addition problems A + B with low <= A, B <= high; train and test pairs are disjoint.

    Params: low (10), high (99), train_size (1000), test_size (100). Disjoint means no unordered
    pair {A, B} of the test split appears in the train split in either order. Records:
    `{"id": "train-0", "question": ..., "answer": "C", "a": A, "b": B}`.

    With `heldout_seed` (and "test" in `heldout_splits`) the train split is exactly the one
    `seed` gives, and the test split is drawn with `heldout_seed` from the pairs that are neither
    in it nor in the test split `seed` alone would give (so the spec's seed names none of them).
    """
    known = {f.name for f in fields(ArithmeticParams)}
    unknown = set(params) - known
    if unknown:
        raise DataError(f"arithmetic: unknown params {sorted(unknown)}; known: {sorted(known)}")
    p = ArithmeticParams.from_dict(params)
    low, high = int(p.low), int(p.high)
    train_size, test_size = int(p.train_size), int(p.test_size)
    if low > high or train_size < 0 or test_size < 0:
        raise DataError(f"arithmetic: bad params low={low} high={high} "
                        f"train_size={train_size} test_size={test_size}")
    n = high - low + 1
    unordered = n * (n + 1) // 2
    if train_size + test_size > unordered:
        raise DataError(f"arithmetic: {train_size + test_size} problems requested but only "
                        f"{unordered} distinct pairs exist in [{low}, {high}]")
    rng = random.Random(seed)
    keys = [(a, b) for a in range(low, high + 1) for b in range(a, high + 1)]
    chosen = rng.sample(keys, train_size + test_size)   # distinct unordered pairs
    test_keys, train_keys = chosen[:test_size], chosen[test_size:]

    def records(split: str, pairs: list[tuple[int, int]], rng: random.Random) -> list[dict]:
        out = []
        for i, (a, b) in enumerate(pairs):
            if rng.random() < 0.5:
                a, b = b, a
            out.append({"id": f"{split}-{i}", "question": ARITH_QUESTION.format(a=a, b=b),
                        "answer": str(a + b), "a": a, "b": b})
        return out

    if heldout_seed is None or "test" not in heldout_splits:
        train = records("train", train_keys, rng)
        return {"train": train, "test": records("test", test_keys, rng)}
    if set(heldout_splits) - {"test"}:
        raise DataError(f"arithmetic: only the 'test' split can be held out, not "
                        f"{sorted(set(heldout_splits) - {'test'})}")
    train = records("train", train_keys, rng)     # the same draws as without a held-out seed
    rng = random.Random(heldout_seed)
    banned = set(chosen)
    pool = [k for k in keys if k not in banned]
    if len(pool) < test_size:                     # a small range: only the train pairs are out
        banned = set(train_keys)
        pool = [k for k in keys if k not in banned]
    return {"train": train, "test": records("test", rng.sample(pool, test_size), rng)}
