"""The `rollout` grader (level 3): the submitted model is the policy; score = success rate or mean
episode reward, x100, with a bootstrap CI over episodes and every trajectory in the items.

Grader config (the resolved task's `grader`):

    kind: rollout
    inference: {max_new_tokens, temperature (0: greedy), stop, batch_size, chat_template, ...}
    env: {kind: textworld|alfworld|webshop|deepsearchqa, max_steps, n_episodes,
          history: {max_tokens, keep_first_turns},
          options: {step_timeout_s, dtype (the policy's weights dtype),
                    prefix_cache_mb (keys/values kept between steps, default 1024; 0: off),
                    ...adapter options...},
          data_root: <folder that record paths are relative to; optional>}

Record paths (`game_file`, corpus files) are resolved against, in order: `env.data_root`,
`$A2C_ENV_DATA_ROOT`, the folder of `$A2C_HELDOUT` (the held-out JSONL), the current directory.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from a2c.contracts.grade_result import GradeResult
from a2c.contracts.spec import GraderSpec, RolloutEnvSpec
from a2c.runtime.envs.policy import policy_engine_kwargs, token_counter
from a2c.runtime.envs.prompts import get_format
from a2c.runtime.envs.registry import get_kind, score_key
from a2c.runtime.envs.rollout import RolloutConfig, run_rollouts
from a2c.runtime.graders.base import Grader, GraderError
from a2c.settings import get as setting

VERSION = "3"   # 2: policy dtype option; TextWorld actions sanitised to printable ASCII
                # 3: prefix cache between steps (options.prefix_cache_mb)


def env_data_root(env: RolloutEnvSpec) -> Path:
    """The folder record paths are relative to (see the module docstring for the order)."""
    for cand in (env.data_root, setting("A2C_ENV_DATA_ROOT"),
                 os.path.dirname(setting("A2C_HELDOUT") or "") or None):
        if cand:
            return Path(cand)
    return Path.cwd()


class RolloutGrader(Grader):
    kind = "rollout"
    version = VERSION

    def __init__(self, grader_cfg: GraderSpec | dict[str, Any]):
        super().__init__(grader_cfg)
        self.env = self.spec.env if isinstance(self.spec.env, RolloutEnvSpec) else RolloutEnvSpec()
        if not self.env.kind:
            raise GraderError("grader.env.kind is required for a rollout grader")
        self.env_kind = self.env.kind
        self.options = dict(self.env.options or {})
        self.fmt = get_format(self.env_kind, self.options)
        self.rollout_cfg = RolloutConfig.from_env(self.env)
        self.score_by = self.options.get("score") or score_key(self.env_kind)

    def select(self, records: list[dict]) -> list[dict]:
        n = self.env.n_episodes
        return list(records)[: int(n)] if n else list(records)

    # ---------------------------------------------------------------- the entry points
    def grade_model(self, model_path, records: list[dict], engine: str = "auto") -> GradeResult:
        from a2c.runtime.inference import load_engine  # lazy: torch

        if engine in (None, "", "auto"):
            engine = self.grading.engine or "auto"
        # env.options.dtype (e.g. bfloat16): the policy's weights dtype on every engine. On a
        # CPU with bf16 instructions it is ~5x faster than float32 (docs/level3.md).
        backend = load_engine(model_path, engine, **policy_engine_kwargs(self.options),
                               **self.template_kwargs())
        try:
            return self.grade_backend(backend, records)
        finally:
            close = getattr(backend, "close", None)
            if close:
                close()

    def grade_backend(self, backend, records: list[dict], *, lockstep: bool = True) -> GradeResult:
        """Roll out `backend` (anything with `generate(prompts, settings)`) on the records."""
        settings = self.generation_settings()
        return self.grade_policy(lambda prompts: backend.generate(prompts, settings), records,
                                 backend_name=getattr(backend, "name", "custom"),
                                 count_tokens=token_counter(backend), lockstep=lockstep)

    def grade_policy(self, policy: Callable[[list], list[str]], records: list[dict], *,
                     backend_name: str = "custom", count_tokens=None,
                     lockstep: bool = True) -> GradeResult:
        started = time.monotonic()
        records = self.select(records)
        factory = get_kind(self.env_kind).env_factory(self.env, env_data_root(self.env))
        kwargs = {"count_tokens": count_tokens} if count_tokens else {}
        episodes = run_rollouts(records, factory, self.fmt, policy, self.rollout_cfg,
                                lockstep=lockstep, **kwargs)
        items = []
        for rec, ep in zip(records, episodes):
            item_score = (1.0 if ep.won else 0.0) if self.score_by == "success" else float(ep.reward)
            items.append({
                "id": ep.id, "prompt": ep.task, "output": ep.steps[-1].output if ep.steps else "",
                "extracted": [t.action for t in ep.steps], "gold": rec.get("answer"),
                "correct": bool(ep.won), "score": item_score, "error": ep.failure,
                "reward": ep.reward, "won": ep.won, "n_steps": len(ep.steps),
                "first_observation": ep.first_observation, "trajectory": ep.trajectory(),
            })
        n = len(items) or 1
        metrics = {
            "env": self.env_kind, "score_by": self.score_by,
            "success_rate": 100.0 * sum(1 for e in episodes if e.won) / n,
            "mean_reward": 100.0 * sum(e.reward for e in episodes) / n,
            "failed_episodes": sum(1 for e in episodes if e.failed),
            "failures": {r: sum(1 for e in episodes if (e.failure or "").split(":")[0] == r)
                         for r in ("bad_action", "env_crash", "timeout")},
            "mean_steps": sum(len(e.steps) for e in episodes) / n,
            "max_steps": self.rollout_cfg.max_steps, "lockstep": lockstep,
        }
        return self.finish(items, metrics, backend_name, started)

    def grade_predictions(self, predictions: dict[str, Any], records: list[dict]) -> GradeResult:
        return GradeResult.invalid(self.kind, self.version, "none",
                                   "a rollout task is graded by playing the model as a policy; "
                                   "it has no predictions file to grade")
