"""The environment protocol of level 3: one episode per `Env`, many episodes per `EnvBatch`.

An `Env` is a single episode of one game / instruction / question:

    reset() -> (observation: str, info: dict)
    step(action: str) -> (observation: str, reward: float, done: bool, info: dict)
    close() -> None

`info` carries at least `won` (bool) once the episode ends and, where the environment has them,
`admissible_commands` (list[str]) and `score`. An `EnvBatch` resets and steps many episodes at
once (in threads, each call under a timeout); an exception, a timeout or a bad action ends *that*
episode as failed with the reason recorded, never the batch.
"""

from __future__ import annotations

import concurrent.futures as cf
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol


class Env(Protocol):
    def reset(self) -> tuple[str, dict]: ...
    def step(self, action: str) -> tuple[str, float, bool, dict]: ...
    def close(self) -> None: ...


class BadAction(Exception):
    """The policy's action cannot be executed at all (unparseable, not allowed by the protocol)."""


class EnvCrash(Exception):
    """The environment itself failed (engine error, service unreachable)."""


@dataclass
class Transition:
    observation: str          # what the policy saw before acting
    action: str               # the parsed action it took
    reward: float             # reward returned for this step
    output: str = ""          # the raw model output the action was parsed from

    def to_dict(self) -> dict:
        return {"observation": self.observation, "action": self.action, "reward": self.reward,
                "output": self.output}


@dataclass
class Episode:
    """One episode's record: what the rollout grader keeps per item."""

    id: str
    task: str = ""                        # the goal / instruction / question shown to the policy
    first_observation: str = ""
    steps: list[Transition] = field(default_factory=list)
    done: bool = False
    won: bool = False
    reward: float = 0.0                   # the episode's final score (env-defined, 0-1)
    failure: str | None = None            # None, or "bad_action: ...", "env_crash: ...", "timeout: ..."
    info: dict = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return self.failure is not None

    def trajectory(self) -> list[dict]:
        return [t.to_dict() for t in self.steps]

    def to_dict(self) -> dict:
        return {"id": self.id, "task": self.task, "first_observation": self.first_observation,
                "trajectory": self.trajectory(), "done": self.done, "won": self.won,
                "reward": self.reward, "failure": self.failure, "steps": len(self.steps)}


def _call(fn: Callable[[], Any], timeout: float | None, pool: cf.ThreadPoolExecutor):
    fut = pool.submit(fn)
    return fut.result(timeout=timeout)


class EnvBatch:
    """Many episodes reset and stepped together; failures stay per episode.

    `factories[i]()` builds episode i's Env (lazily, inside the timeout, so a game that fails to
    load fails only its episode).
    """

    def __init__(self, factories: list[Callable[[], Env]], *, step_timeout_s: float | None = 60.0,
                 max_workers: int = 8):
        self.factories = factories
        self.envs: list[Env | None] = [None] * len(factories)
        self.step_timeout_s = step_timeout_s
        self._pool = cf.ThreadPoolExecutor(max_workers=max(1, min(max_workers, len(factories) or 1)))

    def __len__(self) -> int:
        return len(self.factories)

    def _run(self, fns: dict[int, Callable[[], Any]]) -> dict[int, tuple[Any, str | None]]:
        """Run fns in parallel; per index (result, None) or (None, failure reason)."""
        futures = {i: self._pool.submit(fn) for i, fn in fns.items()}
        out: dict[int, tuple[Any, str | None]] = {}
        for i, fut in futures.items():
            try:
                out[i] = (fut.result(timeout=self.step_timeout_s), None)
            except cf.TimeoutError:
                out[i] = (None, f"timeout: no answer from the environment within {self.step_timeout_s}s")
            except BadAction as exc:
                out[i] = (None, f"bad_action: {exc}")
            except Exception as exc:  # noqa: BLE001 - any engine error ends only this episode
                out[i] = (None, f"env_crash: {type(exc).__name__}: {exc}")
        return out

    def reset(self, indices: list[int] | None = None) -> dict[int, tuple[tuple[str, dict] | None, str | None]]:
        indices = list(range(len(self))) if indices is None else indices

        def make_and_reset(i: int):
            env = self.factories[i]()
            self.envs[i] = env
            return env.reset()

        return self._run({i: (lambda i=i: make_and_reset(i)) for i in indices})

    def step(self, actions: dict[int, str]) -> dict[int, tuple[tuple[str, float, bool, dict] | None, str | None]]:
        def do(i: int, a: str):
            env = self.envs[i]
            if env is None:
                raise EnvCrash("episode was never reset")
            return env.step(a)

        return self._run({i: (lambda i=i, a=a: do(i, a)) for i, a in actions.items()})

    def close_one(self, i: int) -> None:
        env, self.envs[i] = self.envs[i], None
        if env is not None:
            try:
                fut = self._pool.submit(env.close)
                fut.result(timeout=5)
            except Exception:  # noqa: BLE001 - closing a broken env must not fail the batch
                pass

    def close(self) -> None:
        for i in range(len(self)):
            self.close_one(i)
        self._pool.shutdown(wait=False, cancel_futures=True)
