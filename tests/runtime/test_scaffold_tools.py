"""a2c's tool prefix for the LLM scaffolds (runtime/scaffold_tools.py): each pin installed whole
or not at all, never into the machine's global npm, a failure reported in one line with the
failing command's last lines, and two installers at once both ending with a whole install.

npm is a fake here (a script that lays out node_modules as npm does, or fails half way); the pip
route installs a wheel the test builds, offline (PIP_NO_INDEX). The real pins are installed from
the registries by scripts/setup.sh and checked again by .ci/run in a fresh prefix.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import zipfile
from pathlib import Path

import pytest

from a2c.cli import main
from a2c.contracts.spec import AgentSpec
from a2c.runtime import scaffold_tools
from a2c.runtime.scaffold_tools import install_agent, missing_reason, node_tool, tools_root

FAKE_NPM = textwrap.dedent('''\
    #!{python}
    """npm install --prefix DIR PKG@V ...: each package's folder with a `bin` command, as npm
    lays them out; FAKE_NPM_FAIL=NAME fails half way through that package."""
    import json, os, sys
    args = sys.argv[1:]
    prefix = args[args.index("--prefix") + 1]
    with open(os.environ["FAKE_NPM_CALLS"], "a") as calls:
        calls.write(" ".join(args) + "\\n")
    for spec in [a for a in args[1:] if not a.startswith("-") and a != prefix]:
        name, _, version = spec.rpartition("@")
        folder = os.path.join(prefix, "node_modules", name)
        os.makedirs(folder, exist_ok=True)
        if os.environ.get("FAKE_NPM_FAIL") == name:
            for i in range(30):
                print(f"npm error line {{i}} for {{name}}")
            sys.exit(1)
        bin_dir = os.path.join(prefix, "node_modules", ".bin")
        os.makedirs(bin_dir, exist_ok=True)
        if name.startswith("node-linux-"):
            os.makedirs(os.path.join(folder, "bin"), exist_ok=True)
            node = os.path.join(folder, "bin", "node")
            with open(node, "w") as f:
                f.write("#!/bin/sh\\necho node-{{0}}\\n".format(version))
            os.chmod(node, 0o755)
            meta = {{"name": name, "version": version, "bin": {{"node": "bin/node"}}}}
            rel = "bin/node"
        else:
            command = name.rsplit("/", 1)[-1]
            with open(os.path.join(folder, "cli.sh"), "w") as f:
                f.write("#!/bin/sh\\necho {{0}} {{1}} on $(node)\\n".format(command, version))
            os.chmod(os.path.join(folder, "cli.sh"), 0o755)
            meta = {{"name": name, "version": version, "bin": {{command: "cli.sh"}}}}
            rel = "cli.sh"
        with open(os.path.join(folder, "package.json"), "w") as f:
            json.dump(meta, f)
        for command in meta["bin"]:
            link = os.path.join(bin_dir, command)
            if not os.path.lexists(link):
                os.symlink(os.path.join("..", name, rel), link)
    ''')


def fake_agent(ident="fake", npm=("@example/fake-cli@1.2.3",), check="fake-cli"):
    return {"id": ident, "type": "cli", "launch": {"command": f"{check} -p x"},
            "install": {"npm": list(npm), "check": check}}


@pytest.fixture
def fake_npm(tmp_path, monkeypatch):
    folder = tmp_path / "fake-bin"
    folder.mkdir()
    (folder / "npm").write_text(FAKE_NPM.format(python=sys.executable))
    (folder / "npm").chmod(0o755)
    calls = tmp_path / "npm-calls"
    monkeypatch.setenv("FAKE_NPM_CALLS", str(calls))
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    return calls


def test_an_npm_scaffold_goes_into_the_prefix_whole_and_runs_on_the_pinned_node(
        tmp_path, fake_npm):
    prefix = tmp_path / "prefix"
    outcome = install_agent(fake_agent(), prefix)
    assert outcome.status == "installed", outcome
    calls = fake_npm.read_text().splitlines()
    assert all("-g" not in line.split() for line in calls)   # never the machine's global npm
    assert any(scaffold_tools.node_package() in line for line in calls)
    link = prefix / "bin" / "fake-cli"
    assert link.is_symlink() and not Path(os.readlink(link)).is_absolute()
    out = subprocess.run([str(link)], capture_output=True, text=True, check=True).stdout
    assert out.strip() == f"fake-cli 1.2.3 on node-{scaffold_tools.NODE_VERSION}"
    tool = scaffold_tools.tools_of(fake_agent(), prefix)[0]
    assert tool.manifest()["commands"] == ["fake-cli"]
    assert list(tools_root(prefix).glob(".*.tmp-*")) == []
    # again: the exact pin is there whole, nothing runs
    before = fake_npm.read_text()
    assert install_agent(fake_agent(), prefix).status == "present"
    assert fake_npm.read_text() == before
    assert missing_reason(fake_agent(), prefix) is None


def test_another_pin_is_another_folder_and_the_old_one_goes(tmp_path, fake_npm):
    prefix = tmp_path / "prefix"
    install_agent(fake_agent(), prefix)
    old = scaffold_tools.tools_of(fake_agent(), prefix)[0].folder
    newer = fake_agent(npm=("@example/fake-cli@1.3.0",))
    assert install_agent(newer, prefix).status == "installed"
    new = scaffold_tools.tools_of(newer, prefix)[0].folder
    assert new != old and new.is_dir() and not old.exists()
    out = subprocess.run([str(prefix / "bin" / "fake-cli")], capture_output=True, text=True)
    assert out.stdout.startswith("fake-cli 1.3.0")


def test_a_failed_install_leaves_nothing_that_looks_installed(tmp_path, fake_npm,
                                                              monkeypatch):
    prefix = tmp_path / "prefix"
    monkeypatch.setenv("FAKE_NPM_FAIL", "@example/fake-cli")
    outcome = install_agent(fake_agent(), prefix)
    assert outcome.status == "failed"
    assert outcome.detail == "`npm install @example/fake-cli@1.2.3` failed (exit 1)"
    # the failing command's last lines, first; the whole output in the log that stays
    assert outcome.error.tail[-1] == "npm error line 29 for @example/fake-cli"
    assert len(outcome.error.tail) == scaffold_tools.TAIL_LINES
    assert "npm error line 0 for" in outcome.error.log.read_text()
    tool = scaffold_tools.tools_of(fake_agent(), prefix)[0]
    assert not tool.folder.exists() and tool.manifest() is None
    assert not (prefix / "bin" / "fake-cli").exists()
    assert list(tools_root(prefix).glob(".*.tmp-*")) == []
    assert node_tool(prefix).manifest() is not None     # node itself did install
    reason = missing_reason(fake_agent(), prefix)
    assert reason.startswith("fake: `fake-cli` the last install failed: `")
    assert "a2c agents install fake" in reason


def test_a_half_install_left_by_older_code_is_not_taken_for_a_whole_one(tmp_path, fake_npm):
    prefix = tmp_path / "prefix"
    tool = scaffold_tools.tools_of(fake_agent(), prefix)[0]
    (tool.folder / "npm" / "node_modules" / "@example" / "fake-cli").mkdir(parents=True)
    assert tool.manifest() is None
    assert install_agent(fake_agent(), prefix).status == "installed"
    assert tool.manifest() is not None


def test_two_installers_at_once_both_end_with_a_whole_install(tmp_path, fake_npm):
    prefix = tmp_path / "prefix"
    outcomes = []
    threads = [threading.Thread(target=lambda: outcomes.append(
        install_agent(fake_agent(), prefix))) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(o.status for o in outcomes) == ["installed", "present", "present"]
    npm_runs = [c for c in fake_npm.read_text().splitlines() if "@example/fake-cli" in c]
    assert len(npm_runs) == 1
    assert subprocess.run([str(prefix / "bin" / "fake-cli")], capture_output=True).returncode == 0


def test_a_file_in_prefix_bin_that_a2c_did_not_make_is_not_overwritten(tmp_path, fake_npm):
    prefix = tmp_path / "prefix"
    (prefix / "bin").mkdir(parents=True)
    (prefix / "bin" / "fake-cli").write_text("mine\n")
    outcome = install_agent(fake_agent(), prefix)
    assert outcome.status == "failed" and "is not a link a2c made" in outcome.detail
    assert (prefix / "bin" / "fake-cli").read_text() == "mine\n"


def test_agents_install_prints_one_line_per_agent_and_goes_on_past_a_failure(
        tmp_path, fake_npm, monkeypatch, capsys):
    agents = {"good": fake_agent("good", ("@example/good@1.0.0",), "good"),
              "bad": fake_agent("bad", ("@example/bad@1.0.0",), "bad")}
    monkeypatch.setattr("a2c.cli.agents.load_one", lambda ref: AgentSpec.from_dict(agents[ref]))
    monkeypatch.setenv("FAKE_NPM_FAIL", "@example/bad")
    code = main(["agents", "install", "bad", "good", "--prefix", str(tmp_path / "p")])
    captured = capsys.readouterr()
    assert code == 1
    lines = captured.out.splitlines()
    assert lines[0] == "bad   failed     `npm install @example/bad@1.0.0` failed (exit 1)"
    assert lines[1].endswith("| npm error line 18 for @example/bad")
    assert any(line.strip().startswith("full log: ") for line in lines)
    assert any(line.startswith("good  installed  @example/good@1.0.0 on node ") for line in lines)
    assert "not installed: bad" in captured.err
    assert (tmp_path / "p" / "bin" / "good").exists()


def test_agents_install_dry_run_names_the_prefix_and_runs_nothing(tmp_path, fake_npm,
                                                                  monkeypatch, capsys):
    monkeypatch.setattr("a2c.cli.agents.load_one", lambda ref: AgentSpec.from_dict(fake_agent()))
    assert main(["agents", "install", "fake", "--dry-run", "--prefix", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"would run: npm install --prefix {tools_root(tmp_path)}/fake-" in out
    assert "-g" not in out.split()
    assert not fake_npm.exists()


def _wheel(folder: Path, name: str, version: str, command: str) -> Path:
    """A pure-Python wheel with one console script, built by hand (no build backend, offline)."""
    dist = f"{name}-{version}.dist-info"
    path = folder / f"{name}-{version}-py3-none-any.whl"
    files = {
        f"{name}/__init__.py": "def main():\n    print('ran " + command + "')\n",
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                         "Tag: py3-none-any\n",
        f"{dist}/entry_points.txt": f"[console_scripts]\n{command} = {name}:main\n",
    }
    record = "".join(f"{p},,\n" for p in files) + f"{dist}/RECORD,,\n"
    with zipfile.ZipFile(path, "w") as zf:
        for rel, text in files.items():
            zf.writestr(rel, text)
        zf.writestr(f"{dist}/RECORD", record)
    return path


def test_a_pip_scaffold_gets_a_venv_of_its_own_that_works_after_the_move(tmp_path,
                                                                         monkeypatch):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    _wheel(wheels, "fakeagent", "2.0.0", "fake-agent")
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    agent = {"id": "fakepip", "type": "cli", "launch": {"command": "fake-agent"},
             "install": {"pip": ["fakeagent==2.0.0"], "check": "fake-agent"}}
    prefix = tmp_path / "prefix"
    outcome = install_agent(agent, prefix)
    assert outcome.status == "installed", (outcome, outcome.error and outcome.error.tail)
    tool = scaffold_tools.tools_of(agent, prefix)[0]
    assert tool.manifest()["commands"] == ["fake-agent"]
    # staged elsewhere, renamed into place: the wrapper still runs the script
    out = subprocess.run([str(prefix / "bin" / "fake-agent")], capture_output=True, text=True)
    assert out.stdout.strip() == "ran fake-agent", out.stderr
    assert json.loads((tool.folder / "a2c-tool.json").read_text())["packages"] == \
        ["fakeagent==2.0.0"]
