"""Issue 23's leftovers in the local sandbox, attacked from inside real bubblewrap: no command
line and no environment the agent can read names a host path of the run directory, the venv or
the a2c cache (bubblewrap takes its options through `--args FD`; PATH and VIRTUAL_ENV name
/run/a2c/venv), user namespaces cannot be made inside (`unshare -Ur`, a nested
`bwrap --unshare-user`), and /tmp is the run's own folder, private to the agent.

What stays visible: /proc/self/mountinfo names the host source path of every bind (docs/
runtime.md, threat model)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from a2c.paths import cache_dir
from a2c.runtime.sandbox import SandboxSpec
from a2c.runtime.sandbox.local import LocalBackend, bwrap_works

pytestmark = pytest.mark.skipif(not bwrap_works(), reason="bubblewrap not usable here")
ROOT = os.geteuid() == 0

DUMP = r"""
for f in /proc/[0-9]*/cmdline /proc/[0-9]*/environ; do
  printf '== %s\n' "$f"; cat "$f" 2>/dev/null | tr '\0' '\n'
done
echo "== checks"
unshare -Ur true 2>/dev/null; echo "unshare-Ur=$?"
bwrap --unshare-user --ro-bind / / true 2>/dev/null; echo "nested-bwrap=$?"
python3 -c 'import os; os.unshare(os.CLONE_NEWUSER)' 2>/dev/null; echo "os.unshare=$?"
echo script > /tmp/job.sh && echo "tmp-write=$?"
echo "tmp-mode=$(stat -c %a /tmp)"
"""


def _spec(tmp_path: Path) -> SandboxSpec:
    run = tmp_path / "run"
    for name in ("workspace", "data", "model", "logs"):
        (run / name).mkdir(parents=True, exist_ok=True)
    sock = run / "grader.sock"
    sock.write_text("")
    return SandboxSpec(command=["sh", "-c", DUMP], workspace=run / "workspace",
                       data_dir=run / "data", model_dir=run / "model", socket_path=sock,
                       log_path=run / "logs" / "agent.log",
                       command_log=run / "logs" / "commands.log", env={"A2C_TASK_ID": "t"},
                       marker=f"hostpaths-{os.getpid()}", agent_tmp=run / "agent-tmp")


def test_no_host_path_in_any_cmdline_or_environ_and_no_user_namespace(tmp_path):
    spec = _spec(tmp_path)
    proc = LocalBackend().start(spec)
    assert proc.wait(60) == 0, spec.log_path.read_text()
    out = spec.log_path.read_text()
    dumped, _, checks = out.partition("== checks\n")
    assert "/proc/1/cmdline" in dumped and "/run/a2c/venv" in dumped   # it did read them
    for host in (str(tmp_path), str(Path(sys.prefix).resolve()), sys.prefix,
                 str(cache_dir().resolve())):
        assert host not in dumped, host
    results = dict(line.split("=", 1) for line in checks.splitlines() if "=" in line)
    assert results["unshare-Ur"] != "0" and results["nested-bwrap"] != "0", checks
    assert results["os.unshare"] != "0", checks
    # /tmp is RUN/agent-tmp: what the agent leaves there is on the host, for the recorder
    assert results["tmp-write"] == "0" and results["tmp-mode"] == "700", checks
    assert (spec.agent_tmp / "job.sh").read_text() == "script\n"
    if ROOT:
        from a2c.runtime.sandbox.privileges import agent_ids
        assert spec.agent_tmp.stat().st_uid == agent_ids().uid
        assert spec.agent_tmp.stat().st_mode & 0o777 == 0o700
