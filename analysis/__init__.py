"""The analysis (`a2c.analysis`): a run directory to a verified report and leaderboard; it reads
the record through the contracts and never imports the runtime or the compiler."""
