"""Reference agents: scripted (no LLM) scaffolds that really post-train the base model.

`python -m a2c.agents.reference.sft | grpo | copy`. They run like any scaffold (launched by their
agent bundle's launch.sh inside the sandbox) and use only what any agent gets: the environment
variables, the workspace (`run_meta.json`, the grading client) and the read-only data and model.
"""
