"""ALFWorld adapter: text-only ALFWorld games (TextWorld PDDL engine) with the ReAct prompt.

A game is a folder of the ALFWorld data (`json_2.1.1/<split>/<task>/<trial>/`) holding
`game.tw-pddl` (a TextWorld PDDL game: the ALFRED domain, the grammar with the task text, the
problem) and `traj_data.json` (ALFRED metadata; we read only `task_type`). `a2c data fetch
alfworld` downloads them; the `alfworld` data generator lists them into records.

Engines. The default engine `textworld` plays the game file with the real engine, the way
alfworld's own `AlfredTWEnv` does: TextWorld's `tw-pddl` environment (fast-downward) wrapped with
alfworld's `AlfredDemangler(shuffle=False)` and `AlfredInfos`, asking for `won` and
`admissible_commands` (`textworld.gym` builds exactly this per game; we call `textworld.start`
directly, one episode per Env, so episodes run in `EnvBatch` threads without gym's subprocesses).
It needs the optional packages `alfworld` and `textworld[pddl]`. Other engines can be registered
by name (`register_engine`), e.g. the tests' fake engine over fixture games.

Engine-independent parts (unit-tested without alfworld):
- the observation: the "-= Welcome to TextWorld, ALFRED! =-" header dropped, as ReAct does;
  the task parsed from the "Your task is to: ..." line into `info["task"]`;
- `think: ...` actions answered with "OK." (they cost a step, as in ReAct) and never sent to the
  engine; `put X in/on Y` (the command of alfworld < 0.4, used by the original ReAct prompts)
  is played as `move X to Y` when the engine only knows the latter;
- `won` from the engine ends the episode with reward 1;
- the prompt (`AlfWorldFormat`, kind `alfworld`): the ReAct prompt of the original work, as chat
  messages: "Interact with a household to solve a task. Here are two examples." + two
  examples of the game's task type + "Here is the task." + the first observation; then one
  assistant message per action and one user message per observation.
"""

from __future__ import annotations

import copy
import json
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from a2c.contracts.env_info import StepInfo
from a2c.runtime.envs.alfworld.traj import FILE as TRAJ_FILE
from a2c.runtime.envs.alfworld.traj import TrajData
from a2c.runtime.envs.base import BadAction, EnvCrash
from a2c.runtime.envs.prompts import PromptFormat

# ALFWorld task types (traj_data.json "task_type") -> the ReAct prompt family of each.
TASK_PREFIXES = {
    "pick_and_place": "put",
    "pick_clean_then_place": "clean",
    "pick_heat_then_place": "heat",
    "pick_cool_then_place": "cool",
    "look_at_obj": "examine",
    "pick_two_obj": "puttwo",
}
WELCOME = "-= Welcome to TextWorld, ALFRED! =-"
TASK_RE = re.compile(r"Your task is to:\s*(.+?)\s*$", re.M)
LEGACY_PUT_RE = re.compile(r"^put (.+?) in/on (.+)$")
THINK_RE = re.compile(r"^think\s*:", re.I)


def task_family(task_type: str | None) -> str | None:
    """`pick_heat_then_place_in_recep` -> `heat`; None when unknown."""
    for prefix, family in TASK_PREFIXES.items():
        if task_type and task_type.startswith(prefix):
            return family
    return None


def read_task_type(game_file: str | Path) -> str | None:
    """The game's task type: `traj_data.json` next to the game file, else the folder name
    (`pick_and_place_simple-Apple-None-Fridge-1/trial_T.../game.tw-pddl`)."""
    folder = Path(game_file).parent
    traj = folder / TRAJ_FILE
    if traj.is_file():
        try:
            value = TrajData.read(traj).task_type
            if value:
                return str(value)
        except (OSError, ValueError):
            pass
    for name in (folder.parent.name, folder.name):
        head = name.split("-", 1)[0]
        if task_family(head):
            return head
    return None


def clean_observation(text: str) -> str:
    """Engine text as ReAct shows it: no welcome header, no legacy 'You arrive at loc N.'."""
    text = (text or "").replace("\r", "").strip()
    if text.startswith(WELCOME):
        text = text[len(WELCOME):].strip()
    text = re.sub(r"^You arrive at loc \d+\.\s*", "", text)
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def parse_task(observation: str) -> str:
    m = TASK_RE.search(observation or "")
    return m.group(1).rstrip(".").strip() if m else ""


# --------------------------------------------------------------------------------------------
# engines
# --------------------------------------------------------------------------------------------
class Engine(Protocol):
    """What the adapter needs from an ALFWorld engine (one game)."""

    def reset(self) -> tuple[str, dict]: ...                  # feedback, {admissible_commands, won}
    def step(self, command: str) -> tuple[str, bool, dict]: ...  # feedback, done, infos
    def close(self) -> None: ...


# The PDDL engine (fast-downward through ctypes) is not known to be thread-safe; engine calls are
# milliseconds, model calls dominate a step.
ENGINE_LOCK = threading.RLock()


class TextWorldPddlEngine:
    """The real engine: TextWorld `tw-pddl` + alfworld's wrappers, as in `AlfredTWEnv`."""

    def __init__(self, game_file: str | Path):
        try:
            import textworld
            from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredInfos
        except ImportError as exc:
            raise EnvCrash(f"the ALFWorld engine needs the optional packages alfworld and "
                           f"textworld[pddl] (pip install 'a2c[alfworld]'): {exc}") from None
        infos = textworld.EnvInfos(won=True, admissible_commands=True, extras=["gamefile"])
        with ENGINE_LOCK:
            self._env = textworld.start(str(game_file), infos,
                                        wrappers=[AlfredDemangler(shuffle=False), AlfredInfos])

    @staticmethod
    def _infos(state) -> dict:
        return {"admissible_commands": list(state.get("admissible_commands") or []),
                "won": bool(state.get("won"))}

    def reset(self) -> tuple[str, dict]:
        with ENGINE_LOCK:
            state = self._env.reset()
        return state.feedback, self._infos(state)

    def step(self, command: str) -> tuple[str, bool, dict]:
        with ENGINE_LOCK:
            state, _score, done = self._env.step(command)
        return state.feedback, bool(done), self._infos(state)

    def close(self) -> None:
        with ENGINE_LOCK:
            self._env.close()


EngineFactory = Callable[[Path], Engine]
_ENGINES: dict[str, EngineFactory] = {"textworld": TextWorldPddlEngine}


def register_engine(name: str, factory: EngineFactory) -> None:
    """Make `options.engine: <name>` build episodes with `factory(game_file)`."""
    _ENGINES[name] = factory


def engine_available() -> bool:
    """True when the real engine's packages import (alfworld, textworld, fast_downward)."""
    try:
        import alfworld.agents.environment.alfred_tw_env  # noqa: F401
        import fast_downward  # noqa: F401
        import textworld  # noqa: F401
    except Exception:  # noqa: BLE001 - any import failure means "not here"
        return False
    return True


# --------------------------------------------------------------------------------------------
# the Env
# --------------------------------------------------------------------------------------------
class AlfWorldEnv:
    """One episode of one ALFWorld game. Reward 1 when won; `think:` answered with 'OK.'."""

    def __init__(self, game_file_path: str | Path, options: dict | None = None):
        self.options = dict(options or {})
        self.game_file = Path(game_file_path)
        if not self.game_file.is_file():
            raise FileNotFoundError(f"ALFWorld game file not found: {self.game_file}")
        self.task_type = read_task_type(self.game_file)
        name = self.options.get("engine", "textworld")
        if name not in _ENGINES:
            raise EnvCrash(f"unknown ALFWorld engine {name!r} (known: {', '.join(sorted(_ENGINES))})")
        self._engine = _ENGINES[name](self.game_file)
        self._info: dict = {}          # the last info given, as given
        self._last = StepInfo()        # the same, read

    def _make_info(self, raw: dict, task: str) -> dict:
        info = {"admissible_commands": sorted(raw.get("admissible_commands") or []),
                "won": bool(raw.get("won")), "task_type": self.task_type,
                "game_file": str(self.game_file), "task": task}
        self._info, self._last = info, StepInfo.from_dict(info)
        return dict(info)

    def reset(self) -> tuple[str, dict]:
        feedback, raw = self._engine.reset()
        obs = clean_observation(feedback)
        return obs, self._make_info(raw, parse_task(obs))

    def _command(self, action: str) -> str:
        m = LEGACY_PUT_RE.match(action)
        if m:
            move = f"move {m.group(1)} to {m.group(2)}"
            acts = self._last.admissible_commands
            if move in acts or action not in acts:
                return move
        return action

    def step(self, action: str) -> tuple[str, float, bool, dict]:
        action = (action or "").strip()
        if not action:
            raise BadAction("empty action")
        if THINK_RE.match(action):
            return "OK.", 0.0, False, dict(self._info)
        feedback, done, raw = self._engine.step(self._command(action))
        info = self._make_info(raw, self._last.task)
        won = self._last.won
        return clean_observation(feedback), (1.0 if won else 0.0), bool(done or won), info

    def close(self) -> None:
        self._engine.close()


# --------------------------------------------------------------------------------------------
# the prompt
# --------------------------------------------------------------------------------------------
def load_react_prompts(path: str | Path) -> dict[str, str]:
    """A prompts file in the format of ReAct's `alfworld_3prompts.json`: keys `react_<family>_<i>`
    (families put, clean, heat, cool, examine, puttwo), values example transcripts."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected an object of react_<family>_<i> examples")
    return {str(k): str(v) for k, v in data.items()}


class AlfWorldFormat(PromptFormat):
    """The ReAct prompt of the original ALFWorld experiments, as chat messages.

    Options: `prompts_file` (ReAct's alfworld_3prompts.json format; default: the project's own
    examples in `fewshot.py`), `shots` (which two example indices, default [1, 0] as in
    ReAct), `list_actions` (append the admissible commands to the latest observation; default
    false, as in ReAct).
    """

    kind = "alfworld"
    system = ("Interact with a household to solve a task. Reply with exactly one line: either an "
              "action (for example `go to cabinet 1`) or a thought starting with `think:`.")
    list_actions = False

    def __init__(self, options: dict | None = None):
        super().__init__(options)
        self.list_actions = bool(self.options.get("list_actions", False))
        self.shots = [int(i) for i in self.options.get("shots", [1, 0])]
        if self.options.get("prompts_file"):
            self.examples = load_react_prompts(self.options["prompts_file"])
        else:
            from a2c.runtime.envs.alfworld.fewshot import EXAMPLES
            self.examples = dict(EXAMPLES)
        self._task_type: str | None = None

    def messages(self, task, first_observation, turns, info, **kwargs):
        # the examples depend on the episode's task type, carried in every step's info
        bound = copy.copy(self)
        bound._task_type = (info or {}).get("task_type")
        return PromptFormat.messages(bound, task, first_observation, turns, info, **kwargs)

    def fewshot(self) -> str:
        family = task_family(self._task_type)
        if family is None:
            return ""
        shots = [self.examples.get(f"react_{family}_{i}") for i in self.shots]
        shots = [s.rstrip("\n") + "\n" for s in shots if s]
        if not shots:
            return ""
        return "Here are two examples.\n" + "".join(shots)

    def task_message(self, task: str, first_observation: str) -> str:
        shots = self.fewshot()
        return (shots + "\n" if shots else "") + "Here is the task.\n" + first_observation

    def observation_message(self, observation: str) -> str:
        return observation

    def actions_suffix(self, info: dict) -> str:
        acts = StepInfo.from_dict(info).admissible_commands if self.list_actions else ()
        if not acts:
            return ""
        acts = list(acts)[: self.max_listed_actions]
        return "\n\nAdmissible actions: " + ", ".join(acts)

    def parse_action(self, output: str) -> str:
        """First non-empty line; a leading '>' (the ReAct transcript marker) is dropped."""
        for line in (output or "").split("\n"):
            s = re.sub(r"^(>|action\s*:)\s*", "", line.strip(), flags=re.I).strip()
            s = s.strip("`\"' ")
            if s and not THINK_RE.match(s):
                s = s.rstrip(".").strip()
            if s:
                return s
        raise BadAction(f"no action in model output {(output or '')[:80]!r}")

