"""The runtime (`a2c.runtime`): runs compiled bundles (grader service, sandbox, driver gateway,
recorder) and never compiles; it imports the contracts, never the compiler or the analysis."""
