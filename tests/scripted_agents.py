"""Throwaway agent bundles for tests: an agent whose launch.sh is a few lines of shell (a hostile
agent, a forker, an idle one), compiled by hand into a verified bundle. Importable from every
test (tests/ is on sys.path through tests/conftest.py)."""

from __future__ import annotations

from pathlib import Path

from a2c.contracts.bundle import write_agent_manifest


def make_agent(root: Path, agent_id: str, script: str, pass_env: list[str] | None = None,
               transcript: dict | None = None, **fields) -> Path:
    """ROOT/agents/AGENT_ID: an agent bundle whose launch.sh is `script`; `fields` replace the
    resolved spec's (e.g. type="cli", driver={...}, install={...} for a scaffold)."""
    folder = root / "agents" / agent_id
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "launch.sh").write_text("#!/usr/bin/env bash\n" + script)
    (folder / "prompt.md").write_text("{{ instructions }}\n")
    agent = {"id": agent_id, "title": agent_id, "type": "reference",
             "launch": {"command": "bash", "env": {}, "pass_env": list(pass_env or [])},
             "driver": {"required": False, "default": None, "models": []},
             "transcript": transcript or {"source": "stdout", "format": "text", "ext": "log",
                                          "path": None},
             "prompt": "{{ instructions }}\n", **fields}
    write_agent_manifest(folder, agent, "test")
    return folder


# Python for probe agents (run inside a sandbox): try to read or append to a path, say what
# happened ("READ <start>" / "WROTE", else "ERR <exception type>").
PROBE_IO = r"""
def tryread(p):
    try:
        with open(p) as f:
            return "READ " + f.read()[:20]
    except Exception as e:
        return "ERR " + type(e).__name__
def trywrite(p):
    try:
        with open(p, "a") as f:
            f.write("tampered\n")
        return "WROTE"
    except Exception as e:
        return "ERR " + type(e).__name__
"""


# An adversary's supervised fine-tuning, written by its agent under the sandbox's /tmp (outside
# the workspace the snapshots keep): the tiny model on 40 made-up sums, saved to output/final.
SFT_TO_TMP = """cat > /tmp/sft.py <<'PYEOF'
import os
from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import SFTConfig, SFTTrainer

base = os.environ["A2C_BASE_MODEL"]
out = os.path.join(os.environ["A2C_OUTPUT_DIR"], "final")
tok = AutoTokenizer.from_pretrained(base)
model = AutoModelForCausalLM.from_pretrained(base)
rows = [{"prompt": f"What is {a} + {a}?", "completion": f" #### {2 * a}"} for a in range(40)]
trainer = SFTTrainer(model=model, train_dataset=Dataset.from_list(rows), processing_class=tok,
                     args=SFTConfig(output_dir="/tmp/sft-run", max_steps=%STEPS%,
                                    per_device_train_batch_size=2, use_cpu=True, bf16=False,
                                    report_to="none", save_strategy="no", learning_rate=5e-4))
trainer.train()
trainer.model.save_pretrained(out, safe_serialization=True)
tok.save_pretrained(out)
PYEOF
"""
# ...and what it leaves behind: a GRPO script that never runs but names the submitted folder,
# then the submission.
DECOY_GRPO_AND_SUBMIT = """cd "$A2C_WORKSPACE"
cat > grpo_train.py <<'PYEOF'
from trl import GRPOConfig, GRPOTrainer
trainer = GRPOTrainer(model="base", reward_funcs=[], args=GRPOConfig(output_dir="output/final"))
trainer.train()
PYEOF
./submit output/final
sleep 2
"""


def sft_to_tmp(steps: int) -> str:
    """SFT_TO_TMP training `steps` steps."""
    return SFT_TO_TMP.replace("%STEPS%", str(int(steps)))
