"""What identifies a model besides its weights, for the provenance check (provenance.py): the
architecture its config.json gives (the keys that fix the tensors' shapes), whether it ties its
output head to the embeddings, and the vocabulary its tokenizer files define.

Why apart from the weights' comparison: these read the model's small JSON files (config.json,
tokenizer.json), each parsed once into the few fields the check compares, while provenance.py
reads tensors; a missing or unreadable file is "unknown" here, never a verdict.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from a2c.canonical import canonical_json
from a2c.contracts.records import Record
from a2c.runtime.grader_service.weight_files import model_config

SHAPE_KEYS = ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
              "intermediate_size", "vocab_size", "n_embd", "n_layer", "n_head", "d_model")
TOKENIZER_FILES = ("vocab.json", "merges.txt", "tokenizer.model", "vocab.txt")
ABSENT = object()   # a config.json key left out (not the same as null)


@dataclass
class ModelConfig(Record):
    """What the check reads of a config.json besides the shape keys (SHAPE_KEYS); a
    multimodal model nests its language model's keys under `text_config`."""

    architectures: Any = None
    model_type: Any = None
    text_config: Any = None
    tie_word_embeddings: Any = ABSENT

    @classmethod
    def of(cls, folder: Path) -> tuple[ModelConfig, dict[str, Any]] | None:
        """(the config typed, the config.json itself); None without one."""
        cfg = model_config(folder)
        return None if not isinstance(cfg, dict) else (cls.from_dict(cfg), cfg)

    @property
    def text(self) -> dict[str, Any]:
        return self.text_config if isinstance(self.text_config, dict) else {}


def architecture(folder: Path) -> dict[str, Any] | None:
    """What fixes the model's shape, from its config.json (None when it has none)."""
    read = ModelConfig.of(folder)
    if read is None:
        return None
    typed, cfg = read
    text = typed.text
    return {"architectures": typed.architectures, "model_type": typed.model_type,
            **{k: cfg[k] if k in cfg else text[k] for k in SHAPE_KEYS if k in cfg or k in text}}


@dataclass
class TokenizerModel(Record):
    """A tokenizer.json `model` section: what it maps text to ids by."""

    type: Any = None
    vocab: Any = None
    merges: Any = None


@dataclass
class AddedToken(Record):
    """One of tokenizer.json's `added_tokens`: its id and its text."""

    id: Any = None
    content: Any = None


@dataclass
class TokenizerFile(Record):
    """The parts of a tokenizer.json that say which ids a text gets."""

    model: Any = None
    added_tokens: Any = None


def _vocabulary(model: TokenizerModel) -> dict[str, Any]:
    """What a tokenizer.json `model` section maps text to ids by: its type, vocabulary and merges
    (a merge written "a b" or ["a", "b"] alike). Options a tokenizers release writes differently
    for the same tokenizer (`continuing_subword_prefix` null or "") do not count: a base
    tokenizer saved again by the agent's own library version is still the base's."""
    merges = model.merges
    if isinstance(merges, list):
        merges = [m.split(" ", 1) if isinstance(m, str) else list(m) for m in merges]
    return {"type": model.type, "vocab": model.vocab, "merges": merges}


def tokenizer_identity(folder: Path) -> str | None:
    """sha256 of the vocabulary (and merges) the tokenizer files define; None without any."""
    tok = folder / "tokenizer.json"
    if tok.is_file():
        try:
            data = TokenizerFile.from_dict(json.loads(tok.read_text(encoding="utf-8")))
            added = [AddedToken.from_dict(a) for a in data.added_tokens or []]
            model = TokenizerModel.from_dict(data.model or {})
            return hashlib.sha256(canonical_json({
                "model": _vocabulary(model),
                "added": [(a.id, a.content) for a in added]})).hexdigest()
        except (OSError, ValueError, AttributeError, TypeError):
            pass
    digest, found = hashlib.sha256(), False
    for name in TOKENIZER_FILES:
        path = folder / name
        if path.is_file():
            found = True
            digest.update(name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest() if found else None


def tie_flag(folder: Path) -> Any:
    """config.json's `tie_word_embeddings` (its `text_config`'s when it has none there)."""
    read = ModelConfig.of(folder)
    if read is None:
        return None
    typed = read[0]
    if typed.tie_word_embeddings is not ABSENT:
        return typed.tie_word_embeddings
    nested = ModelConfig.from_dict(typed.text).tie_word_embeddings
    return None if nested is ABSENT else nested
