"""The `alfworld` data generator: lists fetched ALFWorld games into records.

    source: {generator: alfworld, params: {root: null, splits: {train: train, test: valid_unseen},
                                           limit: {}, task_types: [...]}}

`root` is the folder `a2c data fetch alfworld` made (default: the cache's `data/alfworld`); games
are the folders under `json_2.1.1/<split>/` holding both `traj_data.json` and `game.tw-pddl`,
skipped as alfworld's `AlfredTWEnv` skips them (`movable`/`Sliced` folders, `solvable` false or
missing), sorted by path. valid_unseen gives the 134 evaluation games. Each game file is copied
into the generator's folder (with a small traj_data.json: task type, params, annotations) so the
run can hand the agent split to the agent and the held-out split to the grader only.
Records: `{"id": "valid_unseen/<task>/<trial>", "prompt": <task annotation>, "answer": null,
"game_file": "games/<split>/<task>/<trial>/game.tw-pddl", "traj_file": ..., "task_type": ...}`.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from a2c.runtime.data.generators import DataError
from a2c.runtime.envs.alfworld.traj import FILE as TRAJ_FILE
from a2c.runtime.envs.alfworld.traj import TrajData

ALL_TASK_TYPES = ("pick_and_place_simple", "look_at_obj_in_light", "pick_clean_then_place_in_recep",
                  "pick_heat_then_place_in_recep", "pick_cool_then_place_in_recep",
                  "pick_two_obj_and_place")


def list_games(split_dir: Path, task_types=ALL_TASK_TYPES) -> list[Path]:
    games = []
    for traj in sorted(split_dir.glob(f"*/*/{TRAJ_FILE}")):
        folder = traj.parent
        if "movable" in str(folder) or "Sliced" in str(folder):
            continue
        game = folder / "game.tw-pddl"
        if not game.is_file():
            continue
        try:
            if not json.loads(game.read_text(encoding="utf-8")).get("solvable"):
                continue
            if TrajData.read(traj).task_type not in task_types:
                continue
        except ValueError:
            continue
        games.append(folder)
    return games


def generate(params: dict, seed: int, out_dir: Path) -> dict:
    known = {"root", "splits", "limit", "task_types"}
    if set(params) - known:
        raise DataError(f"alfworld: unknown params {sorted(set(params) - known)}; known: {sorted(known)}")
    if params.get("root"):
        root = Path(params["root"]).expanduser()
    else:
        from a2c.runtime.data.fetch import default_dest
        root = default_dest("alfworld")
    base = root / "json_2.1.1"
    if not base.is_dir():
        raise DataError(f"alfworld: no ALFWorld data at {root} (expected json_2.1.1/); run "
                        f"`a2c data fetch alfworld` first (or set params.root)")
    splits = params.get("splits") or {"train": "train", "test": "valid_unseen"}
    limit = params.get("limit") or {}
    task_types = tuple(params.get("task_types") or ALL_TASK_TYPES)
    out: dict[str, list[dict]] = {}
    for name, folder in splits.items():
        games = list_games(base / folder, task_types)
        if not games:
            raise DataError(f"alfworld: no playable games under {base / folder}")
        if limit.get(name):
            games = games[: int(limit[name])]
        recs = []
        for g in games:
            rel = g.relative_to(base)
            dst = out_dir / "games" / rel
            dst.mkdir(parents=True, exist_ok=True)
            shutil.copy2(g / "game.tw-pddl", dst / "game.tw-pddl")
            traj = TrajData.read(g / TRAJ_FILE)
            (dst / TRAJ_FILE).write_text(json.dumps(traj.slim(), sort_keys=True) + "\n")
            recs.append({"id": rel.as_posix(), "prompt": traj.task_descs[0], "answer": None,
                         "game_file": f"games/{rel.as_posix()}/game.tw-pddl",
                         "traj_file": f"games/{rel.as_posix()}/{TRAJ_FILE}",
                         "task_type": traj.task_type})
        out[name] = recs
    return out
