"""The training modes a task may offer: the one list the schema, the compiler, the CLI, the
runtime and the compliance check agree on."""

from __future__ import annotations

FREE, SFT_ONLY, RL_ONLY = "free", "sft-only", "rl-only"
MODES: tuple[str, ...] = (FREE, SFT_ONLY, RL_ONLY)
MODE_TITLES = {FREE: "Free", SFT_ONLY: "SFT only", RL_ONLY: "RL only"}
