"""Prompt construction and output post-processing shared by every inference engine.

Both engines call `build_prompt_ids` so the model sees exactly the same tokens whichever engine
runs it, and `cut_at_stop` so outputs are post-processed the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .settings import InferenceError


def has_chat_template(tokenizer) -> bool:
    return bool(getattr(tokenizer, "chat_template", None))


def to_messages(prompt: Any) -> list[dict]:
    if isinstance(prompt, str):
        return [{"role": "user", "content": prompt}]
    if isinstance(prompt, (list, tuple)) and all(isinstance(m, dict) and "content" in m
                                                for m in prompt):
        return [{"role": m.get("role", "user"), "content": m["content"]} for m in prompt]
    raise InferenceError(f"a prompt must be a string or a list of chat messages, got {prompt!r:.80}")


def prompt_text(tokenizer, prompt: Any, chat_template: Any = "auto") -> tuple[str, bool]:
    """The text given to the model and whether the chat template was applied."""
    use_chat = has_chat_template(tokenizer) if chat_template == "auto" else bool(chat_template)
    if use_chat:
        if not has_chat_template(tokenizer):
            raise InferenceError("chat_template: true, but the model's tokenizer has no chat "
                                 "template")
        text = tokenizer.apply_chat_template(to_messages(prompt), tokenize=False,
                                             add_generation_prompt=True)
        return text, True
    if isinstance(prompt, str):
        return prompt, False
    # a message list without a chat template: the contents, one paragraph each
    return "\n\n".join(m["content"] for m in to_messages(prompt)), False


def build_prompt_ids(tokenizer, prompt: Any, chat_template: Any = "auto") -> list[int]:
    """Token ids of one prompt. A rendered chat template already holds its special tokens, so
    it is tokenized without adding more; a raw prompt gets the tokenizer's usual BOS/EOS rules."""
    text, chat = prompt_text(tokenizer, prompt, chat_template)
    ids = tokenizer(text, add_special_tokens=not chat)["input_ids"]
    if not ids:
        raise InferenceError("a prompt tokenized to zero tokens")
    return list(ids)


def cut_at_stop(text: str, stop: Sequence[str]) -> str:
    """Cut `text` at the earliest occurrence of any stop sequence (the stop is removed)."""
    cut = len(text)
    for s in stop:
        if s:
            pos = text.find(s)
            if pos != -1 and pos < cut:
                cut = pos
    return text[:cut]


def eos_token_ids(tokenizer, generation_config=None, config=None) -> list[int]:
    """Every token id that ends generation: the generation config's eos ids and the tokenizer's."""
    ids: list[int] = []
    for source in (generation_config, config):
        value = getattr(source, "eos_token_id", None) if source is not None else None
        if value is None:
            continue
        for v in (value if isinstance(value, (list, tuple)) else [value]):
            if v is not None and int(v) not in ids:
                ids.append(int(v))
    tok_eos = getattr(tokenizer, "eos_token_id", None)
    if tok_eos is not None and int(tok_eos) not in ids:
        ids.append(int(tok_eos))
    return ids
