"""Where the pairwise judge's endpoint comes from: A2C_JUDGE_* variables over the file named by
A2C_JUDGE_CONFIG (JSON or YAML, same keys, lower-case, without the prefix); never from the spec."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
        if "api_key_env" in data and not data.get("api_key"):
            data["api_key"] = env.get(str(data["api_key_env"]), "")
        values.update({k: data[k] for k in CONFIG_KEYS if data.get(k) not in (None, "")})
        sources.append(f"file:{p}")
    for k in CONFIG_KEYS:
        v = env.get(ENV_PREFIX + k.upper())
        if v not in (None, ""):
            values[k] = v
            if "env" not in sources:
                sources.append("env")
    if not values.get("model") and default_model:
        values["model"] = default_model
    missing = [k for k in ("base_url", "model") if not values.get(k)]
    if missing:
        raise JudgeConfigError(
            "pairwise_judge: no judge configured (missing "
            + ", ".join(ENV_PREFIX + m.upper() for m in missing)
            + "). Set A2C_JUDGE_BASE_URL (an OpenAI-compatible endpoint, e.g. "
              "http://127.0.0.1:8000/v1), A2C_JUDGE_MODEL and, if the endpoint needs one, "
              "A2C_JUDGE_API_KEY; or point A2C_JUDGE_CONFIG at a JSON/YAML file with base_url, "
              "model, api_key. See docs/graders.md.")
    try:
        return JudgeConfig(base_url=str(values["base_url"]), model=str(values["model"]),
                           api_key=str(values.get("api_key", "")),
                           price_prompt_per_1k=float(values.get("price_prompt_per_1k", 0.0)),
                           price_completion_per_1k=float(values.get("price_completion_per_1k",
                                                                    0.0)),
                           timeout_s=float(values.get("timeout_s", 60.0)),
                           backoff_s=(float(values["backoff_s"]) if values.get("backoff_s")
                                      not in (None, "") else None),
                           concurrency=(int(values["concurrency"]) if values.get("concurrency")
                                        not in (None, "") else None),
                           source="+".join(sources))
    except ValueError as exc:
        raise JudgeConfigError(f"pairwise_judge: bad judge configuration value: {exc}") from None
