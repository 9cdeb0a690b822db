"""Environment services: the services a task's environment declares (`environment.services`, e.g.
the WebShop server), run outside the agent's sandbox, and the agent's proxy to them.

- `process`: start, health-wait and stop the declared services (`start_env_services`)
- `proxy`: the environment service proxy, the agent's HTTP door on a Unix socket, limited to its
  training split

(The grader service is another thing: `runtime/grader_service/`; so is the driver gateway:
`runtime/driver_gateway/`.)
"""

from a2c.runtime.env_services.process import (
    EnvServiceError,
    EnvServiceGroup,
    RunningEnvService,
    describe,
    env_services_running,
    probe,
    start_env_service,
    start_env_services,
    url_of,
)
from a2c.runtime.env_services.proxy import (
    INSIDE_DIR,
    EnvServiceProxy,
    agent_proxies,
    service_url_var,
)

__all__ = [
    "INSIDE_DIR", "EnvServiceError", "EnvServiceGroup", "EnvServiceProxy", "url_of",
    "RunningEnvService", "agent_proxies", "describe", "env_services_running", "probe",
    "service_url_var", "start_env_service", "start_env_services",
]
