"""Data generators: built-in tasks whose data the project makes itself, deterministic from a seed.

A generator is `fn(params: dict, seed: int, out_dir: Path) -> {split: [records]}`. It may write
files into `out_dir` (for example text-game files) and reference them from records by paths
relative to `out_dir`. Register one with `@register("name")`. Generators living in optional areas
are imported lazily by name (`LAZY`), so the data layer does not depend on them.
"""

from __future__ import annotations

import importlib
import random
from collections.abc import Callable
from pathlib import Path

from a2c.errors import A2CError

Generator = Callable[[dict, int, Path], dict]

_REGISTRY: dict[str, Generator] = {}
# name -> module that registers it when imported
LAZY: dict[str, str] = {"textworld": "a2c.runtime.envs.textworld_games",
                        "alfworld": "a2c.runtime.data.alfworld",
                        "webshop": "a2c.runtime.envs.webshop_env",
                        "deepsearchqa": "a2c.runtime.envs.deepsearchqa_env"}


class DataError(A2CError):
    """Data cannot be found, loaded, sliced or mapped as the task says."""


def register(name: str) -> Callable[[Generator], Generator]:
    def wrap(fn: Generator) -> Generator:
        _REGISTRY[name] = fn
        return fn
    return wrap


def get_generator(name: str) -> Generator:
    if name not in _REGISTRY and name in LAZY:
        try:
            importlib.import_module(LAZY[name])
        except ModuleNotFoundError as exc:
            raise DataError(f"generator {name!r} needs module {LAZY[name]} ({exc})") from None
    try:
        return _REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(set(_REGISTRY) | set(LAZY)))
        raise DataError(f"unknown data generator {name!r}; known: {known}") from None


def names() -> list[str]:
    return sorted(set(_REGISTRY) | set(LAZY))


# --------------------------------------------------------------------------------------------
# arithmetic: "What is A plus B?" with a '#### C' answer format
# --------------------------------------------------------------------------------------------
ARITH_QUESTION = "What is {a} plus {b}? End your reply with '#### ' followed by the number."


@register("arithmetic")
def arithmetic(params: dict, seed: int, out_dir: Path) -> dict:
    """Addition problems A + B with low <= A, B <= high; train and test pairs are disjoint.

    Params: low (10), high (99), train_size (1000), test_size (100). Disjoint means no unordered
    pair {A, B} of the test split appears in the train split in either order. Records:
    `{"id": "train-0", "question": ..., "answer": "C", "a": A, "b": B}`.
    """
    known = {"low", "high", "train_size", "test_size"}
    unknown = set(params) - known
    if unknown:
        raise DataError(f"arithmetic: unknown params {sorted(unknown)}; known: {sorted(known)}")
    low = int(params.get("low", 10))
    high = int(params.get("high", 99))
    train_size = int(params.get("train_size", 1000))
    test_size = int(params.get("test_size", 100))
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

    def records(split: str, pairs: list[tuple[int, int]]) -> list[dict]:
        out = []
        for i, (a, b) in enumerate(pairs):
            if rng.random() < 0.5:
                a, b = b, a
            out.append({"id": f"{split}-{i}", "question": ARITH_QUESTION.format(a=a, b=b),
                        "answer": str(a + b), "a": a, "b": b})
        return out

    return {"train": records("train", train_keys), "test": records("test", test_keys)}
