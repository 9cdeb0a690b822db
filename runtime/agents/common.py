"""What the reference agents share: their view of the run, the data, the completions, submitting.

Everything here reads only what an agent is given: `A2C_*` variables, `$A2C_WORKSPACE/run_meta.json`
and `$A2C_DATA_DIR/train.jsonl`. Submissions go through the workspace's grading client
(`a2c_client.py`), exactly as an LLM agent's would. An agent's hyperparameters are its spec's
`params:` (`params()`: the run's values from `$A2C_AGENT_PARAMS`, typed by the declarations).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from a2c.runtime.agents.params import params, sub_agent_env  # noqa: F401  (the agents' one reader)

DEFAULT_PATTERN = r"####\s*(-?[\d,.]+)"


def log(message: str, **fields) -> None:
    """One line to stdout (agent.log) and one JSON line to the transcript."""
    stamp = time.strftime("%H:%M:%S")
    print(f"[{stamp}] {message}", flush=True)
    path = None
    if os.environ.get("A2C_WORKSPACE"):
        path = str(Path(os.environ["A2C_WORKSPACE"]) / ".a2c" / "transcript.jsonl")
    if path:
        try:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            with open(path, "a", encoding="utf-8") as handle:
                handle.write(json.dumps({"ts": time.time(), "message": message, **fields}) + "\n")
        except OSError:
            pass


@dataclass
class AgentContext:
    workspace: Path
    output_dir: Path
    data_dir: Path
    base_model: Path
    mode: str
    seed: int
    deadline: float
    meta: dict = field(default_factory=dict)

    @classmethod
    def from_env(cls) -> AgentContext:
        env = os.environ
        workspace = Path(env.get("A2C_WORKSPACE", os.getcwd()))
        meta = {}
        meta_path = workspace / "run_meta.json"
        if meta_path.is_file():
            try:
                meta = json.loads(meta_path.read_text(encoding="utf-8"))
            except ValueError:
                meta = {}
        deadline = float(env.get("A2C_DEADLINE") or meta.get("deadline") or time.time() + 3600)
        return cls(workspace=workspace,
                   output_dir=Path(env.get("A2C_OUTPUT_DIR", workspace / "output")),
                   data_dir=Path(env["A2C_DATA_DIR"]), base_model=Path(env["A2C_BASE_MODEL"]),
                   mode=env.get("A2C_MODE") or meta.get("mode") or "free",
                   seed=int(env.get("A2C_SEED") or meta.get("seed") or 0),
                   deadline=deadline, meta=meta)

    def remaining(self) -> float:
        return self.deadline - time.time()

    @property
    def task(self) -> dict:
        return self.meta.get("task") or {}

    @property
    def prompt_template(self) -> str:
        return self.task.get("prompt_template") or "{prompt}"

    @property
    def answer_pattern(self) -> str:
        return self.task.get("answer_pattern") or DEFAULT_PATTERN

    @property
    def answer_format(self) -> AnswerFormat:
        """How the task writes and reads an answer (see AnswerFormat)."""
        return AnswerFormat.from_task(self.task)

    @property
    def use_chat(self) -> bool:
        value = self.task.get("chat_template", "auto")
        return value is not False and str(value).lower() != "false"

    def load_train(self) -> list[dict]:
        path = self.data_dir / "train.jsonl"
        with open(path, encoding="utf-8") as handle:
            return [json.loads(line) for line in handle if line.strip()]

    def format_prompt(self, record: dict) -> str:
        try:
            return self.prompt_template.format(**record)
        except (KeyError, IndexError, ValueError):
            return str(record.get("prompt", ""))


_NUM = re.compile(r"-?\d+(?:\.\d+)?")
DEFAULT_FORMAT = "#### {answer}"


@dataclass
class AnswerFormat:
    """How the task writes and reads an answer: the template the bundle states
    (`run_meta.json` `task.answer_format`, e.g. `Answer: {answer}`) and the grader's own
    extraction (`task.grader_params`, read with the real `ExactMatchGrader`), so a training target
    or a reward is right exactly when the grader would score it right. A bundle compiled before
    the answer format existed gives the arithmetic task's `#### {answer}`."""

    template: str = DEFAULT_FORMAT
    params: dict = field(default_factory=lambda: {"pattern": DEFAULT_PATTERN,
                                                  "normalize": "number", "fallback": "none"})

    @classmethod
    def from_task(cls, task: dict) -> AnswerFormat:
        given = dict(task.get("grader_params") or {})
        given.setdefault("pattern", task.get("answer_pattern") or DEFAULT_PATTERN)
        if not task.get("grader_params"):
            given.setdefault("normalize", "number")
        given.setdefault("fallback", "none")
        return cls(template=task.get("answer_format") or given.get("answer_format")
                   or DEFAULT_FORMAT, params=given)

    @property
    def grader(self):
        from a2c.runtime.graders.exact_match import ExactMatchGrader
        cached = self.__dict__.get("_grader")
        if cached is None:
            cached = ExactMatchGrader({"kind": "exact_match", "params": self.params})
            self.__dict__["_grader"] = cached
        return cached

    def gold(self, record: dict) -> str:
        """The gold answer as the grader reads it (the text after '####' for GSM8K answers)."""
        return self.grader.gold_answer({"id": record.get("id"), "answer":
                                        str(record.get("answer", "")).strip()})

    def write(self, answer: str) -> str:
        return self.template.replace("{answer}", str(answer))

    def found(self, text: str) -> bool:
        """The pattern reads an answer out of `text` (the format, right or wrong)."""
        return self.grader.extract(text)[1] == "pattern"

    def correct(self, text: str, gold_text: str) -> bool:
        """The grader would score `text` right against the record answer `gold_text`."""
        item = self.grader.score_item({"id": "-", "answer": str(gold_text)}, None, text)
        return bool(item["correct"])


def final_answer(record: dict, fmt: AnswerFormat | None = None) -> str:
    """The gold answer as the grader extracts it (the text after '####' when present)."""
    return (fmt or AnswerFormat()).gold(record)


def _worked_arithmetic(record: dict, gold: str) -> str | None:
    """'A + B = C' when the prompt's first two numbers give the gold answer by one operation."""
    numbers = _NUM.findall(str(record.get("prompt", "")))
    if len(numbers) < 2:
        return None
    a, b = numbers[0], numbers[1]
    for op, fn in (("+", lambda x, y: x + y), ("-", lambda x, y: x - y),
                   ("*", lambda x, y: x * y)):
        try:
            if fn(float(a), float(b)) == float(gold):
                return f"{a} {op} {b} = {gold}"
        except ValueError:
            return None
    return None


def completion_for(record: dict, fmt: AnswerFormat | None = None) -> str:
    """The training target: the answer written in the task's answer format (`fmt`).

    A record that carries a worked solution the grader already reads right (GSM8K's
    'rationale ... #### 72' answers, or a `completion`/`solution` field) keeps it; a solution that
    does not end in the format gets the formatted answer appended. For arithmetic prompts the
    operation is written out first ('A + B = C'), when the grader still reads the gold answer.
    Otherwise the target is just the format with the gold answer: 'Answer: Paris'.
    """
    fmt = fmt or AnswerFormat()
    gold_text = str(record.get("answer", "")).strip()
    gold = fmt.gold(record)
    for key in ("completion", "solution"):
        if record.get(key):
            text = str(record[key]).strip()
            return text if fmt.correct(text, gold_text) else f"{text}\n{fmt.write(gold)}"
    if gold_text != gold and fmt.correct(gold_text, gold_text):
        return gold_text
    target = fmt.write(gold)
    worked = _worked_arithmetic(record, gold)
    if worked and fmt.correct(f"{worked}\n{target}", gold_text):
        return f"{worked}\n{target}"
    return target


def extract_answer(text: str, pattern: str = DEFAULT_PATTERN) -> str | None:
    match = re.search(pattern, text or "")
    if not match:
        return None
    return match.group(1).replace(",", "").rstrip(".").strip()


def same_number(a: str | None, b: str | None) -> bool:
    if a is None or b is None:
        return False
    try:
        return float(a) == float(b)
    except ValueError:
        return a.strip() == b.strip()


# --------------------------------------------------------------------------------- grading client
def _client_cmd(ctx: AgentContext, *args: str) -> list[str]:
    return [sys.executable, str(ctx.workspace / "a2c_client.py"), *args, "--json"]


def _parse(out: str) -> dict:
    out = out.strip()
    try:
        value = json.loads(out)
        return value if isinstance(value, dict) else {"value": value}
    except ValueError:
        pass
    for line in reversed(out.splitlines()):  # last JSON line
        try:
            value = json.loads(line)
            if isinstance(value, dict):
                return value
        except ValueError:
            continue
    match = re.search(r"\bsubmission (\d+)", out) or re.search(r"\bid\W+(\w+)", out)
    return {"id": match.group(1), "raw": out} if match else {"raw": out}


def client(ctx: AgentContext, *args: str, timeout: float = 600) -> tuple[int, dict]:
    proc = subprocess.run(_client_cmd(ctx, *args), capture_output=True, text=True,
                          timeout=timeout, cwd=ctx.workspace)
    return proc.returncode, _parse(proc.stdout or proc.stderr)


HYPERPARAMETERS_FILE = "hyperparameters.json"
_SUBMITTED: list[Path] = []     # this process's submitted model folders, oldest first


def record_hyperparameters(ctx: AgentContext, **values) -> Path:
    """Write the values the last training actually used (`$A2C_WORKSPACE/hyperparameters.json`;
    `steps` is what ran, `max_steps` what was planned) before submitting, so the submission's
    code snapshot carries them and the report shows these rather than what the source says."""
    path = ctx.workspace / HYPERPARAMETERS_FILE
    path.write_text(json.dumps(values, sort_keys=True) + "\n", encoding="utf-8")
    log("hyperparameters: " + ", ".join(f"{k}={v}" for k, v in sorted(values.items())),
        event="hyperparameters", values=values)
    return path


def submit(ctx: AgentContext, model_dir: Path, note: str = "") -> str | None:
    """Submit `model_dir`; once the grader has acknowledged it (it has its own copy then), the
    folders this agent submitted before are removed, so the agent's output holds one model."""
    rc, reply = client(ctx, "submit", str(model_dir), "--note", note)
    log(f"submit {model_dir.name}: rc={rc} {reply}", event="submit", rc=rc, reply=reply)
    if rc != 0 or reply.get("id") is None:
        return None
    release_submitted(keep=model_dir)
    return str(reply["id"])


def release_submitted(keep: Path | None = None) -> None:
    """Remove the earlier submitted folders but `keep` (the grader copied each at submit)."""
    import shutil
    for folder in [f for f in _SUBMITTED if keep is None or f.resolve() != keep.resolve()]:
        shutil.rmtree(folder, ignore_errors=True)
        _SUBMITTED.remove(folder)
    if keep is not None and keep not in _SUBMITTED:
        _SUBMITTED.append(keep)


def remember_submitted(folder: Path) -> None:
    """A folder submitted by another process (the SFT warm-up's): removed at the next submit."""
    _SUBMITTED.append(Path(folder))


def wait_score(ctx: AgentContext, submission_id: str, timeout: float | None = None) -> dict:
    timeout = max(5.0, ctx.remaining() - 2) if timeout is None else timeout
    try:
        rc, reply = client(ctx, "wait", submission_id, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"id": submission_id, "status": "timeout"}
    log(f"submission {submission_id}: {reply.get('status')} score={reply.get('score')}",
        event="score", reply=reply)
    return reply


def save_model(model, tokenizer, out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir, safe_serialization=True)
    tokenizer.save_pretrained(out_dir)
    return out_dir


def set_threads(threads: int = 0) -> None:
    """Torch's CPU threads: `threads` (an agent's `threads` param), 0 for one a CPU."""
    import torch
    torch.set_num_threads(max(1, int(threads or os.cpu_count() or 1)))


def time_limit_callback(stop_at: float):
    """A TrainerCallback that ends training before the clock passes `stop_at` (unix seconds), so
    a slow or shared machine still leaves time to save and submit before the deadline.

    A step is only started when the slowest of the recent steps would still end before
    `stop_at`: checking the clock only after a step lets one long step (a GRPO step with its
    generations, on a CPU that the grader shares) overrun the deadline.
    """
    from transformers import TrainerCallback

    class TimeLimit(TrainerCallback):
        def __init__(self):
            self.step_started = None
            self.recent: list[float] = []

        def on_step_begin(self, args, state, control, **kwargs):
            self.step_started = time.time()
            return control

        def on_step_end(self, args, state, control, **kwargs):
            now = time.time()
            if self.step_started is not None:
                self.recent = (self.recent + [now - self.step_started])[-3:]
            expected = 1.25 * max(self.recent, default=0.0)
            if now + expected >= stop_at:
                control.should_training_stop = True
                log(f"time limit: stopping training after step {state.global_step} "
                    f"(next step ~{expected:.0f}s, {stop_at - now:.0f}s left)",
                    event="time_limit", step=state.global_step)
            return control

    return TimeLimit()


def submit_margin(ctx: AgentContext, total: float) -> float:
    """Seconds kept free before the deadline for saving and submitting a model."""
    return min(90.0, max(15.0, 0.08 * total))


def bf16_ok(setting: str = "auto") -> bool:
    """Mixed precision (bf16 autocast, fp32 master weights) where the CPU has bf16 instructions:
    ~3-5x faster matmuls than float32 on such CPUs. `setting` (the level-3 agents' `bf16` param):
    `auto` looks at the hardware, `on`/`off` force it."""
    if setting in ("on", "off"):
        return setting == "on"
    try:
        import torch
        if torch.cuda.is_available():
            return torch.cuda.is_bf16_supported()
        flags = Path("/proc/cpuinfo").read_text(errors="replace")
        return "avx512_bf16" in flags or "amx_bf16" in flags
    except Exception:  # noqa: BLE001
        return False


def load_model(path: Path):
    """(model, tokenizer) from a save_pretrained folder; the pad token defaults to eos."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    tokenizer = AutoTokenizer.from_pretrained(path)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(path)
    return model, tokenizer
