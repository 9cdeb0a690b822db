"""The `textworld` data generator: TextWorld games made offline from a seed.

    generate(params, seed, out_dir) -> {"train": [records], "test": [records]}

Each game is generated with TextWorld's own generator (`textworld.generator.make_game` /
`compile_game`, what `tw-make custom` runs) and compiled into `out_dir/games/<id>.z8` (+ `.json`).
Records reference both by paths relative to `out_dir` (`game_file`: the story file the engine
runs; `game_json`: TextWorld's game description next to it, which the engine needs for the goal
and the admissible commands, so a copier of referenced files copies both) and carry the goal (`prompt`),
the expert walkthrough (`walkthrough`, `answer`) and the game seed. Splits use disjoint game seeds,
and games whose (goal, walkthrough) repeat an earlier one are skipped, so no held-out game is a
training game.

params (all optional): splits {name: count} (default {train: 40, test: 20}), nb_rooms (1),
nb_objects (4), quest_length (2), quest_breadth (1).
"""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

DEFAULTS = {"splits": {"train": 40, "test": 20}, "nb_rooms": 1, "nb_objects": 4,
            "quest_length": 2, "quest_breadth": 1}


def make_one(game_seed: int, out_path: Path, params: dict):
    """Generate and compile one game; returns (game, compiled path)."""
    import textworld
    from textworld.generator import compile_game, make_game

    opts = textworld.GameOptions()
    opts.seeds = int(game_seed)
    opts.nb_rooms = int(params["nb_rooms"])
    opts.nb_objects = int(params["nb_objects"])
    opts.quest_length = int(params["quest_length"])
    opts.quest_breadth = int(params["quest_breadth"])
    opts.path = str(out_path)
    opts.file_ext = out_path.suffix or ".z8"
    opts.force_recompile = True
    game = make_game(opts)
    path = compile_game(game, opts)
    return game, Path(path)


def generate(params: dict, seed: int, out_dir: Path, heldout_seed: int | None = None,
             heldout_splits: tuple[str, ...] = ()) -> dict[str, list[dict]]:
    """With `heldout_seed`, the splits named in `heldout_splits` draw their game seeds from it
    (after the other splits, which draw from `seed` in the spec's order as without it), so the
    spec's seed does not regenerate the held-out games (runtime/data/heldout_seed.py)."""
    p = {**DEFAULTS, **(params or {})}
    splits = dict(p["splits"])
    out_dir = Path(out_dir)
    (out_dir / "games").mkdir(parents=True, exist_ok=True)
    rng = random.Random(int(seed))
    held = set(heldout_splits) if heldout_seed is not None else set()
    held_rng = random.Random(int(heldout_seed)) if heldout_seed is not None else rng
    seen: set[str] = set()
    used_seeds: set[int] = set()
    result: dict[str, list[dict]] = {}
    order = [s for s in splits if s not in held] + [s for s in splits if s in held]
    for split in order:
        count = splits[split]
        split_rng = held_rng if split in held else rng
        records: list[dict] = []
        attempts = 0
        while len(records) < int(count):
            attempts += 1
            if attempts > 20 * int(count) + 50:
                raise RuntimeError(f"could not generate {count} distinct games for split {split!r}")
            gseed = split_rng.randrange(1, 2**31 - 1)
            if gseed in used_seeds:
                continue
            used_seeds.add(gseed)
            gid = f"tw-{split}-{len(records):04d}"
            rel = f"games/{gid}.z8"
            try:
                game, _ = make_one(gseed, out_dir / rel, p)
            except Exception:  # noqa: BLE001 - some seeds admit no quest of this shape: skip them
                continue
            walkthrough = list(game.walkthrough or [])
            objective = game.objective or ""
            sig = hashlib.sha256(json.dumps([objective, walkthrough]).encode()).hexdigest()
            if not walkthrough or sig in seen:
                for ext in (".z8", ".json", ".ni"):
                    (out_dir / "games" / f"{gid}{ext}").unlink(missing_ok=True)
                continue
            seen.add(sig)
            (out_dir / "games" / f"{gid}.ni").unlink(missing_ok=True)   # Inform source: unused
            records.append({"id": gid, "prompt": objective, "answer": " ; ".join(walkthrough),
                            "game_file": rel, "game_json": f"games/{gid}.json",
                            "walkthrough": walkthrough, "game_seed": gseed, "split": split})
        result[split] = records
    return {split: result[split] for split in splits}

