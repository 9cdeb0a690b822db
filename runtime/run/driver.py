"""The run's driver gateway, seen from the runner: configured at prepare (`configure`), started
before the baseline and stopped at the end like the grader service (`DriverGateway`), its totals
summarised for run.json and the summary (`usage_summary`).

The gateway itself is `a2c.runtime.driver_gateway` (its own process; docs/drivers.md). Only
agents of type `cli` get one (scaffold.uses_gateway).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from a2c.contracts.driver_server import (
    DriverServerRecord,
    ServerInfo,
    ServerPlan,
    SharedServerState,
    ShareRecord,
)
from a2c.contracts.run_paths import RunPaths
from a2c.contracts.spec import AgentSpec, DriverSpec
from a2c.errors import A2CError, RunError
from a2c.runtime.driver_gateway.gateway_config import GatewayConfig
from a2c.runtime.run.scaffold import typed
from a2c.unixhttp import remove_stale


def is_served(driver: str | None) -> bool:
    """A driver whose server a2c starts itself (`vllm/MODEL`: runtime/run/driver_server.py)."""
    return bool(driver) and str(driver).startswith("vllm/")


def configure(paths: RunPaths, driver: str, agent: dict | AgentSpec, budget: dict,
              gpus: list[str] | None = None, seed: int = 0,
              share: str | Path | None = None) -> GatewayConfig:
    """driver/gateway.json and driver/gateway.key for this run (the gateway resolves the
    upstream; a provider it does not know, an unset key variable or a wire the upstream does
    not serve is one clear error). A `vllm/MODEL` driver's server is planned here (on `gpus`,
    seeded with the run's seed) and started with the gateway; with `share`, the server is the
    one the runs given that folder share (runtime/run/driver_share.py)."""
    from a2c.runtime.driver_gateway import prepare_gateway
    paths.driver.mkdir(mode=0o700, exist_ok=True)
    server = None
    if is_served(driver):
        from a2c.runtime.run.driver_plan import plan
        spec = typed(agent or {})
        need = spec.driver.context_min if isinstance(spec.driver, DriverSpec) else None
        server = plan(driver.split("/", 1)[1], list(gpus or []), seed,
                      context_min=need, scaffold=spec.id or "the scaffold")
        if share:
            server = replace(server, share=str(Path(share).expanduser().resolve()))
    elif share:
        raise RunError(f"--share-driver-server is for a vllm/ driver a2c starts; {driver} is "
                       "served by its provider")
    try:
        return GatewayConfig.from_dict(prepare_gateway(paths, driver, agent, budget,
                                                       server=server))
    except A2CError:
        raise
    except (ValueError, KeyError, OSError) as exc:
        raise RunError(f"driver {driver}: {exc}") from exc


def read_key(paths: RunPaths) -> str:
    try:
        return paths.driver_key.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise RunError(f"{paths.driver_key}: the run's gateway key is missing ({exc})") from exc


def read_wire(paths: RunPaths) -> str:
    """The wire the run chose for the scaffold (gateway.json's agent_wire; "" if none)."""
    return GatewayConfig.read(paths.root).agent_wire or ""


def served_context(paths: RunPaths) -> int | None:
    """The context of the model the gateway forwards to, when a2c knows it: a `vllm/` server's
    `max_model_len` (a2c started it), a provider's stated `context`, or the one its server
    reports (`context: ask`, /v1/models, asked without the provider's key). The scaffold is told
    (A2C_DRIVER_CONTEXT) so that its own compaction keeps the conversation inside the model:
    Claude Code and Codex assume a large window for a model they do not know, and a vLLM server
    refuses every call once the conversation passes the context."""
    try:
        config = GatewayConfig.read(paths.root)
    except (A2CError, OSError, ValueError):
        return None
    upstream = config.upstream
    if upstream.stated_context is not None:
        return upstream.stated_context
    if upstream.context != "ask" and not config.server:
        return None
    if not upstream.base_url:
        return None
    from a2c.runtime.driver_gateway.context import served_context as ask
    from a2c.runtime.driver_gateway.upstream import Upstream
    return ask(Upstream(upstream.base_url, 5.0, 5.0), config.model)


def usage_summary(totals: dict | None) -> dict[str, Any] | None:
    """The summary's driver line (`DriverUse.summary`) of the gateway's totals."""
    if not isinstance(totals, dict):
        return None
    from a2c.runtime.run.progress import DriverUse
    return DriverUse.of(totals).summary()


class DriverGateway:
    """The run's gateway process (`DriverGatewayProcess`), with the runner's view of it; for a
    `vllm/MODEL` driver, the vLLM server too (started before the gateway, its URL written into
    gateway.json; stopped after the gateway, so a call in flight is cut and recorded first)."""

    def __init__(self, run_dir: Path):
        self.run_dir = Path(run_dir)
        self.paths = RunPaths(self.run_dir)
        self.process = None
        self.server = None
        self.server_info: ServerInfo | None = None
        self.shared = None        # driver_share.SharedServer when the server is shared
        self.share_state: SharedServerState | None = None

    def server_plan(self) -> ServerPlan | None:
        try:
            return GatewayConfig.read(self.run_dir).server
        except (A2CError, OSError, ValueError):
            return None

    def start(self) -> None:
        from a2c.runtime.driver_gateway import DriverGatewayProcess
        server_plan = self.server_plan()
        if server_plan and server_plan.share and self.shared is None:
            self._attach_shared(server_plan)
        elif server_plan and self.server is None:
            from a2c.runtime.driver_gateway.config import set_upstream_url
            from a2c.runtime.run.driver_server import VllmServer
            server = VllmServer(self.run_dir, server_plan)
            try:            # (an interrupt while it loads must not leave it running)
                self.server_info = server.start()
            except BaseException:
                server.stop()
                raise
            self.server = server
            set_upstream_url(self.run_dir, server.base_url)
        remove_stale(self.paths.driver_socket)
        self.process = DriverGatewayProcess(self.run_dir)
        try:
            self.process.start()
        except BaseException:
            self.stop()
            raise

    def _attach_shared(self, server_plan: ServerPlan) -> None:
        """Attach to the node's shared server for this plan, starting it when none runs."""
        from a2c.runtime.driver_gateway.config import set_upstream_url
        from a2c.runtime.run.driver_server import VllmServer
        from a2c.runtime.run.driver_share import SharedServer
        plan = replace(server_plan, share=None)
        shared = SharedServer(server_plan.share, plan, self.run_dir.name)

        def start(log: Path):
            server = VllmServer(self.run_dir, plan, log=log)
            try:
                return server, server.start()
            except BaseException:
                server.stop()
                raise
        self.share_state = shared.acquire(start)
        self.shared = shared
        self.server_info = self.share_state.info
        set_upstream_url(self.run_dir, self.share_state.url)

    def alive(self) -> bool:
        return self.process is not None and bool(self.process.alive())

    def stop(self) -> None:
        try:
            if self.process is not None:
                try:
                    self.process.stop()
                finally:
                    self.process = None
        finally:
            if self.server is not None:
                try:
                    self.server.stop()
                finally:
                    self.server = None
            if self.shared is not None:
                try:
                    self.shared.release()   # the last run to leave stops it
                finally:
                    self.shared = None

    def server_record(self) -> DriverServerRecord | None:
        """run.json's `driver_server` for a served driver: what ran (the weights' digest, the
        server's version and flags, the served context) and the sampling in force (the
        server's defaults, the seed)."""
        plan = self.server_plan()
        if not plan:
            return None
        return DriverServerRecord.of(plan, self.server_info, self._share_record())

    def _share_record(self) -> ShareRecord | None:
        """Whether the server was this run's own or shared (its key, the run that started it)."""
        state = self.share_state
        if not state:
            return None
        return ShareRecord(key=state.key, started_by=state.started_by,
                           started_by_this_run=bool(state.started_it))

    def probe(self) -> tuple[bool, str]:
        from a2c.runtime.driver_gateway import probe
        try:
            return probe(self.paths.driver_socket, read_key(self.paths))
        except A2CError as exc:
            return False, str(exc)
        except OSError as exc:
            return False, str(exc)

    def totals(self) -> dict | None:
        from a2c.runtime.driver_gateway import read_totals
        try:
            totals = read_totals(self.run_dir)
        except (OSError, ValueError):
            return None
        return totals if isinstance(totals, dict) and totals else None

    def last_log_line(self) -> str:
        try:
            lines = self.paths.driver_log.read_text(encoding="utf-8",
                                                    errors="replace").strip().splitlines()
        except OSError:
            return ""
        return lines[-1].strip()[:200] if lines else ""

