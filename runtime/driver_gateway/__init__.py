"""The driver gateway: the agent's only way to a driver model (issue 13, section 1).

One process per run on the run's Unix socket (bound at /run/a2c/driver.sock in the sandbox and
reached through `a2c.runtime.sandbox.loopback_forwarder`). It checks the per-run key, forwards
only what it meters (an exact route allow-list, allowed headers, no provider-side tools), pins
the model to an explicit list of ids, passes the four wire formats through with streaming
preserved, meters the provider's own usage fields, prices them from `prices.yaml`, enforces the
run's driver budgets by reserving each call's worst case (issue 23), and records every call (events.jsonl, driver/blobs, driver/totals.json). See docs/drivers.md.
"""

from .config import prepare_gateway, providers, read_config, read_key
from .process import DriverGatewayProcess, agent_env, probe, read_totals, stop_stale

__all__ = ["DriverGatewayProcess", "agent_env", "prepare_gateway", "probe", "providers", "read_config",
           "read_key", "read_totals", "stop_stale"]
