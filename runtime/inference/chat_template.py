"""Which chat template builds a prompt: the base model's, never one a submission brings.

A chat template is a program (Jinja) that the prompt rendering runs: a submitted tokenizer whose
template computes the answer and writes it into the prompt would score with untouched weights.
So the grader reads the *base model's* template (`read_chat_template`, files only, no
transformers) and the engines put it on the submission's tokenizer in place of its own
(`chat_template=` of `load_engine`); the grader service passes it in the effective grader
configuration (`chat_template_source`) and flags a submission whose template differs
(`metrics.chat_template_ignored`).

Where transformers looks for a template, in the order it prefers them: `chat_template.jinja`,
`chat_template.json` (`{"chat_template": ...}`), `tokenizer_config.json` (`chat_template`: a
string, or a list of `{"name", "template"}`), plus named templates in
`additional_chat_templates/*.jinja`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

KEEP = object()   # load_engine's default: the model folder's own template (local use, a2c eval)
SOURCE_KEY = "chat_template_source"   # key of the grader configuration the service adds


def _read_json(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _normal(value: Any) -> str | dict[str, str] | None:
    if isinstance(value, str):
        return value or None
    if isinstance(value, list):
        named = {str(t.get("name")): str(t.get("template")) for t in value
                 if isinstance(t, dict) and "template" in t}
        return named or None
    if isinstance(value, dict):
        named = {str(k): str(v) for k, v in value.items() if isinstance(v, str)}
        return named or None
    return None


def read_chat_template(folder: str | Path | None) -> str | dict[str, str] | None:
    """The chat template a model folder carries (a string, or named templates), or None."""
    if folder is None:
        return None
    folder = Path(folder)
    if not folder.is_dir():
        return None
    template: Any = None
    jinja = folder / "chat_template.jinja"
    if jinja.is_file():
        template = jinja.read_text(encoding="utf-8")
    elif (folder / "chat_template.json").is_file():
        template = (_read_json(folder / "chat_template.json") or {}).get("chat_template")
    else:
        template = (_read_json(folder / "tokenizer_config.json") or {}).get("chat_template")
    template = _normal(template)
    extra = folder / "additional_chat_templates"
    if extra.is_dir():
        named = {p.stem: p.read_text(encoding="utf-8") for p in sorted(extra.glob("*.jinja"))}
        if named:
            base = template if isinstance(template, dict) else (
                {"default": template} if template else {})
            template = {**base, **named}
    return template


def template_source(base_model: str | Path | None) -> dict[str, Any]:
    """What the service puts in the effective grader configuration under SOURCE_KEY."""
    return {"kind": "base_model", "base_model": str(base_model) if base_model else None,
            "template": read_chat_template(base_model)}


def template_from_config(grader_cfg: dict[str, Any] | None) -> Any:
    """The template a grader must use (KEEP when its configuration names none)."""
    source = (grader_cfg or {}).get(SOURCE_KEY)
    if isinstance(source, dict) and "template" in source:
        return source["template"]
    return KEEP


def force_chat_template(tokenizer, template: Any) -> None:
    """Put `template` (a string, named templates, or None for none) on `tokenizer`."""
    if template is KEEP:
        return
    tokenizer.chat_template = template
