"""Re-export for `runtime/run.py` until the run package imports `a2c.contracts.events`; delete
then. The event log and the event types live in `a2c.contracts.events`."""

from a2c.contracts.events import (  # noqa: F401
    GENESIS,
    ChainCheck,
    EventLog,
    event_hash,
    read_events,
    utc_now,
    verify_events,
)
