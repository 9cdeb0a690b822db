"""Which tool-call parser and chat template a vLLM-served driver gets, by model family.

vLLM turns a model's text back into tool calls only with the parser made for the model's format
(`--tool-call-parser`), and with auto tool choice off every scaffold call that carries tools is
a 400. A user who serves a model by hand must know which parser fits it; a2c reads the model
folder's config.json (`model_type`, `architectures`; for a hub id without a folder, the id's
name) and picks from FAMILIES, the one declared table. A drivers-file entry
(`vllm.models.<name>`) overrides the parser, the chat template or both.

Llama 3 and the other Llama-architecture models (SmolLM2, TinyLlama) share `model_type: llama`;
Llama 3's vocabulary (128,256 tokens) tells them apart. The fallback is `hermes`: the
`<tool_call>{json}</tool_call>` format most small open models were tuned on, and the one that
fails softest (plain text when the model writes no tags).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Family:
    name: str
    model_types: tuple[str, ...]        # config.json model_type values
    name_pattern: str                   # a hub id's name, when there is no folder to read
    tool_call_parser: str
    chat_template: str | None = None    # None: the model's own (tokenizer_config.json)


FAMILIES: tuple[Family, ...] = (
    Family("qwen3", ("qwen3", "qwen3_moe"), r"qwen3", "hermes"),
    Family("qwen2", ("qwen2", "qwen2_moe"), r"qwen2", "hermes"),
    Family("llama3", (), r"llama-?3", "llama3_json"),   # model_type llama + a 128k vocabulary
    Family("mistral", ("mistral", "mixtral", "ministral"), r"mi[sx]tral", "mistral"),
    Family("granite", ("granite",), r"granite", "granite"),
    Family("deepseek_v3", ("deepseek_v3",), r"deepseek-v3", "deepseek_v3"),
)
FALLBACK = Family("default", (), r"", "hermes")
LLAMA3_VOCAB = 128_256


def read_model_config(folder: Path | None) -> dict:
    """config.json of a model folder ({} when there is none or it does not read)."""
    if folder is None:
        return {}
    try:
        data = json.loads((Path(folder) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def family_of(folder: Path | None, model_id: str) -> Family:
    """The family of a served model: by its folder's config.json, else by its id's name."""
    config = read_model_config(folder)
    model_type = str(config.get("model_type") or "").lower()
    if model_type == "llama":
        vocab = config.get("vocab_size")
        return FAMILIES[2] if isinstance(vocab, int) and vocab >= LLAMA3_VOCAB else FALLBACK
    if model_type:
        for family in FAMILIES:
            if model_type in family.model_types:
                return family
        return FALLBACK
    name = model_id.rsplit("/", 1)[-1].lower()
    for family in FAMILIES:
        if re.search(family.name_pattern, name):
            return family
    return FALLBACK
