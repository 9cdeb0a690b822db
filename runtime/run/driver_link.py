"""The run's side of a scaffold's driver gateway: started with its server (what served the
driver recorded in run.json), its running totals copied into run.json, the agent's first call
announced, restarted when it dies, and the pre-flight that proves it answers before the
baseline is spent. The gateway process itself is `runtime/run/driver.py:DriverGateway`."""

from __future__ import annotations

from a2c.contracts.run_info import RunInfo
from a2c.contracts.run_paths import RunPaths
from a2c.runtime.run.context import Reporter
from a2c.runtime.run.driver import DriverGateway, read_key
from a2c.runtime.run.progress import DriverUse, first_call_line


class DriverLink:
    """One run's gateway as the runner sees it (None where the agent has no gateway)."""

    def __init__(self, paths: RunPaths, run: RunInfo, report: Reporter):
        self.paths, self.run, self.report = paths, run, report
        self.gateway = DriverGateway(paths.root)
        # resumed: a first call made before was announced then
        self._first_call_seen = DriverUse.of(self.gateway.totals()).seq > 0

    def key(self) -> str | None:
        """The gateway's per-run key (a secret: redacted from the record), once written."""
        return read_key(self.paths) if self.paths.driver_key.is_file() else None

    def start(self) -> None:
        """Its vLLM server (a `vllm/` driver) and the gateway; what served the driver into
        run.json (and so into run_started)."""
        if self.gateway.server_plan():
            self.report(f"starting the driver's vLLM server ({self.run.driver}; log "
                        f"{self.paths.logs / 'driver-server.log'})")
        self.report(f"starting the driver gateway ({self.run.driver})")
        self.gateway.start()
        record = self.gateway.server_record()
        if record is None:
            return
        self.run.driver_server = record
        self.run.write(self.paths.run_json)
        self.report(f"driver server: vLLM {record.version or '?'} serving "
                    f"{record.served_model_name} (context {record.max_model_len or '?'} "
                    f"tokens, tool parser {record.tool_call_parser}, weights "
                    f"{str(record.fingerprint)[:12]})")

    def restart_safely(self) -> None:
        """After it died mid-run: the run goes on (the agent sees errors) if it cannot."""
        try:
            self.gateway.start()
        except Exception as exc:  # noqa: BLE001 - the run goes on; the agent sees errors
            self.report(f"note: the driver gateway could not be restarted: {exc}")

    def alive(self) -> bool:
        return self.gateway.alive()

    def stop(self) -> None:
        self.gateway.stop()

    def refresh(self) -> None:
        """run.json driver_usage: the gateway's running totals (driver/totals.json)."""
        totals = self.gateway.totals()
        if totals is None:
            return
        self.run.driver_usage = totals
        use = DriverUse.of(totals)
        if not self._first_call_seen and use.seq > 0:
            self._first_call_seen = True
            self.report(first_call_line(use))

    def spent(self) -> bool:
        """Whether a driver budget was spent (the gateway refuses further calls)."""
        return bool(DriverUse.of(self.run.driver_usage).exhausted)
