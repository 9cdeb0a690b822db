"""A gateway for one analysis of an ended run (`a2c report --narrate`, `a2c review`), and the one
call it makes: a plain, non-streaming question in one wire.

    with analysis_gateway(folder, "anthropic/claude-sonnet-4-5", budget) as gw:
        text = gw.ask(system, user, max_tokens=4000)
    gw.totals                                        # calls, tokens, cost_usd (totals.json)

The folder is laid out as a run's driver part (RunPaths(folder): driver/gateway.json, the key,
totals, blobs; events.jsonl with one `driver_call` per call), so the same process meters the
analysis, enforces its own token/cost budget and records every body, without a run. The run's
own record is never touched: the folder is the analysis's, next to it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from a2c.contracts.run_paths import RunPaths
from a2c.errors import RunError
from a2c.unixhttp import UnixHTTPConnection
from a2c.wires import NAMES, WIRES

from .config import prepare_gateway, read_key
from .gateway_config import GatewayConfig
from .process import DriverGatewayProcess, read_totals

SCRIPTED_MODEL = "claude-sonnet-4-5"
"""The model a `scripted:` analysis driver impersonates (and is priced as)."""


def _error(body: bytes) -> str:
    try:
        data = json.loads(body)
        err = data.get("error", data)
        return str(err.get("message") if isinstance(err, dict) else err)
    except (ValueError, AttributeError):
        return body[:300].decode("utf-8", "replace")


class AnalysisGateway:
    """A started gateway: `ask` sends one question through it (RunError on any refusal)."""

    def __init__(self, folder: Path, config: GatewayConfig):
        self.folder = folder
        self.config = config
        self.wire = config.agent_wire or NAMES[0]      # the wire's name (recorded by callers)
        self.model = config.model
        self.totals: dict[str, Any] = {}

    def ask(self, system: str, user: str, max_tokens: int = 4000,
            timeout: float = 900.0) -> str:
        wire = WIRES[self.wire]
        path, body = wire.question(self.model, system, user, max_tokens)
        key = read_key(self.folder)
        conn = UnixHTTPConnection(str(self.config.socket), timeout)
        try:
            conn.request("POST", path, body=json.dumps(body).encode(),
                         headers={"Content-Type": "application/json", "x-api-key": key,
                                  "authorization": f"Bearer {key}", **wire.client_headers})
            resp = conn.getresponse()
            raw = resp.read()
        except OSError as exc:
            raise RunError(f"the analysis driver gateway does not answer: {exc}") from None
        finally:
            conn.close()
        if resp.status != 200:
            raise RunError(f"the driver model refused the call (HTTP {resp.status}): "
                           f"{_error(raw)}")
        try:
            answer = json.loads(raw)
            if not isinstance(answer, dict):
                raise ValueError("not a JSON object")
            return wire.response(answer).text
        except (ValueError, AttributeError, TypeError, KeyError) as exc:
            raise RunError(f"the driver model's answer is not {self.wire} JSON: "
                           f"{exc}") from None


@contextmanager
def analysis_gateway(folder: str | Path, driver: str, budget: dict | None = None
                     ) -> Iterator[AnalysisGateway]:
    """Prepare and start a gateway in `folder` for `driver` (provider/model or scripted:NAME)
    with `budget` ({driver_tokens, driver_cost_usd, driver_calls}); stopped on exit, its totals
    in `.totals`."""
    folder = Path(folder).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    agent = {"driver": {"wires": list(NAMES), "default": SCRIPTED_MODEL}}
    prepare_gateway(RunPaths(folder), driver, agent, budget)
    proc = DriverGatewayProcess(folder)
    proc.start()
    gw = AnalysisGateway(folder, GatewayConfig.read(folder))
    try:
        yield gw
    finally:
        proc.stop()
        gw.totals = read_totals(folder)
