"""TextWorld adapter: a real TextWorld engine playing a compiled game file (.z8/.ulx + .json),
and its prompt format (`TextWorldFormat`)."""

from __future__ import annotations

import re
import threading
from pathlib import Path

from a2c.runtime.envs.base import BadAction
from a2c.runtime.envs.prompts import PromptFormat, clean_text

MAX_ACTION_CHARS = 200
_NOT_PRINTABLE = re.compile(r"[^\x20-\x7e]+")


def engine_action(action: str) -> str:
    """The command the Z-machine is given: printable ASCII only, at most MAX_ACTION_CHARS.

    The interpreter reads ASCII; control characters hang it or crash the process (measured with
    random-model outputs), which would take every other episode of the evaluation with it."""
    text = " ".join(_NOT_PRINTABLE.sub(" ", action or "").split())[:MAX_ACTION_CHARS].strip()
    if not text:
        raise BadAction(f"no printable ASCII in action {action[:40]!r}")
    return text

_INFO_KEYS = ("admissible_commands", "won", "lost", "score", "max_score", "objective",
              "description", "policy_commands", "inventory")


# The Z-machine interpreter (Jericho/frotz) is not thread-safe: engine calls are serialised.
# They take milliseconds; model calls dominate a step.
ENGINE_LOCK = threading.RLock()


class TextWorldEnv:
    """One episode of one TextWorld game. Reward is the game's score gain; `won` ends it."""

    def __init__(self, game_file: str | Path, max_steps: int = 50):
        import textworld
        from textworld.envs.wrappers import Filter

        self.game_file = str(game_file)
        if not Path(self.game_file).is_file():
            raise FileNotFoundError(f"game file not found: {self.game_file}")
        infos = textworld.EnvInfos(**{k: True for k in _INFO_KEYS})
        with ENGINE_LOCK:
            self._env = textworld.start(self.game_file, infos, wrappers=[Filter])
        self.max_steps = max_steps
        self._score = 0

    def _info(self, raw: dict) -> dict:
        info = {k: raw.get(k) for k in _INFO_KEYS}
        info["won"] = bool(raw.get("won"))
        info["lost"] = bool(raw.get("lost"))
        if info["admissible_commands"]:
            info["admissible_commands"] = sorted(info["admissible_commands"])
        return info

    def reset(self) -> tuple[str, dict]:
        with ENGINE_LOCK:
            _, raw = self._env.reset()
        info = self._info(raw)
        self._score = raw.get("score") or 0
        info["task"] = clean_text(raw.get("objective") or "")
        return clean_text(raw.get("description") or ""), info

    def step(self, action: str) -> tuple[str, float, bool, dict]:
        command = engine_action(action)
        with ENGINE_LOCK:
            result = self._env.step(command)  # Filter: (obs, score, done, infos)
        obs, raw = result[0], result[-1]
        info = self._info(raw)
        score = raw.get("score") or 0
        reward = float(score - self._score)
        self._score = score
        done = info["won"] or info["lost"]
        text = clean_text(obs)
        # drop the end-of-game boilerplate the engine appends
        for marker in ("*** The End ***", "*** You lost! ***"):
            if marker in text:
                text = text.split(marker)[0].strip() + f"\n{marker}"
        return text, reward, done, info

    def close(self) -> None:
        with ENGINE_LOCK:
            self._env.close()


class TextWorldFormat(PromptFormat):
    kind = "textworld"
    system = ("You are playing a text adventure game. Read the goal and the observation, then "
              "reply with exactly one action from the list of valid actions and nothing else.")
    ACTION_RULE = PromptFormat.ACTION_RULE + (
        " The game reads ASCII: other characters become spaces, runs of spaces one space, and "
        "the command is cut at 200 characters; an action with nothing printable left is a bad "
        "action.")
