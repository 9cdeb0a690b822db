"""Environment kinds: how to build one episode's Env from a record, and the prompt formats.

    env_factory(env_cfg, data_root) -> Callable[[record], Env]
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path

from a2c.runtime.envs.base import Env

ADAPTERS = {"textworld": "a2c.runtime.envs.textworld_env", "alfworld": "a2c.runtime.envs.alfworld_env",
            "webshop": "a2c.runtime.envs.webshop_env",
            "deepsearchqa": "a2c.runtime.envs.deepsearchqa_env"}


def load_adapter(kind: str):
    """Import an adapter module (it registers its prompt format)."""
    if kind not in ADAPTERS:
        raise ValueError(f"unknown environment kind {kind!r} (known: {', '.join(ADAPTERS)})")
    return importlib.import_module(ADAPTERS[kind])

ENV_KINDS = ("textworld", "alfworld", "webshop", "deepsearchqa")
SCORE_BY_KIND = {"textworld": "success", "alfworld": "success", "webshop": "reward",
                 "deepsearchqa": "reward"}


def _resolve(root: Path, rel: str) -> Path:
    p = Path(rel)
    return p if p.is_absolute() else Path(root) / p


def env_factory(env_cfg: dict, data_root: str | Path) -> Callable[[dict], Env]:
    kind = env_cfg.get("kind")
    options = dict(env_cfg.get("options") or {})
    max_steps = int(env_cfg.get("max_steps", 50))
    root = Path(data_root)
    if kind == "textworld":
        from a2c.runtime.envs.textworld_env import TextWorldEnv
        return lambda rec: TextWorldEnv(_resolve(root, rec["game_file"]), max_steps=max_steps)
    mod = load_adapter(kind)
    if kind == "alfworld":
        return lambda rec: mod.AlfWorldEnv(_resolve(root, rec["game_file"]), options)
    if kind == "webshop":
        return lambda rec: mod.WebShopEnv(rec, options)
    if kind == "deepsearchqa":
        searcher = mod.make_search(options, root)
        return lambda rec: mod.DeepSearchQAEnv(rec, searcher, options)
    raise ValueError(f"unknown environment kind {kind!r} (known: {', '.join(ENV_KINDS)})")
