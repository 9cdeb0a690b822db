"""a2c's own agents, beside the runtime and not part of it: the scripted reference agents
(`reference/`), the small kit they are built on (`kit/`), and the scripted driver model
(`scripted_driver/`).

The runtime starts each of them by module name in a process of its own (an agent bundle's
launch.sh, `python -m a2c.agents.scripted_driver`), never by import: nothing in the compiler,
the runtime or the analysis imports `a2c.agents` (tests/test_layering.py).
"""
