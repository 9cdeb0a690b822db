"""What a submission is compared with: the base model's folder hash, its weights' hash and its
chat template, each read once from the (trusted) base model folder of the service config."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from a2c.runtime.grader_service.weights import weights_fingerprint
from a2c.runtime.inference.chat_template import read_chat_template, template_source
from a2c.runtime.models import model_fingerprint


class BaseReference:
    def __init__(self, base_model: Path | None):
        self.base_model = base_model
        self._folder: str | None = None
        self._weights: str | None = None
        self._template: dict[str, Any] | None = None

    def folder_fingerprint(self) -> str | None:
        """sha256_tree of the base (the baseline's key; an identical folder reuses its score)."""
        if self._folder is None and self.base_model and Path(self.base_model).exists():
            try:
                self._folder = model_fingerprint(self.base_model)
                self._weights = weights_fingerprint(self.base_model)
            except OSError:
                return None
        return self._folder

    def template_source(self) -> dict[str, Any]:
        """The chat template every prompt is built with (the effective grader configuration)."""
        if self._template is None:
            self._template = template_source(self.base_model)
        return self._template

    def is_copy(self, folder_hash: str, tensors_hash: str | None) -> bool:
        """The weights are the base's: the same folder, or the same tensors whatever else the
        folder holds or lacks (README, generation_config, tokenizer files)."""
        base = self.folder_fingerprint()
        if not base:
            return False
        if folder_hash == base:
            return True
        return tensors_hash is not None and tensors_hash == self._weights

    def template_ignored(self, copy: Path) -> bool:
        """The submission carries a chat template other than the base's (never used)."""
        if not copy.is_dir():
            return False
        return read_chat_template(copy) != self.template_source()["template"]
