"""Level 3: environments, lockstep rollouts and the rollout grader.

- `base`: the environment protocol (`Env`, `EnvBatch`, `Episode`; failures per episode)
- `registry`: environment kinds by name (`EnvKind`, `@env_kind`, `get_kind`, `env_factory`)
- `prompts`: the generic prompt format, `get_format(kind)`, history truncation, `describe`
- `rollout`: lockstep rollouts (`run_rollouts`)
- `rollout_grader`: the `rollout` grader kind
- one folder per kind, each with a `kind.py` registering its `EnvKind`: `textworld/`,
  `alfworld/`, `webshop/`, `deepsearchqa/`
"""
