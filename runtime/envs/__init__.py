"""Level 3: environments, lockstep rollouts and the rollout grader.

- `base`: the environment protocol (`Env`, `EnvBatch`, `Episode`; failures per episode)
- `prompts`: the evaluation prompt format of each environment and history truncation
- `rollout`: lockstep rollouts (`run_rollouts`)
- `rollout_grader`: the `rollout` grader kind
- adapters: `textworld_env`, `alfworld_env`, `webshop_env`, `deepsearchqa_env`
- `textworld_games`: the `textworld` data generator (games from a seed, offline)
- `registry`: environment kinds -> adapters
"""
