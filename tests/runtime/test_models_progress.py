"""Model conversion and loading print no progress bars into a log, a pipe or CI (issue 25):
`quiet_progress` turns off transformers', huggingface_hub's and the GGUF converter's bars when
stderr is not a terminal, and puts them back afterwards."""

from __future__ import annotations

import io

import pytest

from a2c.runtime.models import quiet_progress

pytest.importorskip("transformers")


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _state():
    import transformers.modeling_gguf_pytorch_utils as gguf_utils
    from huggingface_hub.utils import are_progress_bars_disabled
    from transformers.utils import logging as tf_logging

    bar = gguf_utils.tqdm(range(3), file=io.StringIO())
    disabled = bar.disable
    bar.close()
    return tf_logging.is_progress_bar_enabled(), are_progress_bars_disabled(), disabled


def test_no_bars_when_stderr_is_not_a_terminal():
    before = _state()
    with quiet_progress(io.StringIO()):
        assert _state() == (False, True, True)
    assert _state() == before


def test_bars_stay_on_a_terminal():
    before = _state()
    with quiet_progress(Terminal()):
        assert _state() == before
