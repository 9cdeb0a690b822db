"""Sidecars: the environment's side services a task declares (`environment.services`, e.g. the
WebShop server), run outside the agent's sandbox, and the agent's gateway to them.

- `process`: start, health-wait and stop the declared services (`start_sidecars`)
- `gateway`: the agent's HTTP gateway on a Unix socket, limited to its training split

(The grader service is another thing: `runtime/grader_service/`.)
"""

from a2c.runtime.sidecars.gateway import INSIDE_DIR, SidecarGateway, agent_gateways, env_var
from a2c.runtime.sidecars.process import (
    RunningSidecar,
    SidecarError,
    SidecarGroup,
    SidecarSpec,
    describe,
    probe,
    sidecars_running,
    start_sidecar,
    start_sidecars,
)

__all__ = [
    "INSIDE_DIR", "RunningSidecar", "SidecarError", "SidecarGateway", "SidecarGroup",
    "SidecarSpec", "agent_gateways", "describe", "env_var", "probe", "sidecars_running",
    "start_sidecar", "start_sidecars",
]
