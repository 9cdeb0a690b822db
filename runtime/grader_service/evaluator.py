"""Run one evaluation in a child process with a timeout; never let it take the service down.

The built-in evaluator (`python -m a2c.runtime.grader_service.evaluate_one`) gets a minimal
environment, never the operator's whole one (`evaluator_env`): a fixed PATH, HOME in a private
folder next to its result, the locale, the variables torch, CUDA, Hugging Face and vLLM read, the
A2C_* settings the graders and inference engines read (cache, threads, data roots, the judge's
`A2C_JUDGE_*` and the key variable its config file names), and whatever the operator lists in
`A2C_EVAL_PASS_ENV` (comma-separated names). A custom evaluator command (service.json
`evaluator`, a test's stand-in) is the operator's own code and inherits the environment.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from a2c.contracts.grade_result import ResultHeader
from a2c.contracts.service_config import EVALUATOR_MODULE, read_grader_spec
from a2c.fsutil import read_tail
from a2c.settings import get as setting

PASS_VAR = "A2C_EVAL_PASS_ENV"
EVAL_ENV_NAMES = frozenset({
    "LANG", "LC_ALL", "LC_CTYPE", "TZ", "LD_LIBRARY_PATH",
    "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "CUDA_HOME",
    "PYTORCH_CUDA_ALLOC_CONF", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "TOKENIZERS_PARALLELISM",
    "HF_HOME", "HF_HUB_CACHE", "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE",
    "TRANSFORMERS_CACHE", "HF_DATASETS_CACHE",
    "A2C_CACHE", "A2C_PROJECT_ROOT", "A2C_TORCH_THREADS", "A2C_HUB_DOWNLOAD", "A2C_DATA_MIRROR",
    "A2C_ENV_DATA_ROOT", "A2C_SEARXNG_URL", "A2C_WEBSHOP_URL",
})
EVAL_ENV_PREFIXES = ("VLLM_", "A2C_JUDGE_")


def _judge_key_var(environ: dict[str, str]) -> str | None:
    """The variable a judge config file names for its key (`api_key_env`), if any."""
    path = setting("A2C_JUDGE_CONFIG", environ)
    if not path:
        return None
    try:
        text = Path(path).expanduser().read_text(encoding="utf-8")
        try:
            data = json.loads(text)
        except ValueError:
            import yaml
            data = yaml.safe_load(text)
    except Exception:  # noqa: BLE001 - the grader reports a broken config itself
        return None
    from a2c.runtime.graders.judge_config import JudgeValues
    name = JudgeValues.from_dict(data).api_key_env if isinstance(data, dict) else None
    return str(name) if name else None


def evaluator_env(home: Path, environ: dict[str, str] | None = None) -> dict[str, str]:
    """The built-in evaluator's environment: the allowlist above, HOME private to it."""
    environ = dict(os.environ if environ is None else environ)
    names = set(EVAL_ENV_NAMES)
    names |= set(setting(PASS_VAR, environ) or ())
    key_var = _judge_key_var(environ)
    if key_var:
        names.add(key_var)
    env = {k: v for k, v in environ.items()
           if k in names or k.startswith(EVAL_ENV_PREFIXES)}
    home.mkdir(parents=True, exist_ok=True)
    os.chmod(home, 0o700)
    env.update({"PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
                "HOME": str(home), "TMPDIR": environ.get("TMPDIR", "/tmp"),
                "PYTHONUNBUFFERED": "1"})
    env.setdefault("LANG", "C.UTF-8")
    # CUDA_VISIBLE_DEVICES (allowlisted) names the grader's own GPUs: the runtime starts the
    # service with it set (runtime/run/devices.py, `a2c run --grader-gpus`)
    return env


def is_builtin(command: list[str]) -> bool:
    return EVALUATOR_MODULE in command




@dataclass
class EvalOutcome:
    result: dict[str, Any] | None   # the GradeResult dict the child wrote (may say valid: false)
    error: str | None               # why there is no usable result (crash, timeout, bad output)
    elapsed_s: float
    returncode: int | None

    @property
    def header(self) -> ResultHeader:
        """What the service reads of the child's result (an empty one without a result)."""
        return ResultHeader.of(self.result)

    @property
    def valid(self) -> bool:
        return self.error is None and bool(self.result) and self.header.ok

    @property
    def message(self) -> str | None:
        if self.error:
            return self.error
        if self.result is not None and self.header.valid is False:
            return self.header.error or "the grader marked the result invalid"
        return None


def _last_error_line(text: str) -> str:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    for line in reversed(lines):
        if "Error" in line or "Exception" in line or line.startswith(("Killed", "Traceback")):
            return line.strip()[:500]
    return (lines[-1].strip()[:500] if lines else "")


class ProcessSlot:
    """The running child, so a shutdown can kill it (second SIGTERM) or let it finish."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None

    def kill(self) -> None:
        proc = self.proc
        if proc is not None and proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def _grader_kind(path: Path) -> str | None:
    try:
        return read_grader_spec(path).kind or None
    except (OSError, ValueError, AttributeError):
        return None


def _collect_boxed(box_dir: Path, out_path: Path) -> None:
    """Move the boxed child's result (a regular file it wrote) to `out_path`; drop the box."""
    result = box_dir / "result.json"
    try:
        fd = os.open(result, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        fd = None
    if fd is not None:
        with os.fdopen(fd, "rb") as handle:
            data = handle.read(64 << 20)
        from a2c.fsutil import write_bytes_atomic
        write_bytes_atomic(out_path, data, mode=0o600)
    shutil.rmtree(box_dir, ignore_errors=True)


def run_evaluation(command: list[str], *, grader_cfg_path: Path, model: Path, heldout: Path,
                   engine: str, out_path: Path, timeout_s: float, log_path: Path,
                   slot: ProcessSlot | None = None,
                   env: dict[str, str] | None = None, use_bwrap: bool = True) -> EvalOutcome:
    """`command` + standard arguments; the child writes a GradeResult JSON to `out_path`.

    The built-in evaluator gets `evaluator_env`; for a grader in `evaluator_box.BOXED_KINDS`,
    where the box can be built, it runs in its own bubblewrap (runtime/sandbox/evaluator_box.py)
    and writes its result inside its box folder, moved to `out_path` after it exits. Without
    `use_bwrap` (a run started with --no-bwrap) there is no box, and the built-in evaluator is
    told `--no-bwrap` (its code execution goes without bubblewrap too)."""
    out_path.parent.mkdir(parents=True, exist_ok=True)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    try:
        out_path.unlink()
    except FileNotFoundError:
        pass
    args = ["--grader", str(grader_cfg_path), "--model", str(model), "--heldout", str(heldout),
            "--engine", engine]
    argv, env, box_dir = _child(command, args, grader_cfg_path=grader_cfg_path, model=model,
                                heldout=heldout, out_path=out_path, env=env,
                                use_bwrap=use_bwrap)
    started = time.monotonic()
    try:
        returncode = _wait_child(argv, env, log_path, model, timeout_s, slot)
    except OSError as exc:
        return EvalOutcome(None, f"could not start the evaluator: {exc}", 0.0, None)
    except subprocess.TimeoutExpired:
        if box_dir is not None:
            shutil.rmtree(box_dir, ignore_errors=True)
        return EvalOutcome(None, f"evaluation timed out after {timeout_s:g} s "
                                 f"(eval_timeout_s = {timeout_s:g})",
                           time.monotonic() - started, None)
    elapsed = time.monotonic() - started
    if box_dir is not None:
        _collect_boxed(box_dir, out_path)
    if returncode != 0:
        why = _exit_reason(returncode)
        detail = _last_error_line(read_tail(log_path, 1500).strip())
        return EvalOutcome(None, f"{why}: {detail}" if detail else why, elapsed, returncode)
    return _read_outcome(out_path, elapsed)


def _child(command: list[str], args: list[str], *, grader_cfg_path: Path, model: Path,
           heldout: Path, out_path: Path, env: dict[str, str] | None, use_bwrap: bool
           ) -> tuple[list[str], dict[str, str] | None, Path | None]:
    """(argv, env, box folder or None) of the evaluator child: boxed for a grader that runs
    code (evaluator_box.BOXED_KINDS) when bubblewrap is used, else a plain child."""
    from a2c.runtime.sandbox import evaluator_box
    builtin = is_builtin(command)
    if builtin and use_bwrap and evaluator_box.boxed(_grader_kind(grader_cfg_path)):
        ids = evaluator_box.eval_ids()
        box_dir = out_path.parent / f"box-{out_path.stem}"
        shutil.rmtree(box_dir, ignore_errors=True)
        evaluator_box.prepare_box(box_dir, ids)
        inner = [*command, *args, "--out", str(box_dir / "result.json")]
        argv = evaluator_box.box_argv(inner, model=model, grader_cfg=grader_cfg_path,
                                      heldout=heldout, box_dir=box_dir, ids=ids)
        if env is None:
            env = evaluator_env(box_dir / "home")
            os.chown(box_dir / "home", ids.uid, ids.gid)
        return argv, env, box_dir
    argv = [*command, *args, "--out", str(out_path), "--parent-pid", str(os.getpid())] + (
        [] if use_bwrap or not builtin else ["--no-bwrap"])
    if env is None and builtin:
        env = evaluator_env(out_path.parent / "home")
    return argv, env, None


def _wait_child(argv: list[str], env: dict[str, str] | None, log_path: Path, model: Path,
                timeout_s: float, slot: ProcessSlot | None) -> int:
    """Run the child in its own session, its output appended to `log_path`; its exit status.
    OSError when it cannot start; subprocess.TimeoutExpired (its group killed) past
    `timeout_s`."""
    with open(log_path, "ab") as log:
        log.write(f"\n== {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} "
                  f"evaluate {model}\n".encode())
        log.flush()
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                start_new_session=True, env=env)
        if slot is not None:
            slot.proc = proc
        try:
            return proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
            raise
        finally:
            if slot is not None:
                slot.proc = None


def _exit_reason(returncode: int) -> str:
    if returncode < 0:
        sig = -returncode
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else sig
        why = f"the evaluator was killed by {name}"
        return why + " (out of memory?)" if sig == signal.SIGKILL else why
    return f"the evaluator exited with status {returncode}"


def _read_outcome(out_path: Path, elapsed: float) -> EvalOutcome:
    """The child's GradeResult JSON, or why there is none."""
    try:
        result = json.loads(out_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return EvalOutcome(None, f"the evaluator wrote no readable result: {exc}", elapsed, 0)
    if not isinstance(result, dict) or "score" not in result:
        return EvalOutcome(None, "the evaluator's result has no score", elapsed, 0)
    return EvalOutcome(result, None, elapsed, 0)
