"""Training helpers every reference agent uses: loading and saving a model, torch's threads,
mixed precision, and the clock (stop training in time to save and submit).
"""

from __future__ import annotations

import time
from pathlib import Path

from a2c.agents.kit.context import AgentContext, log
from a2c.cpu_share import free_threads


def save_model(model, tokenizer, out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir, safe_serialization=True)
    tokenizer.save_pretrained(out_dir)
    return out_dir


def set_threads(threads: int = 0) -> None:
    """Torch's CPU threads: `threads` (an agent's `threads` param); 0 for the cores no other
    runnable task wants now (a2c.cpu_share: spin-waiting threads on cores the grader or another
    run also wants cost more than they compute)."""
    import torch
    torch.set_num_threads(max(1, int(threads or free_threads())))


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
