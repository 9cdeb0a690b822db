"""The agent's view of a2c is an allow-list (issue 26, point 4): what the agents' entry modules
import inside a2c (runtime/sandbox/view.py), and nothing else exists inside the sandbox.

The import closure is checked here by other means than the view's own (the standard library's
modulefinder over the staged tree, which reads the compiled code and executes nothing), so an
import the view's reading missed fails here, and so does a `python -m a2c....` in a launcher
that the allow-list does not start from."""

from __future__ import annotations

import json
import modulefinder
import re
import sys
import types
from pathlib import Path

import pytest

from a2c.runtime.sandbox import SandboxSpec, get_backend, view
from a2c.runtime.sandbox.import_closure import ClosureError, closure, expand, imports_of
from a2c.runtime.sandbox.local import bwrap_works

ROOT = Path(__file__).resolve().parents[3]
HAVE_BWRAP = bwrap_works()
# Modules that load others by a computed name, and where those others are declared.
COMPUTED_IMPORTS = {
    "a2c.runtime.envs.registry": "every environment kind: `a2c.runtime.envs.*.kind` is an entry",
    "a2c.runtime.envs.deepsearchqa": "lazy re-exports of its own modules, all imported by kind",
    "a2c.runtime.sandbox.spec": "the sandbox backends: the runtime's side, never an agent's",
}


def launcher_entries() -> set[str]:
    """Every `python -m a2c....` of the agent bundles' launchers and manifests."""
    found = set()
    for path in [*ROOT.glob("generated/agents/*/launch.sh"),
                 *ROOT.glob("generated/agents/*/agent.json")]:
        found |= set(re.findall(r"python3? -m (a2c[\w.]*\w)", path.read_text()))
    return found


def test_every_launcher_entry_is_an_entry_of_the_allow_list():
    entries = {n for p in view.AGENT_ENTRY_MODULES for n in expand(p, view.package_roots())}
    found = launcher_entries()
    assert {"a2c.agents.reference.sft", "a2c.runtime.sandbox.loopback_forwarder"} <= found
    assert found <= entries, f"add to view.AGENT_ENTRY_MODULES: {sorted(found - entries)}"


def _scan(staged: Path, names: list[str]) -> modulefinder.ModuleFinder:
    """modulefinder over the staged tree alone: an a2c import it cannot find there is one the
    view leaves out (the rest of the world, torch and the standard library, is not looked at)."""
    finder = modulefinder.ModuleFinder(path=[str(staged)])
    for name in names:
        finder.import_hook(name)
    return finder


def test_what_the_agents_import_is_in_the_staged_view(tmp_path):
    staged = view.stage(tmp_path / "agent-lib")
    entries = sorted(launcher_entries() | {n for p in view.AGENT_ENTRY_MODULES
                                           for n in expand(p, {"a2c": staged / "a2c"})})
    finder = _scan(staged, entries)
    missing, maybe = finder.any_missing_maybe()
    ours = [m for m in missing + maybe if m == "a2c" or m.startswith("a2c.")]
    assert not ours, {m: sorted(finder.badmodules.get(m, {})) for m in ours}
    assert set(finder.modules) >= {"a2c.agents.reference.sft", "a2c.agents.reference.l3_rl",
                                   "a2c.runtime.grader_service.client"}
    # the bundles' workspace scripts (level 3's rollout example) import only what is staged
    for script in ROOT.glob("generated/*/workspace/**/*.py"):
        imported, _ = imports_of("script", script, False, "a2c")
        for module, _names in imported:
            assert _scan(staged, [module]).modules, (script, module)


def test_modules_loaded_by_a_computed_name_are_declared():
    assert set(view.agent_closure().dynamic) <= set(COMPUTED_IMPORTS), \
        "a module of the agents' view imports by a computed name: declare where its targets are"


def test_the_view_leaves_out_the_grader_the_gateway_and_the_orchestration(tmp_path):
    staged = view.stage(tmp_path / "agent-lib")
    files = {p.relative_to(staged).as_posix() for p in staged.rglob("*") if p.is_file()}
    assert "a2c/agents/reference/sft.py" in files and "a2c/runtime/grader_service/client.py" in files
    for gone in ("a2c/runtime/driver_gateway/", "a2c/agents/scripted_driver/", "a2c/runtime/run/",
                 "a2c/runtime/graders/humaneval.py", "a2c/runtime/graders/code_exec.py",
                 "a2c/runtime/graders/registry.py", "a2c/runtime/grader_service/launcher.py",
                 "a2c/runtime/graders/exact_match.py", "a2c/runtime/envs/rollout_grader.py",
                 "a2c/runtime/env_services/process.py", "a2c/compiler/", "a2c/specs/", "a2c/cli/",
                 "a2c/analysis/", "a2c/templates/", "a2c/runtime/sandbox/local.py"):
        assert not any(f.startswith(gone) for f in files), gone
    assert not any(f.endswith((".yaml", ".json")) for f in files)   # prices.yaml among them
    for shell in view.SHELL_PACKAGES:   # their API (the service, the registry) stays out
        assert (staged.joinpath(*shell.split(".")) / "__init__.py").read_text() == ""


def test_closure_reads_every_import_and_keeps_out_what_nobody_imports(tmp_path):
    pkg = tmp_path / "a2c"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "shell").mkdir()
    for rel, text in {"__init__.py": "", "entry.py": "from . import helper\n"
                      "def later():\n    from a2c.sub import lazy\n",
                      "helper.py": "import a2c.sub.deep\nfrom a2c.shell import inner\n",
                      "fresh.py": "", "sub/__init__.py": "", "sub/lazy.py": "",
                      "sub/deep.py": "import importlib\nimportlib.import_module(f'a2c.{1}')\n",
                      "shell/__init__.py": "import a2c.fresh\n", "shell/inner.py": ""}.items():
        (pkg / rel).write_text(text)
    found = closure(["a2c.entry"], {"a2c": pkg}, shells=("a2c.shell",))
    assert set(found.files) == {"a2c", "a2c.entry", "a2c.helper", "a2c.sub", "a2c.sub.lazy",
                                "a2c.sub.deep", "a2c.shell", "a2c.shell.inner"}
    assert found.shells == {"a2c.shell"} and found.dynamic == {"a2c.sub.deep": [2]}
    (pkg / "helper.py").write_text("from a2c.shell import api_name\n")
    with pytest.raises(ClosureError, match="api_name"):
        closure(["a2c.entry"], {"a2c": pkg}, shells=("a2c.shell",))


def _fresh_runtime(tmp_path: Path, monkeypatch) -> tuple[Path, str]:
    """a2c.runtime as the view reads it, with one module added that no agent imports: a folder
    of links to the real one's entries, named by the editable hook the view follows."""
    real = sorted(view.package_dirs("a2c.runtime"))[0]
    folder = tmp_path / "runtime"
    folder.mkdir()
    for entry in real.iterdir():
        (folder / entry.name).symlink_to(entry)
    name = "fresh_module_nobody_imports"
    (folder / f"{name}.py").write_text("SECRET = 1\n")
    hook = types.ModuleType("_a2c_editable")
    hook.MAPPING = {**view._editable_mapping(), "a2c.runtime": str(folder)}
    monkeypatch.setitem(sys.modules, "_a2c_editable", hook)
    return folder, name


PROBE = r"""
import importlib, json, os, sys
paths, modules = json.loads(sys.argv[1]), json.loads(sys.argv[2])
report = {"exists": {p: os.path.exists(p) for p in paths}, "imports": {}}
for name in modules:
    try:
        module = importlib.import_module(name)
        report["imports"][name] = "ok" if getattr(module, "__file__", None) else "no file"
    except Exception as exc:
        report["imports"][name] = type(exc).__name__
open("/workspace/view.json", "w").write(json.dumps(report))
"""


@pytest.mark.skipif(not HAVE_BWRAP, reason="bubblewrap not available")
def test_inside_the_sandbox_the_agents_run_and_the_rest_is_absent(tmp_path, monkeypatch):
    runtime, fresh = _fresh_runtime(tmp_path, monkeypatch)
    a2c_dir = sorted(view.package_dirs("a2c"))[0]
    absent = [runtime / f"{fresh}.py", runtime / "driver_gateway",
              runtime / "driver_gateway" / "prices.yaml",
              runtime / "graders" / "humaneval.py", runtime / "graders" / "registry.py",
              runtime / "grader_service" / "launcher.py", runtime / "env_services" / "process.py",
              runtime / "run", a2c_dir / "cli"]
    absent += [folder for name in ("a2c.compiler", "a2c.specs", "a2c.analysis", "a2c.templates",
                                   "a2c.runtime.driver_gateway", "a2c.agents.scripted_driver")
               for folder in view.package_dirs(name)]
    present = [sorted(view.package_dirs("a2c.agents.reference"))[0] / "sft.py",
               runtime / "grader_service" / "client.py"]
    entries = sorted(launcher_entries()) + ["a2c.runtime.grader_service.client"]
    hidden = [f"a2c.runtime.{fresh}", "a2c.runtime.driver_gateway", "a2c.agents.scripted_driver",
              "a2c.runtime.graders.humaneval", "a2c.runtime.run", "a2c.compiler.resolve"]
    run = tmp_path / "run"
    for name in ("workspace", "data", "model", "grader", "logs"):
        (run / name).mkdir(parents=True)
    (run / "grader" / "grader.sock").write_text("")
    (run / "workspace" / "probe.py").write_text(PROBE)
    spec = SandboxSpec(command=[sys.executable, "/workspace/probe.py",
                                json.dumps([str(p) for p in absent + present]),
                                json.dumps(entries + hidden)],
                       workspace=run / "workspace", data_dir=run / "data",
                       model_dir=run / "model", socket_path=run / "grader" / "grader.sock",
                       log_path=run / "logs" / "agent.log",
                       command_log=run / "logs" / "commands.log", marker="view-probe")
    proc = get_backend("local").start(spec)
    assert proc.wait(120) == 0, spec.log_path.read_text()
    proc.close()
    report = json.loads((run / "workspace" / "view.json").read_text())
    assert {p for p, there in report["exists"].items() if there} == {str(p) for p in present}
    assert {m: report["imports"][m] for m in entries} == dict.fromkeys(entries, "ok")
    assert not [m for m in hidden if report["imports"][m] == "ok"], report["imports"]
