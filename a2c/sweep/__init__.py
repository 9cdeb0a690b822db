"""`a2c sweep`: a suite's trials run as Ray tasks, each one `a2c run` in a subprocess.

Ray is the engine (placement groups, queues, a cluster with `--address`); nothing here schedules.
The package imports the contracts and the standard library only (Ray lazily, as the optional
extra `a2c[sweep]`): compiling the suite and reading the records happen in the CLI layer
(`a2c/cli/sweep.py`), which hands in a verifier and a leaderboard writer.

- `plan.py` — the suite bundle's trials → what each runs (`TrialPlan`: argv, run dir), cluster
  shapes and which trials no node could fit.
- `state.py` — a trial's state from its run directory: done (skip), resumable, fresh; the outcome.
- `engine.py` — the Ray side: a local instance or `--address`, one placement group per trial
  (agent bundle + grader bundle), at most `--max-concurrent` in flight.
- `progress.py` — the engine's events (`engine.SweepEvents`): each moves its trial along in
  sweep.json and is said in a line, under the rich live table while it runs.
- `record.py` — `sweep.json` (a2c.contracts.sweep_file): every trial, its run directory and
  status.
"""
