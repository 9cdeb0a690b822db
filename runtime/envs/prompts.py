"""The level-3 prompt formats by environment kind: `get_format(kind)` (the kind's `PromptFormat`
subclass, found through the registry), `describe` (what PROMPT_FORMAT.md renders) and each kind's
format class by name. The format itself — the generic `PromptFormat`, turns and history
truncation — is runtime/envs/prompt_format.py, re-exported here (the registry names it too).
"""

from __future__ import annotations

from a2c.runtime.envs.prompt_format import (
    OMITTED,
    ExampleEpisode,
    PromptFormat,
    Turn,
    approx_tokens,
    clean_text,
)

__all__ = ["EXAMPLE", "OMITTED", "PromptFormat", "Turn", "approx_tokens", "clean_text",
           "describe", "get_format"]

# A made-up two-step episode, used only to show the layout (the workspace's l3/PROMPT_FORMAT.md
# is rendered from it at compile time, so the document and the code cannot drift).
EXAMPLE = ExampleEpisode(
    task="First, open the chest. Then, take the key from the chest.",
    first_observation="-= Study =-\nYou are in a study. You can see a closed chest.",
    info={"admissible_commands": ["examine chest", "inventory", "look", "open chest"]},
    turns=(("open chest", "You open the chest, revealing a key.",
            {"admissible_commands": ["close chest", "examine chest", "examine key",
                                     "inventory", "look", "take key from chest"]}),),
)


def describe(kind: str, options: dict | None = None, history: dict | None = None) -> dict:
    """What the workspace documentation states about a format: constants and rendered examples."""
    fmt = get_format(kind, options)
    hist = history or {}
    ex = fmt.example or EXAMPLE                        # a format may bring its own example
    kwargs = {"max_tokens": hist.get("max_tokens"),
              "keep_first_turns": int(hist.get("keep_first_turns") or 0)}
    first = fmt.messages(ex.task, ex.first_observation, [], ex.info, **kwargs)
    turns = [Turn(a, o) for a, o, _ in ex.turns]
    second = fmt.messages(ex.task, ex.first_observation, turns, ex.turns[-1][2], **kwargs)
    return {"kind": fmt.kind, "format_class": type(fmt).__name__, "system": fmt.system,
            "list_actions": fmt.list_actions, "max_listed_actions": fmt.max_listed_actions,
            "omitted_marker": OMITTED, "action_rule": fmt.ACTION_RULE,
            "example_step1": first, "example_step2": second,
            "example_actions": [a for a, _, _ in ex.turns],
            "layout": fmt.layout(), "example_output": ex.turns[0][0]}


def get_format(kind: str, options: dict | None = None) -> PromptFormat:
    """The prompt format of an environment kind (`EnvKind.prompt_format`), built with `options`."""
    from a2c.runtime.envs.registry import find_kind

    env_kind = find_kind(kind)
    if env_kind is None:
        raise ValueError(f"no prompt format for environment kind {kind!r}")
    return env_kind.prompt_format()(options)


def __getattr__(name: str) -> type[PromptFormat]:
    """Each kind's format class by name (`a2c.runtime.envs.prompts.WebShopFormat`, as the
    workspace's PROMPT_FORMAT.md names it); the class lives in its kind's folder."""
    if not name.startswith("_"):
        from a2c.runtime.envs.registry import kinds

        for kind in kinds().values():
            cls = kind.prompt_format()
            if cls.__name__ == name:
                return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
