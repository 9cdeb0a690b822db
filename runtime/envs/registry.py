"""Environment kinds by name: each kind is a folder `runtime/envs/<kind>/` whose `kind.py` defines
an `EnvKind` and registers it with `@env_kind`.

    kind = get_kind("webshop")
    factory = kind.env_factory(env, data_root)         # record -> Env (env: the RolloutEnvSpec)
    fmt = kind.prompt_format()(options)                # its PromptFormat
    kind.score_key                                     # "success" | "reward"
    kind.generator, kind.data_generator()              # its data generator, if it has one
    kind.agent_path_filter()                           # optional hook: the agent's proxy rule

Registration is lazy: this module imports only the standard library, and the kinds' `kind.py`
modules (small, no engine imports: each imports its engine or adapter only when a method asks for
it) are imported the first time a kind is looked up. Adding a kind = adding a folder with a
`kind.py` (see docs/level3.md, "Adding an environment kind").
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    from a2c.contracts.spec import RolloutEnvSpec
    from a2c.runtime.envs.base import Env
    from a2c.runtime.envs.prompt_format import PromptFormat

Generator = Callable[[dict, int, Path], dict]
PathFilter = Callable[[str], bool]


class EnvKind:
    """One environment kind. Subclass it in `runtime/envs/<kind>/kind.py` and decorate the
    subclass with `@env_kind`; override `env_factory` and `prompt_format`, and the optional
    hooks where the kind has them (each has a default)."""

    name: ClassVar[str] = ""
    score_key: ClassVar[str] = "success"          # an item's score: "success" (won) or "reward"
    generator: ClassVar[str | None] = None        # the data generator this kind brings, by name

    def env_factory(self, env: RolloutEnvSpec, data_root: Path) -> Callable[[dict], Env]:
        """How one episode's Env is built from a record (`env`: the grader's `env`, typed)."""
        raise NotImplementedError

    def prompt_format(self) -> type[PromptFormat]:
        """The kind's evaluation prompt format (a `PromptFormat` subclass)."""
        raise NotImplementedError

    # -- optional hooks ------------------------------------------------------------------------
    def data_generator(self) -> Generator:
        """The function behind `generator` (`fn(params, seed, out_dir) -> {split: [records]}`)."""
        raise NotImplementedError(f"environment kind {self.name!r} has no data generator")

    def agent_path_filter(self) -> Callable[[list[dict]], PathFilter] | None:
        """For kinds served by an environment service: given the agent split's records, the rule
        saying which request paths the agent's proxy passes (`env_services.proxy.agent_proxies`).
        None (the default): the kind needs no proxy."""
        return None


_KINDS: dict[str, EnvKind] = {}
_discovered = False


def env_kind(cls: type[EnvKind]) -> type[EnvKind]:
    """Class decorator: register an `EnvKind` subclass under its `name`."""
    if not cls.name:
        raise ValueError(f"{cls.__name__}: an EnvKind needs a name")
    if cls.name in _KINDS and type(_KINDS[cls.name]) is not cls:
        raise ValueError(f"environment kind {cls.name!r} is registered twice "
                         f"({type(_KINDS[cls.name]).__name__}, {cls.__name__})")
    _KINDS[cls.name] = cls()
    return cls


def _discover() -> None:
    """Import every `runtime/envs/<kind>/kind.py` (once); each registers its kind."""
    global _discovered
    if _discovered:
        return
    for info in sorted(pkgutil.iter_modules([str(Path(__file__).parent)]), key=lambda m: m.name):
        if info.ispkg and (Path(__file__).parent / info.name / "kind.py").is_file():
            importlib.import_module(f"{__package__}.{info.name}.kind")
    _discovered = True


def kinds() -> dict[str, EnvKind]:
    _discover()
    return dict(_KINDS)


def names() -> list[str]:
    return sorted(kinds())


def find_kind(name: str | None) -> EnvKind | None:
    return kinds().get(name) if name else None


def get_kind(name: str | None) -> EnvKind:
    kind = find_kind(name)
    if kind is None:
        raise ValueError(f"unknown environment kind {name!r} (known: {', '.join(names())})")
    return kind


def generators() -> dict[str, EnvKind]:
    """Data generator name -> the kind that brings it."""
    return {k.generator: k for k in kinds().values() if k.generator}


def score_key(name: str) -> str:
    kind = find_kind(name)
    return kind.score_key if kind else "success"


def resolve_path(root: Path, rel: str) -> Path:
    """A record's path (`game_file`, ...) against the data root, unless it is absolute."""
    p = Path(rel)
    return p if p.is_absolute() else Path(root) / p


def env_factory(env_cfg: dict, data_root: str | Path) -> Callable[[dict], Env]:
    """record -> Env for grader.json's `env` object as an agent's script reads it (the
    workspace's rollout_example.py): parsed here, at that boundary, into the RolloutEnvSpec its
    kind receives (`factory_for`)."""
    from a2c.contracts.spec import RolloutEnvSpec
    return factory_for(RolloutEnvSpec.from_dict(env_cfg), data_root)


def factory_for(env: RolloutEnvSpec, data_root: str | Path) -> Callable[[dict], Env]:
    """record -> Env for a typed `env` (the reference agents read l3/env.json into one:
    a2c.contracts.l3_env_file)."""
    return get_kind(env.kind).env_factory(env, Path(data_root))
