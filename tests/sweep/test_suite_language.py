"""The suite language: the matrix, pairing, include/exclude, groups, overrides, content ids, and
the checks that refuse unknown tasks, agents, drivers and modes with file:line:col."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from a2c.compiler.build import plan
from a2c.compiler.load import load_spec
from a2c.errors import SpecError

REPO = Path(__file__).resolve().parents[2]


def trials(path):
    (art,) = plan([path])
    return json.loads(art.files["suite.json"])["suite"]["trials"]


def combos(ts):
    return [(t["task"], t["agent"], t["driver"], t["mode"], t["seed"]) for t in ts]


def problems(path) -> list[str]:
    with pytest.raises(SpecError) as exc:
        plan([path])
    return exc.value.problems


def test_drivers_cross_cli_agents_and_skip_reference_agents(write_suite):
    ts = trials(write_suite("tasks: [arith]\nagents: [codex, ref-copy]\n"
                            "drivers: [openai/gpt-5-codex, scripted:sft-recipe]\nseeds: [0, 1]\n"))
    assert combos(ts) == [
        ("arith", "codex", "openai/gpt-5-codex", "free", 0),
        ("arith", "codex", "openai/gpt-5-codex", "free", 1),
        ("arith", "codex", "scripted:sft-recipe", "free", 0),
        ("arith", "codex", "scripted:sft-recipe", "free", 1),
        ("arith", "ref-copy", None, "free", 0), ("arith", "ref-copy", None, "free", 1)]


def test_a_mapping_pairs_each_scaffold_with_its_own_drivers(write_suite):
    ts = trials(write_suite(
        "tasks: [gsm8k]\nagents: [claude-code, codex, opencode]\n"
        "drivers:\n  claude-code: [anthropic/claude-sonnet-4-5]\n  codex: [openai/gpt-5-codex]\n"))
    assert [(t["agent"], t["driver"]) for t in ts] == [
        ("claude-code", "anthropic/claude-sonnet-4-5"), ("codex", "openai/gpt-5-codex"),
        ("opencode", None)]     # not named: its default driver


def test_include_adds_and_exclude_drops(write_suite):
    ts = trials(write_suite(
        "tasks: [arith, textquest]\nagents: [ref-copy, ref-sft]\nseeds: [0, 1]\n"
        "exclude:\n  - {task: textquest, agent: ref-sft}\n  - {agent: ref-copy, seed: 1}\n"
        "include:\n  - {task: arith, agent: ref-grpo, seed: 7}\n"))
    assert combos(ts) == [
        ("arith", "ref-copy", None, "free", 0), ("arith", "ref-sft", None, "free", 0),
        ("arith", "ref-sft", None, "free", 1), ("textquest", "ref-copy", None, "free", 0),
        ("arith", "ref-grpo", None, "free", 7)]


def test_groups_inherit_the_top_level_and_a_shared_trial_is_one(write_suite):
    ts = trials(write_suite(
        "tasks: [arith]\nseeds: [3]\nbudget: {wall_clock: 5m}\ngroups:\n"
        "  a: {agents: [ref-copy, ref-sft]}\n"
        "  b: {agents: [ref-copy], budget: {cpus: 2}}\n"
        "  c: {agents: [ref-copy]}\n"))
    assert [(t["group"], t["agent"]) for t in ts] == [("a", "ref-copy"), ("a", "ref-sft"),
                                                      ("b", "ref-copy")]
    # c's only trial is a's first (same content: same id); b's differs by its cpus override.
    assert ts[0]["overrides"] == {"budget": {"wall_clock_s": 300}}
    assert ts[2]["overrides"] == {"budget": {"wall_clock_s": 300, "cpus": 2}}
    assert ts[2]["resources"]["agent"] == {"CPU": 2.0}
    assert all(t["wall_clock_s"] == 300 for t in ts)


def test_trial_ids_come_from_content(write_suite, repo_specs):
    base = "tasks: [arith]\nagents: [ref-copy]\n"
    first = trials(write_suite(base))[0]
    assert trials(write_suite(base))[0]["id"] == first["id"]            # stable
    assert re.fullmatch(r"arith-ref-copy-free-s0-[0-9a-f]{10}", first["id"])
    for extra in ("seeds: [1]\n", "base_model: tiny\n", "budget: {wall_clock: 1m}\n",
                  "backend: docker\n", "budget: {driver_tokens: 1000}\n"):
        assert trials(write_suite(base + extra))[0]["id"] != first["id"], extra
    # The task's bundle digest is part of the content: a changed task is a new trial.
    task = repo_specs / "tasks" / "arith.yaml"
    task.write_text(task.read_text().replace("max_submissions: 10", "max_submissions: 9"))
    changed = trials(write_suite(base))[0]
    assert changed["id"] != first["id"] and changed["task_digest"] != first["task_digest"]


def test_resources_hold_the_grader_device_apart(write_suite):
    (gpu,) = trials(write_suite("tasks: [gsm8k]\nagents: [ref-sft]\n"))
    assert gpu["resources"] == {"agent": {"CPU": 1.0, "GPU": 1.0},
                                "grader": {"CPU": 1.0, "GPU": 1.0}}
    (cpu,) = trials(write_suite("tasks: [arith]\nagents: [ref-sft]\n"))
    assert cpu["resources"] == {"agent": {"CPU": 1.0}, "grader": {"CPU": 1.0}}
    (shared,) = trials(write_suite("tasks: [gsm8k]\nagents: [ref-sft]\n"
                                   "budget: {gpus: 4, eval_gpus: 2, eval_cpus: 4}\n"))
    assert shared["resources"] == {"agent": {"CPU": 1.0, "GPU": 4.0},
                                   "grader": {"CPU": 4.0, "GPU": 2.0}}


def _where(problem: str) -> tuple[str, int, int, str]:
    m = re.match(r"(.+?):(\d+):(\d+): (\S+): (.*)", problem)
    assert m, problem
    return m[1], int(m[2]), int(m[3]), m[4], m[5]


def test_unknown_task_agent_and_driver_are_refused_with_positions(write_suite, repo_specs):
    (repo_specs / "drivers").mkdir(exist_ok=True)
    (repo_specs / "drivers" / "sft-recipe.yaml").write_text("steps: []\n")
    path = write_suite("tasks: [arith, arithh]\nagents: [ref-copy, codexx, codex]\n"
                       "drivers: [openai/gpt-5-codex, acme/model-1, gpt-5, scripted:nope]\n")
    found = [_where(p) for p in problems(path)]
    assert [(f[1], f[3]) for f in found] == [(5, "tasks[1]"), (6, "agents[1]"),
                                             (7, "drivers[1]"), (7, "drivers[2]"),
                                             (7, "drivers[3]")]
    assert all(f[0] == str(path) for f in found)
    assert "did you mean 'arith'" in found[0][4] and "did you mean 'codex'" in found[1][4]
    assert "unknown driver provider 'acme'" in found[2][4]
    assert "provider/model" in found[3][4]
    assert "no driver script 'nope' under specs/drivers" in found[4][4]
    # scripted:sft-recipe exists there: accepted (by form alone where specs/drivers/ is absent).
    assert len(trials(write_suite("tasks: [arith]\nagents: [codex]\n"
                                  "drivers: [scripted:sft-recipe]\n"))) == 1


def test_a_mode_the_task_does_not_offer_is_refused(write_suite, repo_specs):
    task = repo_specs / "tasks" / "arith.yaml"
    task.write_text(task.read_text().replace("modes: [free, sft-only, rl-only]",
                                             "modes: [free, sft-only]"))
    path = write_suite("tasks: [arith]\nagents: [ref-copy]\nmodes: [free, rl-only]\n")
    (problem,) = problems(path)
    where = _where(problem)
    assert (where[1], where[2], where[3]) == (7, 15, "modes[1]")
    assert "task 'arith' does not offer mode 'rl-only'" in where[4]
    # ...and the exclude the message suggests makes it valid.
    path = write_suite("tasks: [arith]\nagents: [ref-copy]\nmodes: [free, rl-only]\n"
                       "exclude: [{task: arith, mode: rl-only}]\n")
    assert len(trials(path)) == 1


def test_pairing_and_include_mistakes_are_refused(write_suite):
    path = write_suite("tasks: [arith]\nagents: [ref-copy, codex]\n"
                       "drivers: {ref-copy: [openai/gpt-5], opencode: [openai/gpt-5]}\n"
                       "exclude: [{task: gsmk8}]\n")
    whats = [_where(p)[4] for p in problems(path)]
    assert any("which group 'main' does not run" in w for w in whats)
    assert any("'ref-copy' is a reference agent" in w for w in whats)
    assert any("no task spec 'gsmk8'" in w for w in whats)


def test_an_exclude_that_matches_nothing_is_refused(write_suite):
    (problem,) = problems(write_suite("tasks: [arith]\nagents: [ref-copy]\n"
                                      "exclude: [{task: arith, seed: 5}]\n"))
    assert "exclude[0]: this exclude entry matches no combination" in problem


def test_shipped_suites():
    builtin = load_spec(REPO / "specs" / "suites" / "builtin.yaml")
    assert builtin["tasks"] == ["arith", "textquest"] and builtin["seeds"] == [0, 1]
    paper = trials(REPO / "specs" / "suites" / "paper.yaml")
    assert {t["task"] for t in paper} == {"gsm8k", "humaneval", "alpacaeval", "alfworld",
                                          "webshop", "deepsearchqa"}
    assert {t["group"] for t in paper} == {"controlled", "systems"}
    systems = {(t["agent"], t["driver"]) for t in paper if t["group"] == "systems"}
    assert systems == {("claude-code", "anthropic/claude-sonnet-4-5"),
                       ("codex", "openai/gpt-5-codex"), ("gemini-cli", "gemini/gemini-2.5-pro")}
    controlled = {t["driver"] for t in paper if t["group"] == "controlled"}
    assert len(controlled) == 6
    assert len({t["id"] for t in paper}) == len(paper)


def test_the_built_bundle_lists_the_trials():
    suite = json.loads((REPO / "generated" / "suites" / "builtin" / "suite.json").read_text())
    listed = (REPO / "generated" / "suites" / "builtin" / "TRIALS.md").read_text()
    assert suite["suite"]["trials"] == trials(REPO / "specs" / "suites" / "builtin.yaml")
    for t in suite["suite"]["trials"]:
        assert f"`{t['id']}`" in listed
    assert suite["files"]["TRIALS.md"]


def test_known_driver_providers_are_the_gateways():
    """The built-ins, and `vllm` (a server a2c starts) with the wires the gateway gives it."""
    from a2c.compiler.suite_checks import DRIVER_PROVIDER_WIRES, DRIVER_PROVIDERS
    from a2c.runtime.driver_gateway.config import BUILTIN_PROVIDERS, VLLM_PROVIDER
    from a2c.wires import VLLM_WIRES
    assert set(DRIVER_PROVIDERS) == {*BUILTIN_PROVIDERS, VLLM_PROVIDER}
    assert {p: set(w) for p, w in DRIVER_PROVIDER_WIRES.items()} == \
        {**{p: set(c["wires"]) for p, c in BUILTIN_PROVIDERS.items()},
         VLLM_PROVIDER: set(VLLM_WIRES)}


def test_a_scaffold_paired_with_a_provider_it_cannot_speak_to_is_refused(write_suite):
    """claude-code speaks Anthropic Messages only: an OpenAI driver would stop at its pre-flight
    (the gateway passes requests through), so the suite says so where the agent is named;
    OpenCode speaks all three wires and takes any of the providers."""
    path = write_suite("tasks: [arith]\nagents: [claude-code, opencode]\n"
                       "drivers: [anthropic/claude-sonnet-4-5, openai/gpt-5, gemini/gemini-2.5-pro]\n")
    found = [_where(p) for p in problems(path)]
    assert [(f[3], f[4].split(";")[0]) for f in found] == [
        ("agents[0]", "agent 'claude-code' speaks anthropic"),
        ("agents[0]", "agent 'claude-code' speaks anthropic")]
    assert "driver 'openai/gpt-5' is served as openai-chat, openai-responses" in found[0][4]
    paired = write_suite("tasks: [arith]\nagents: [claude-code, opencode]\n"
                         "drivers: {claude-code: [anthropic/claude-sonnet-4-5],\n"
                         "          opencode: [openai/gpt-5, gemini/gemini-2.5-pro]}\n")
    assert len(trials(paired)) == 3
