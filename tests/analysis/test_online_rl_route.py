"""Online RL in the route: a GRPOTrainer fed by the agent's own environment episodes is named
"GRPO (online rollouts)", the route is named with or without its warm-up, and the reference
agents' rl-only code holds no supervised objective (what the report's compliance line reads)."""

from __future__ import annotations

import pytest

from a2c.analysis.compliance import compliance, route_name
from a2c.analysis.launched import _a2c_imports, _analyse_module, _module_source
from a2c.analysis.training_methods import ONLINE_GRPO, analyse_file

ONLINE_SRC = ("from trl import GRPOConfig, GRPOTrainer\n"
              "def play(prompts, trainer):\n    return {'prompt_ids': [], 'completion_ids': [],"
              " 'logprobs': None}\n"
              "cfg = GRPOConfig(output_dir='o', learning_rate=3e-5, num_generations=8)\n"
              "GRPOTrainer(model=m, args=cfg, reward_funcs=[r], rollout_func=play).train()\n")


def test_grpo_with_a_rollout_func_or_environment_is_online():
    route = analyse_file("rl.py", ONLINE_SRC)
    assert route.methods == [ONLINE_GRPO]
    env = analyse_file("env.py", "from trl import GRPOTrainer\n"
                                 "GRPOTrainer(model=m, environment_factory=Game)\n")
    assert env.methods == [ONLINE_GRPO]
    plain = analyse_file("grpo.py", "from trl import GRPOTrainer\nGRPOTrainer(model=m)\n")
    assert plain.methods == ["GRPO"]
    shell = analyse_file("notes.sh", "python x.py  # GRPOTrainer(rollout_func=play)\n")
    assert shell.methods == [ONLINE_GRPO]


def test_route_names_say_online_and_warm_up():
    assert route_name([ONLINE_GRPO]) == "GRPO from online rollouts, no warm-up"
    assert route_name([ONLINE_GRPO, "SFT"]) == \
        "GRPO from online rollouts, after an SFT warm-up"
    assert route_name(["GRPO", "SFT"]) == "GRPO, SFT"
    assert route_name([]) is None


@pytest.mark.parametrize("mode,methods,verdict,words", [
    ("rl-only", [ONLINE_GRPO], "complies", "no warm-up"),
    ("rl-only", [ONLINE_GRPO, "SFT"], "violates", "SFT not allowed"),
    ("free", [ONLINE_GRPO, "SFT"], "n/a", "after an SFT warm-up"),
    ("sft-only", [ONLINE_GRPO], "violates", "GRPO (online rollouts) not allowed"),
])
def test_compliance_line_names_the_online_route(mode, methods, verdict, words):
    result = compliance(mode, methods)
    assert result["verdict"] == verdict and words in result["detail"], result


def _launched_methods(module: str) -> list[str]:
    """What the report reads for a reference agent launched as `python -m MODULE`: the module
    and its a2c imports (analysis/launched.py)."""
    source = _module_source(module)[1]
    found = set(_analyse_module(module, source).methods)
    for dep in _a2c_imports(source):
        loaded = _module_source(dep)
        if loaded:
            found |= set(_analyse_module(dep, loaded[1]).methods)
    return sorted(found)


@pytest.mark.parametrize("module,methods,verdict", [
    ("a2c.agents.reference.l3_rl", [ONLINE_GRPO], "complies"),
    ("a2c.agents.reference.grpo", ["GRPO"], "complies"),
    ("a2c.agents.reference.l3_rft", ["RFT", "SFT"], "violates"),
    ("a2c.agents.reference.l3_sft", ["SFT"], "violates"),
])
def test_reference_agents_rl_only_code(module, methods, verdict):
    """The RL agents run no supervised code in rl-only mode (their warm-ups are separate,
    logged commands); the supervised ones would be caught."""
    found = _launched_methods(module)
    assert found == methods
    assert compliance("rl-only", found)["verdict"] == verdict


def test_docstring_prose_is_not_training():
    """The workspace's l3/rollout_example.py says in its usage text that sampled rollouts serve
    "e.g. for rejection sampling / RL": the shipped script trains nothing."""
    src = ('"""Play games.\n\n    python x.py --temperature 1.0   # e.g. for rejection sampling\n"""\n'
           "import json\nprint(json.dumps({}))\n")
    assert analyse_file("l3/rollout_example.py", src).methods == []
    assert analyse_file("gen.py", "# rejection sampling: keep the best of 8\nx = 1\n").methods \
        == ["RFT"]


def test_shipped_rollout_example_trains_nothing():
    from pathlib import Path
    root = Path(__file__).resolve().parents[2]
    for bundle in ("textquest", "alfworld", "webshop", "deepsearchqa"):
        path = root / "generated" / bundle / "workspace" / "l3" / "rollout_example.py"
        if path.is_file():
            assert analyse_file("l3/rollout_example.py", path.read_text()).methods == [], bundle
