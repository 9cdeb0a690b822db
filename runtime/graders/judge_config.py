"""Where the pairwise judge's endpoint comes from: A2C_JUDGE_* variables over the file named by
A2C_JUDGE_CONFIG (JSON or YAML, same keys, lower-case, without the prefix); never from the spec."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from a2c.contracts.records import Record
from a2c.runtime.graders.base import GraderError

ENV_PREFIX = "A2C_JUDGE_"
CONFIG_KEYS = ("base_url", "api_key", "model", "price_prompt_per_1k",
               "price_completion_per_1k", "timeout_s", "backoff_s", "concurrency")


class JudgeConfigError(GraderError):
    """The judge is not configured (or refuses our credentials)."""


@dataclass
class JudgeConfig:
    base_url: str
    model: str
    api_key: str = ""
    price_prompt_per_1k: float = 0.0
    price_completion_per_1k: float = 0.0
    timeout_s: float = 60.0
    backoff_s: float | None = None       # first retry delay (doubles each retry)
    concurrency: int | None = None       # judge calls in flight
    source: str = "env"

    @property
    def endpoint(self) -> str:
        url = self.base_url.rstrip("/")
        if url.endswith("/chat/completions"):
            return url
        if url.endswith("/v1"):
            return url + "/chat/completions"
        return url + "/v1/chat/completions"

    def public(self) -> dict[str, Any]:
        """What may be recorded with a result (never the key)."""
        return {"base_url": self.base_url, "model": self.model, "source": self.source,
                "price_prompt_per_1k": self.price_prompt_per_1k,
                "price_completion_per_1k": self.price_completion_per_1k}


@dataclass
class JudgeValues(Record):
    """The judge's settings as given (CONFIG_KEYS: a file's values, the environment's strings);
    None: not given. `api_key_env` (a file only) names the variable holding the key."""

    base_url: Any = None
    api_key: Any = None
    model: Any = None
    price_prompt_per_1k: Any = None
    price_completion_per_1k: Any = None
    timeout_s: Any = None
    backoff_s: Any = None
    concurrency: Any = None
    api_key_env: Any = None


def _given(value: Any, cast: Any, default: Any) -> Any:
    """`value` cast, or `default` when it was not given."""
    return cast(value) if value not in (None, "") else default


def load_judge_config(env: dict[str, str] | None = None,
                      default_model: str | None = None) -> JudgeConfig:
    """The judge endpoint: A2C_JUDGE_* variables over the A2C_JUDGE_CONFIG file; the model falls
    back to `default_model` (the spec's `judge_model`) when neither names one."""
    env = dict(os.environ if env is None else env)
    values: dict[str, Any] = {}
    sources = []
    path = env.get(ENV_PREFIX + "CONFIG")
    if path:
        p = Path(path).expanduser()
        if not p.is_file():
            raise JudgeConfigError(f"A2C_JUDGE_CONFIG={path}: no such file")
        text = p.read_text(encoding="utf-8")
        try:
            data = json.loads(text)
        except ValueError:
            try:
                import yaml

                data = yaml.safe_load(text)
            except Exception as exc:  # noqa: BLE001 - any parse failure is the user's file
                raise JudgeConfigError(f"A2C_JUDGE_CONFIG={path}: not JSON or YAML: {exc}") \
                    from None
        if not isinstance(data, dict):
            raise JudgeConfigError(f"A2C_JUDGE_CONFIG={path}: expected a mapping of "
                                   f"{', '.join(CONFIG_KEYS)}")
        given = JudgeValues.from_dict(data)
        if given.api_key_env is not None and not given.api_key:
            data = {**data, "api_key": env.get(str(given.api_key_env), "")}
        values.update({k: data[k] for k in CONFIG_KEYS if data.get(k) not in (None, "")})
        sources.append(f"file:{p}")
    for k in CONFIG_KEYS:
        v = env.get(ENV_PREFIX + k.upper())
        if v not in (None, ""):
            values[k] = v
            if "env" not in sources:
                sources.append("env")
    v = JudgeValues.from_dict(values)
    if not v.model and default_model:
        v.model = default_model
    missing = [name for name, value in (("base_url", v.base_url), ("model", v.model))
               if not value]
    if missing:
        raise JudgeConfigError(
            "pairwise_judge: no judge configured (missing "
            + ", ".join(ENV_PREFIX + m.upper() for m in missing)
            + "). Set A2C_JUDGE_BASE_URL (an OpenAI-compatible endpoint, e.g. "
              "http://127.0.0.1:8000/v1), A2C_JUDGE_MODEL and, if the endpoint needs one, "
              "A2C_JUDGE_API_KEY; or point A2C_JUDGE_CONFIG at a JSON/YAML file with base_url, "
              "model, api_key. See docs/graders.md.")
    try:
        return JudgeConfig(base_url=str(v.base_url), model=str(v.model),
                           api_key=_given(v.api_key, str, ""),
                           price_prompt_per_1k=_given(v.price_prompt_per_1k, float, 0.0),
                           price_completion_per_1k=_given(v.price_completion_per_1k, float, 0.0),
                           timeout_s=_given(v.timeout_s, float, 60.0),
                           backoff_s=_given(v.backoff_s, float, None),
                           concurrency=_given(v.concurrency, int, None),
                           source="+".join(sources))
    except ValueError as exc:
        raise JudgeConfigError(f"pairwise_judge: bad judge configuration value: {exc}") from None
