"""The leaderboard splits runs by their agent params (issue 26.4): run.json's
`options.agent_params`, an older record's `options.agent_env`, labelled by the params that
differ among the rows shown."""

from __future__ import annotations

from a2c.analysis.board import Group
from a2c.analysis.grouping import CONFIG_KEYS, config_values, label_budgets, param_labels
from a2c.analysis.summary import RunHeader
from a2c.contracts.run_info import RunInfo


def _run(**options) -> RunInfo:
    return RunInfo.from_dict({"run_id": "r", "task": "t", "agent": "a", "options": options})


def test_params_are_a_config_key_and_old_records_still_read():
    assert "agent_params" in CONFIG_KEYS and "agent_env" not in CONFIG_KEYS
    new = config_values(RunHeader(), _run(agent_params={"steps": 10, "lr": 5e-5}, agent_env={}))
    assert new["agent_params"] == '{"lr":5e-05,"steps":10}'
    old = config_values(RunHeader(), _run(agent_env={"OLD_KNOB": "1"}))
    assert old["agent_params"] == "OLD_KNOB=1"
    assert config_values(RunHeader(), _run(agent_params={}, agent_env={}))["agent_params"] is None
    # a record with params: its probe variables (agent_env) are not the agent's settings
    probe = config_values(RunHeader(), _run(agent_params={}, agent_env={"PROBE": "1"}))
    assert probe["agent_params"] is None


def test_labels_name_only_the_params_that_differ():
    a, b = '{"batch":8,"steps":10}', '{"batch":8,"steps":20}'
    assert param_labels([a, b]) == {a: "steps=10", b: "steps=20"}
    assert param_labels([a, "X=1"])["X=1"] == "X=1"
    groups = [Group(key={"agent": "ref-sft"}, config={"budget": None, "model": None,
                                                      "agent_params": p},
                    runs=1, unverified=0, run_ids=[], seeds=[], repeats=None, contaminated=[])
              for p in (a, b)]
    label_budgets(groups, ("agent",))
    assert [g.labels["agent_params"] for g in groups] == ["steps=10", "steps=20"]


def test_a_served_drivers_weights_split_groups_and_name_comparable_runs():
    """Two runs driven by a vllm/ driver a2c served are pooled only with the same weights'
    digest; within that group the seed (which seeds the server's sampling too) tells repeats
    from seeds, so the same digest and seed are the comparable pair."""
    assert "driver_weights" in CONFIG_KEYS

    def served(digest):
        return RunInfo.from_dict({"run_id": "r", "task": "t", "agent": "a", "options": {},
                                  "driver_server": {"weights": {"fingerprint": digest}}})
    a, b = config_values(RunHeader(), served("a" * 64)), config_values(RunHeader(), served("b" * 64))
    assert a["driver_weights"] == "sha256:" + "a" * 12 != b["driver_weights"]
    assert config_values(RunHeader(), served(None))["driver_weights"] is None       # a hub id
    assert config_values(RunHeader(), _run())["driver_weights"] is None             # a hosted model
