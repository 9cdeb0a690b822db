"""The trainer and config class names whose use establishes a post-training method (TRL's
`SFTTrainer` -> SFT, ...), read by the method detection (training_methods.py) and by the loss
flow (loss_flow.py: a subclass that overrides a trainer's loss does not establish its method)."""

from __future__ import annotations

# Trainer / config names -> method.
TRAINER_METHODS = {
    "SFTTrainer": "SFT", "SFTConfig": "SFT",
    "GRPOTrainer": "GRPO", "GRPOConfig": "GRPO",
    "PPOTrainer": "PPO", "PPOConfig": "PPO", "PPOv2Trainer": "PPO",
    "DPOTrainer": "DPO", "DPOConfig": "DPO",
    "KTOTrainer": "KTO", "KTOConfig": "KTO",
    "ORPOTrainer": "ORPO", "ORPOConfig": "ORPO",
    "CPOTrainer": "CPO", "CPOConfig": "CPO",
    "RLOOTrainer": "RLOO", "RLOOConfig": "RLOO",
    "OnlineDPOTrainer": "Online DPO", "OnlineDPOConfig": "Online DPO",
    "XPOTrainer": "XPO", "NashMDTrainer": "Nash-MD",
    "GKDTrainer": "GKD", "GKDConfig": "GKD",
    "RewardTrainer": "Reward model", "RewardConfig": "Reward model",
    "PRMTrainer": "Reward model",
}
GENERIC_TRAINERS = {"Trainer": "SFT", "Seq2SeqTrainer": "SFT"}
