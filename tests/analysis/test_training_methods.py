"""Training-method detection and hyperparameters in code (ast first, regexes as fallback), and
the mode compliance verdicts."""

from __future__ import annotations

import pytest

from a2c.analysis.compliance import compliance
from a2c.analysis.failures import classify
from a2c.analysis.training_methods import analyse_file


@pytest.mark.parametrize("trainer,method", [
    ("SFTTrainer", "SFT"), ("GRPOTrainer", "GRPO"), ("PPOTrainer", "PPO"),
    ("DPOTrainer", "DPO"), ("KTOTrainer", "KTO"), ("ORPOTrainer", "ORPO"),
    ("RLOOTrainer", "RLOO"), ("OnlineDPOTrainer", "Online DPO"), ("CPOTrainer", "CPO"),
])
def test_trl_trainer_calls(trainer, method):
    src = f"from trl import {trainer}\ntrainer = {trainer}(model=m, args=a)\ntrainer.train()\n"
    route = analyse_file("train.py", src)
    assert route.methods == [method]
    assert route.evidence[0].kind == "call" and route.evidence[0].line == 2


def test_attribute_call_and_import_only():
    route = analyse_file("a.py", "import trl\nt = trl.DPOTrainer(model=m)\n")
    assert route.methods == ["DPO"]
    only_import = analyse_file("b.py", "from trl import GRPOTrainer, SFTTrainer\n")
    assert only_import.methods == ["GRPO", "SFT"]
    assert {e.kind for e in only_import.evidence} == {"import"}
    # A called trainer outweighs one that is only imported.
    mixed = analyse_file("c.py", "from trl import GRPOTrainer, SFTTrainer\nSFTTrainer(model=m)\n")
    assert mixed.methods == ["SFT"]


def test_plain_transformers_trainer_is_supervised():
    src = ("from transformers import Trainer, TrainingArguments\n"
           "args = TrainingArguments(output_dir='o', learning_rate=3e-5, num_train_epochs=2,\n"
           "                         per_device_train_batch_size=4)\n"
           "Trainer(model=m, args=args, train_dataset=d).train()\n")
    route = analyse_file("ft.py", src)
    assert route.methods == ["SFT"]
    hps = {h.name: h.value for h in route.hyperparameters}
    assert hps == {"learning_rate": 3e-5, "epochs": 2, "batch_size": 4}


def test_hyperparameters_constants_argparse_lora():
    src = ("import argparse\nfrom peft import LoraConfig\nfrom trl import GRPOConfig, GRPOTrainer\n"
           "LR = 5e-6\nBETA = 0.02\n"
           "p = argparse.ArgumentParser()\np.add_argument('--max-steps', type=int, default=300)\n"
           "cfg = GRPOConfig(learning_rate=LR, beta=BETA, num_generations=16)\n"
           "lora = LoraConfig(r=32, lora_alpha=64)\n"
           "GRPOTrainer(model='m', args=cfg, peft_config=lora)\n")
    route = analyse_file("grpo.py", src)
    hps = {}
    for h in route.hyperparameters:
        hps.setdefault(h.name, set()).add(h.value)
    assert hps["learning_rate"] == {5e-6}
    assert hps["beta"] == {0.02}
    assert hps["num_generations"] == {16}
    assert hps["max_steps"] == {300}
    assert hps["lora_rank"] == {32} and hps["lora_alpha"] == {64}
    assert route.adapters == ["LoRA"]


def test_custom_policy_gradient_loop():
    """Policy gradient: the loss weighs the log-probs of the model's own samples by rewards of
    those samples (loss_flow.py)."""
    src = ("import torch\n"
           "for batch in data:\n"
           "    samples = model.generate(batch, do_sample=True)\n"
           "    logprobs = model(samples).log_softmax(-1)\n"
           "    reward = score(samples)\n"
           "    advantage = reward - reward.mean()\n"
           "    loss = -(advantage * logprobs).mean()\n"
           "    loss.backward()\n"
           "    opt.step()\n")
    found = analyse_file("pg.py", src)
    assert found.methods == ["Policy gradient (custom)"] and not found.ambiguous


def test_supervised_loop_named_like_policy_gradient_is_supervised():
    """Issue 32: SFT written to look like a policy-gradient loop (log-probs of the dataset's
    answers "weighted" by constant advantages, a reward of the gold data) reads as SFT: the loss
    never depends on the model's own samples."""
    src = ("import torch\n"
           "for batch in data:\n"
           "    logprobs = model(batch).log_softmax(-1)\n"
           "    reward = score(batch)\n"
           "    advantage = torch.ones_like(reward)\n"
           "    loss = -(advantage * logprobs).mean()\n"
           "    loss.backward()\n"
           "    opt.step()\n")
    assert analyse_file("pg.py", src).methods == ["SFT"]
    # a sample drawn, scored, and only its reward used: still the gold data's likelihood
    src = src.replace("    reward = score(batch)\n",
                      "    samples = model.generate(batch)\n    reward = score(samples)\n")
    assert analyse_file("pg.py", src).methods == ["RFT", "SFT"]   # both supervised


def test_custom_supervised_loop():
    src = "for b in loader:\n    loss = model(**b).loss\n    loss.backward()\n    opt.step()\n"
    assert analyse_file("loop.py", src).methods == ["SFT"]


def test_reward_filtered_fine_tuning():
    src = ("from trl import SFTTrainer\n"
           "samples = [model.generate(p, do_sample=True) for p in prompts]\n"
           "keep = [s for s in samples if is_correct(s)]\n"
           "SFTTrainer(model=m, train_dataset=keep).train()\n")
    assert analyse_file("rft.py", src).methods == ["RFT", "SFT"]
    explicit = analyse_file("gen.py", "# rejection sampling: keep the best of 8\nx = 1\n")
    assert explicit.methods == ["RFT"]


def test_unparsable_python_and_shell_fall_back_to_regex():
    broken = "from trl import DPOTrainer\ncfg = DPOConfig(beta=0.1, learning_rate=1e-6\n"
    route = analyse_file("broken.py", broken)
    assert route.parsed is False and route.methods == ["DPO"]
    assert {(h.name, h.value) for h in route.hyperparameters} >= {("beta", 0.1),
                                                                  ("learning_rate", 1e-6)}
    shell = analyse_file("run.sh", "trl sft --model_name_or_path m --learning_rate 2e-5\n"
                                   "accelerate launch grpo.py --num_generations=8\n")
    assert shell.methods == ["SFT"]
    assert ("num_generations", 8) in {(h.name, h.value) for h in shell.hyperparameters}


def test_no_training_code():
    route = analyse_file("eval.py", "import json\nprint(json.dumps({'a': 1}))\n")
    assert route.methods == [] and not route.trains


@pytest.mark.parametrize("mode,methods,verdict", [
    ("free", ["GRPO"], "n/a"),
    ("sft-only", ["SFT"], "complies"),
    ("sft-only", ["RFT", "SFT"], "complies"),
    ("sft-only", ["SFT", "DPO"], "violates"),
    ("sft-only", [], "unknown"),
    ("rl-only", ["GRPO"], "complies"),
    ("rl-only", ["DPO"], "complies"),
    ("rl-only", ["SFT", "GRPO"], "violates"),
    ("rl-only", ["Reward model"], "unknown"),
])
def test_compliance(mode, methods, verdict):
    assert compliance(mode, methods)["verdict"] == verdict


@pytest.mark.parametrize("text,category", [
    ("copy of the base model: weights identical", "base_copy"),
    ("OSError: output/m does not appear to have a file named config.json", "load_failure"),
    ("evaluation timed out after 600 s", "timeout"),
    ("torch.OutOfMemoryError: CUDA out of memory", "out_of_memory"),
    ("tokenizer vocabulary size 32001 does not match embedding size 32000", "tokenizer_mismatch"),
    ("path_escape: model path is outside the output folder", "path_refused"),
    ("Traceback (most recent call last): RuntimeError: boom", "eval_crash"),
    ("something odd", "other"),
])
def test_failure_classification(text, category):
    assert classify(text) == category


def test_values_resolved_through_env_defaults_and_parameters():
    src = ("import os\nfrom trl import SFTConfig, SFTTrainer\n"
           "lr = env_float('A2C_LR', 5e-5)\nsteps = max(1, n)\n"
           "def config(batch, max_length=256):\n"
           "    return SFTConfig(learning_rate=lr, per_device_train_batch_size=batch,\n"
           "                     max_seq_length=max_length, max_steps=steps)\n"
           "SFTTrainer(model='m', args=config(8))\n")
    hps = {h.name: h.value for h in analyse_file("t.py", src).hyperparameters}
    # lr from the env default, max_length from the parameter default; unresolved names dropped.
    assert hps == {"learning_rate": 5e-5, "max_length": 256}
