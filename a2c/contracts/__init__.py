"""Typed, versioned records for the files passed between compiler, runtime and analysis.

Each record has one owner module here, with its one writer and its one reader:
`bundle` (bundle.json / agent.json / suite.json), `events` (events.jsonl), `journal`
(submissions.jsonl), `submission_errors` (the grader's error codes), `grade_result`
(results/<n>.json), `run_info` (run.json), `service_config` (grader/service.json),
`inference` (the generation defaults a resolved spec and the runtime share).
`python -m a2c.contracts.schemas` writes their JSON Schemas to `schemas/`.
Import the submodules (`from a2c.contracts.bundle import load_bundle`); this package re-exports
nothing so that importing one record never imports the others.
"""
