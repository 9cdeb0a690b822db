"""The agent kit: what every reference agent uses, one concept a module.

`context` (the run as the runtime gives it to an agent, and its log), `params` (its spec's
`params:`), `answers` (the task's answer format), `grading` (the workspace's grading client),
`training` (model loading, saving, the clock), `episodes` (played episodes to RL data),
`environments` and `inference` (the level-3 environments and the inference engines, the only
runtime modules an agent imports; docs/architecture.md lists them).
"""
