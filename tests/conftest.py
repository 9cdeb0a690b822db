"""Shared test configuration: `--runslow` enables the end-to-end tests CI always runs."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

import pytest

# The record keys (a2c.contracts.record_key) of this test session, never the operator's own: the
# signing key (Ed25519, record.ed25519 + .pub) and the legacy HMAC key file's place.
_KEYS = tempfile.mkdtemp(prefix="a2c-test-key-")
atexit.register(shutil.rmtree, _KEYS, ignore_errors=True)   # per process (each xdist worker)
os.environ["A2C_RECORD_KEY_FILE"] = os.path.join(_KEYS, "record.key")
os.environ["A2C_RECORD_SIGNING_KEY"] = os.path.join(_KEYS, "record.ed25519")


def pytest_addoption(parser):
    parser.addoption("--runslow", action="store_true", default=False,
                     help="also run tests marked slow (end-to-end; CI always does)")


# The slow tests that must run one at a time (marked `serial`; the README's test command runs them
# after the others, which share three pytest-xdist workers). On two cores a SmolLM2 run under a
# wall-clock budget gets fewer training steps when anything runs beside it, and a test that
# measures time or CPU share measures its neighbours too. Keyed by file name and test function
# (parameters included), so a test keeps its place when its folder moves; an entry that names
# no collected test fails the collection (a renamed test cannot silently leave the list).
SERIAL = {
    # SmolLM2 trained or evaluated under a budget, or a long SmolLM2 evaluation
    "test_check_slow.py::test_authored_text_task_gains_with_ref_sft_in_5_minutes",
    "test_check_slow.py::test_every_shipped_task_checks",
    "test_check_slow.py::test_new_task_passes_the_whole_check",
    "test_final_split_e2e.py::test_ref_sft_on_arith_strict_records_reports_and_verifies_the_final_split",
    "test_l3_rl_e2e.py::test_ref_l3_rl_rl_only_learns_from_its_own_episodes",
    "test_ref_agents.py::test_grpo_reference_agent_beats_baseline",
    "test_l3_e2e.py::test_textquest_ref_l3_sft_beats_baseline",
    "test_l3_textworld.py::test_prefix_cache_changes_nothing_but_the_work_with_smollm2",
    "test_inference.py::test_smollm2_batched_greedy_equals_per_item",
    "test_models.py::test_smollm2_converted_from_the_packaged_gguf",
    "test_scaffolds_docker_e2e.py::test_scaffold_runs_the_sft_recipe_in_docker[claude-code]",
    # Ray given the machine's two CPUs; a kill at a chosen moment
    "test_builtin_sweep.py::test_builtin_suite_killed_and_resumed",
    # time and CPU share measured
    "test_cgroups.py::test_two_busy_loops_under_half_a_cpu_get_about_half_a_core",
    "test_cgroups.py::test_fork_bomb_stays_inside_its_pids_limit_and_is_gone_at_the_deadline",
    "test_cgroups.py::test_memory_hog_is_killed_as_oom_while_the_grader_keeps_answering",
    "test_run_e2e.py::test_deadline_stops_whole_tree_within_5s",
    "test_docker_e2e.py::test_tree_of_sleepers_and_daemons_is_gone_at_the_deadline",
    "test_runtime.py::test_run_meta_symlinks_and_fifo_leak_nothing_crash_nothing_delay_nothing",
    "test_runtime.py::test_150000_files_do_not_delay_the_deadline",
    "test_perf.py::test_long_driver_record_is_fast",
    "test_perf.py::test_report_200_submissions_is_fast",
}


def pytest_configure(config):
    config.addinivalue_line("markers", "vllm_server: the judge against a real vLLM server; "
                            "skipped unless A2C_VLLM_SERVER_TEST=1 (nox -s vllm)")
    config.addinivalue_line("markers", "vllm_scaffolds: each wire's scaffold run whole on a "
                            "served driver; minutes: `nox -s vllm -- --scaffolds`, not in CI")
    config.addinivalue_line("markers", "serial: a slow test that runs alone (tests/conftest.py "
                            "SERIAL): `pytest --runslow -m serial`, after the others")


def _serial_key(item) -> tuple[str, str]:
    return item.path.name, item.name


def mark_serial(items) -> None:
    """Mark the SERIAL tests; an entry matching nothing is an error when the whole suite is
    collected (a test was renamed or moved out of its file)."""
    matched = set()
    for item in items:
        name, test = _serial_key(item)
        for key in (f"{name}::{test}", f"{name}::{test.split('[', 1)[0]}"):
            if key in SERIAL:
                matched.add(key)
                item.add_marker(pytest.mark.serial)
                if "slow" not in item.keywords:
                    raise pytest.UsageError(f"tests/conftest.py SERIAL: {key} is not marked slow")
                break
    whole = {item.path.name for item in items}
    stale = sorted(key for key in SERIAL - matched if key.split("::", 1)[0] in whole)
    if stale:
        raise pytest.UsageError("tests/conftest.py SERIAL names tests that do not exist: "
                                + ", ".join(stale))


def pytest_collection_modifyitems(config, items):
    mark_serial(items)
    if config.getoption("--runslow"):
        return
    skip_slow = pytest.mark.skip(reason="slow: run with --runslow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip_slow)
