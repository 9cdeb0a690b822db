"""The grader service: its own process, a journal, a queue, a child process per evaluation.

The runtime's API:

    from a2c.runtime.grader_service import (write_service_config, start_grader_service,
                                            compute_baseline_for_run)
    write_service_config(run_dir, token=..., socket_path=..., port=0, output_dir=..., ...)
    baseline = compute_baseline_for_run(run_dir)        # or compute_baseline(...) directly
    handle = start_grader_service(run_dir)              # returns once RUN_DIR/grader/ready exists
    handle.client().list(); handle.wait_idle(600)
    handle.stop()                                       # SIGTERM: the running evaluation finishes

Modules: `launcher` (start the process, ServiceHandle), `server` (HTTP over a Unix socket or
TCP), `core` (GraderService: queue, worker), `limits` (submission count, interval, deadline),
`model_path` (what a submitted path may point at), `evaluator` / `evaluate_one` (the child that
scores one model), `baseline`, `client`, `common`. The service's config file, service.json, is
`a2c.contracts.service_config`; its journal, submissions.jsonl, is `a2c.contracts.journal`. See docs/grader-service.md for the HTTP API and resume semantics.
"""

from a2c.contracts.journal import read_journal
from a2c.contracts.service_config import ServiceConfig, write_service_config
from a2c.runtime.grader_service.baseline import compute_baseline, compute_baseline_for_run
from a2c.runtime.grader_service.client import GraderClientError, ServiceClient
from a2c.runtime.grader_service.launcher import ServiceHandle, start_grader_service
from a2c.runtime.models import model_fingerprint

__all__ = [
    "GraderClientError",
    "ServiceClient",
    "ServiceConfig",
    "ServiceHandle",
    "compute_baseline",
    "compute_baseline_for_run",
    "model_fingerprint",
    "read_journal",
    "start_grader_service",
    "write_service_config",
]
