"""a2c — compile agentic RL post-training benchmarks from YAML specs into runnable bundles."""

__version__ = "0.1.0"
