"""What every grader shares: configuration, prompt building, one batched generation call, and
turning per-item verdicts into a `GradeResult` with a bootstrap interval."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from a2c.contracts.grade_result import GradeResult
from a2c.contracts.inference import inference_block
from a2c.contracts.records import Record
from a2c.contracts.service_config import as_grader_spec
from a2c.contracts.spec import GraderSpec
from a2c.errors import A2CError
from a2c.runtime.graders.bootstrap import DEFAULT_RESAMPLES, DEFAULT_SEED, bootstrap_ci, mean_score


class GraderError(A2CError):
    """A grader was configured or called wrongly (a user error, printed without a traceback)."""

    exit_code = 2


@dataclass
class BootstrapParams(Record):
    """The interval's parameters every grader reads from its `params`."""

    bootstrap_resamples: int = DEFAULT_RESAMPLES
    bootstrap_seed: int = DEFAULT_SEED


@dataclass
class GradingInference(Record):
    """What a grader itself reads of its `inference` block (the rest goes to the engine's
    `GenerationSettings`), read from the block with DEFAULT_INFERENCE filled in."""

    engine: str | None = None         # the inference engine: auto | transformers | vllm
    prompt_template: str | None = None
    n_samples: int | None = None


class Grader:
    """Base class. Subclasses set `kind`, `version` and implement `score_outputs`."""

    kind: str = ""
    version: str = "1"

    def __init__(self, grader_cfg: GraderSpec | dict[str, Any] | None):
        self.spec = as_grader_spec(grader_cfg)
        self.params: dict[str, Any] = dict(self.spec.params or {})
        self.inference: dict[str, Any] = inference_block(self.spec.inference)
        self.grading = GradingInference.from_dict(self.inference)
        boot = BootstrapParams.from_dict(self.params)
        self.bootstrap_resamples = int(boot.bootstrap_resamples)
        self.bootstrap_seed = int(boot.bootstrap_seed)

    # ---------------------------------------------------------------- prompts and generation
    def build_prompt(self, record: dict[str, Any]) -> str | list[dict]:
        template = self.grading.prompt_template or "{prompt}"
        prompt = record.get("prompt")
        if template == "{prompt}" and isinstance(prompt, list):
            return prompt  # already chat messages
        try:
            return template.format_map(record)
        except KeyError as exc:
            raise GraderError(f"prompt_template {template!r} names field {exc} that record "
                              f"{record.get('id')!r} does not have "
                              f"(fields: {', '.join(sorted(record))})") from None
        except (ValueError, IndexError) as exc:
            raise GraderError(f"prompt_template {template!r} is not a valid format string: "
                              f"{exc}") from None

    def generation_settings(self, **overrides: Any):
        from a2c.runtime.inference import GenerationSettings  # lazy: pulls in torch

        cfg = {k: v for k, v in self.inference.items() if k not in ("engine", "prompt_template")}
        cfg.update(overrides)
        return GenerationSettings.from_config(cfg)

    def answer_stop(self) -> Any:
        """A rule that says when an output's score can no longer change, so the engine may stop
        generating it (`a2c.runtime.inference.answer_stop`); None: generate every output to its
        end. The exact_match grader has one; graders that read the whole output do not."""
        return None

    def template_kwargs(self) -> dict[str, Any]:
        """`chat_template=` for load_engine when the grader service named the base model's
        template (a submitted tokenizer's own template never renders a grading prompt)."""
        from a2c.runtime.inference.chat_template import KEEP, template_from_config

        template = template_from_config(self.spec.extra)
        return {} if template is KEEP else {"chat_template": template}

    def generate(self, model_path: str | Path, prompts: Sequence[str | list[dict]],
                 engine: str = "auto", n: int = 1) -> tuple[list[list[str]], str]:
        """All prompts through the inference engine in one batched call; `n` outputs per prompt.

        Returns (outputs per prompt, the engine's name: what GradeResult.backend records)."""
        from a2c.runtime.inference import load_engine  # lazy: pulls in torch

        if engine in (None, "", "auto"):
            engine = self.grading.engine or "auto"
        backend = load_engine(model_path, engine, **self.template_kwargs())
        try:
            settings = self.generation_settings()
            rule = self.answer_stop()
            if rule is not None:
                settings = dataclasses.replace(settings, answer_stop=rule)
            if n <= 1:
                outs = backend.generate(list(prompts), settings)
                result = [[o] for o in outs]
            else:
                result = [list(o) for o in backend.sample(list(prompts), settings, n)]
            name = getattr(backend, "name", str(engine))
        finally:
            close = getattr(backend, "close", None)
            if close is not None:
                close()
        if len(result) != len(prompts):
            raise GraderError(f"engine {name} returned {len(result)} outputs for "
                              f"{len(prompts)} prompts")
        return result, name

    # ---------------------------------------------------------------- results
    def finish(self, items: list[dict], metrics: dict[str, Any], backend: str, started: float,
               score: float | None = None, valid: bool = True,
               error: str | None = None) -> GradeResult:
        values = [float(it.get("score") or 0.0) for it in items if not it.get("excluded")]
        ci = bootstrap_ci(values, n_resamples=self.bootstrap_resamples, seed=self.bootstrap_seed)
        if score is None:
            score = mean_score(values)
        metrics = {**metrics, "bootstrap": {"resamples": self.bootstrap_resamples,
                                            "seed": self.bootstrap_seed, "method": "percentile"}}
        return GradeResult(score=float(score), ci95=ci, n_items=len(items), items=items,
                           metrics=metrics, grader=self.kind, grader_version=self.version,
                           backend=backend, elapsed_s=round(time.monotonic() - started, 3),
                           valid=valid, error=error)

    # ---------------------------------------------------------------- the two entry points
    def grade_model(self, model_path: str | Path, records: list[dict],
                    engine: str = "auto") -> GradeResult:
        """Generate with the model through the inference `engine` (`auto`: the spec's), score."""
        raise NotImplementedError

    def grade_predictions(self, predictions: dict[str, Any], records: list[dict]) -> GradeResult:
        raise NotImplementedError


def as_samples(value: Any) -> list[str] | None:
    """A prediction as a list of samples: a string is one sample, a list several, None missing."""
    if value is None:
        return None
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    return [str(value)]
