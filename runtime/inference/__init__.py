"""Inference engines behind one interface (`load_engine`): transformers (CPU/GPU, batched) and vLLM (offline engine).

```python
settings = GenerationSettings.from_config(grader_cfg["inference"])
engine = load_engine(model_path, kind="auto")           # "auto" | "transformers" | "vllm"
outputs = engine.generate(prompts, settings)             # one string per prompt, input order
samples = engine.sample(prompts, settings, n=5)          # n strings per prompt
engine.name                                              # goes into every result
engine.close()
```
A prompt is a user-message string or a list of chat messages (`{"role", "content"}`). Both
engines build the model input the same way (`prompts.build_prompt_ids`): the chat template is
applied when the model has one (unless `chat_template: false`), then the text is tokenized once
by the model's tokenizer; `load_engine(..., chat_template=T)` replaces the folder's own
template with T (the grader passes the base model's: a submitted template never renders a
prompt, `chat_template.py`); vLLM receives those token ids, so both see identical inputs. Outputs are
the generated text only (special tokens skipped), cut at the first stop sequence.

Decoding: greedy when `temperature == 0` (with `n > 1` the greedy output is repeated n times);
sampling with `temperature`, `top_p` and `seed` otherwise. The model's own generation_config
defaults (repetition penalty, default sampling) are ignored on both engines.
"""

from .loading import (
    KINDS,
    InferenceEngine,
    cuda_available,
    generate_records,
    load_engine,
    render_prompt,
    resolve_kind,
    vllm_installed,
)
from .settings import GenerationSettings, InferenceError, Prompt

__all__ = [
    "KINDS",
    "InferenceEngine",
    "GenerationSettings",
    "InferenceError",
    "Prompt",
    "cuda_available",
    "generate_records",
    "load_engine",
    "render_prompt",
    "resolve_kind",
    "vllm_installed",
]
