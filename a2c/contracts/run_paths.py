"""`RunPaths`: every path of a run directory, named once (docs/contracts.md, "Run directory").

    runs/<run-id>/
      run.json, events.jsonl, submissions.jsonl, results/<n>.json, results/baseline.json,
      snapshots.git/
      workspace/   the agent's workspace (the only writable path inside the sandbox)
      data/        the agent split, read-only (train.jsonl + referenced files)
      agent/       the agent bundle's launch.sh and the rendered prompt.md (read-only inside)
      grader/      token, held-out data, service.json, grader.json, the socket, ready, eval/
                   (never visible to the agent)
      logs/        agent.log, commands.log, transcript.<ext>, grader.log
      bundle/      the task bundle the run used
      env-sockets/ the environment service proxies' sockets (at /run/a2c/env in the sandbox)
      agent-tmp/   the agent's /tmp (bound at /tmp in the sandbox)

Nothing else in the runtime spells these names: the run, the grader service and the baseline all
take their paths from here. Light on purpose (the grader service imports it).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from a2c.canonical import sha256_bytes
from a2c.contracts.run_info import RUN_JSON
from a2c.contracts.service_config import GRADER_JSON, SERVICE_JSON
from a2c.fsutil import private_dir

# The folders prepare creates before anything is copied in (bundle/ and agent/ are copies).
CREATED_DIRS = ("workspace", "grader", "logs", "results", "data")
SOCKET_LIMIT = 100       # a Unix socket path must stay under 108 bytes
ENV_SERVICE_SOCKET_LIMIT = 80   # room for "<service>.sock" below the folder


@dataclass(frozen=True)
class RunPaths:
    root: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(self.root))

    # ------------------------------------------------------------------ the record
    @property
    def run_json(self) -> Path:
        return self.root / RUN_JSON

    @property
    def events(self) -> Path:
        return self.root / "events.jsonl"

    @property
    def journal(self) -> Path:
        """submissions.jsonl, the grader's journal."""
        return self.root / "submissions.jsonl"

    @property
    def results(self) -> Path:
        return self.root / "results"

    def result(self, sid: int | str) -> Path:
        return self.results / f"{sid}.json"

    @property
    def baseline_result(self) -> Path:
        return self.result("baseline")

    def final_result(self, subject: int | str) -> Path:
        """results/final-<subject>.json: a submission's (or the baseline's) score on the final
        split, evaluated once at the end of the run."""
        return self.result(f"final-{subject}")

    @property
    def snapshots(self) -> Path:
        return self.root / "snapshots.git"

    # ------------------------------------------------------------------ the agent's side
    @property
    def workspace(self) -> Path:
        return self.root / "workspace"

    @property
    def output(self) -> Path:
        """workspace/output, where the agent saves models to submit."""
        return self.workspace / "output"

    @property
    def run_meta(self) -> Path:
        return self.workspace / "run_meta.json"

    @property
    def mode_md(self) -> Path:
        return self.workspace / "MODE.md"

    def workspace_mode(self, mode: str) -> Path:
        return self.workspace / "modes" / f"{mode}.md"

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def train(self) -> Path:
        return self.data / "train.jsonl"

    @property
    def agent(self) -> Path:
        return self.root / "agent"

    @property
    def agent_manifest(self) -> Path:
        return self.agent / "agent.json"

    @property
    def launch(self) -> Path:
        return self.agent / "launch.sh"

    @property
    def prompt(self) -> Path:
        """agent/prompt.md, the agent bundle's prompt template."""
        return self.agent / "prompt.md"

    @property
    def prompt_rendered(self) -> Path:
        return self.agent / "prompt.rendered.md"

    # ------------------------------------------------------------------ the grader's side
    @property
    def grader(self) -> Path:
        return self.root / "grader"

    @property
    def token(self) -> Path:
        return self.grader / "token"

    @property
    def heldout(self) -> Path:
        """The held-out items `/submit` scores (the feedback part when the task has a final split)."""
        return self.grader / "heldout.jsonl"

    @property
    def final_heldout(self) -> Path:
        """The final split: held-out items only the grader sees, scored once at the run's end."""
        return self.grader / "final.jsonl"

    @property
    def service_json(self) -> Path:
        return self.root / SERVICE_JSON

    @property
    def grader_json(self) -> Path:
        return self.root / GRADER_JSON

    @property
    def grader_effective(self) -> Path:
        return self.grader / "grader.effective.json"

    @property
    def service_pid(self) -> Path:
        return self.grader / "service.pid"

    @property
    def ready(self) -> Path:
        return self.grader / "ready"

    @property
    def eval_dir(self) -> Path:
        """grader/eval: one <n>.json and <n>.log per evaluation child."""
        return self.grader / "eval"

    @property
    def submissions(self) -> Path:
        """grader/submissions: the grader's own copy of every submitted model, `<n>/`, made at
        submit; what is hashed and evaluated (the agent cannot write there)."""
        return self.grader / "submissions"

    @property
    def socket(self) -> Path:
        """The grader's Unix socket: in grader/ when the path is short enough, else a short
        folder under the system's temporary directory (created, 0700)."""
        candidate = self.grader / "grader.sock"
        if len(str(candidate)) < SOCKET_LIMIT:
            return candidate
        short = self._short_dir("")
        # its name is predictable (a hash of the run's path): one another local user made
        # first, to take the grader's socket over, is refused (fsutil.private_dir, ours=True)
        private_dir(short, ours=True)
        return short / "grader.sock"

    @property
    def env_service_sockets(self) -> Path:
        """Where the environment service proxies' sockets live (RUN/env-sockets, or a short
        tmp dir)."""
        candidate = self.root / "env-sockets"
        if len(str(candidate)) < ENV_SERVICE_SOCKET_LIMIT:
            return candidate
        return self._short_dir("-env")

    def temp_socket_dirs(self) -> list[Path]:
        """The short folders under the system's temporary directory that the sockets above use
        when the run's own path is too long (nothing is created here): the run removes them
        when it ends, so long run paths do not leave one behind each."""
        dirs = []
        if len(str(self.grader / "grader.sock")) >= SOCKET_LIMIT:
            dirs.append(self._short_dir(""))
        if len(str(self.root / "env-sockets")) >= ENV_SERVICE_SOCKET_LIMIT:
            dirs.append(self._short_dir("-env"))
        return dirs

    def _short_dir(self, suffix: str) -> Path:
        """`/tmp/a2c-<12 hex of the run's path><suffix>`: short enough for any socket name."""
        short_id = sha256_bytes(str(self.root).encode())[:12]
        return Path(tempfile.gettempdir()) / f"a2c-{short_id}{suffix}"

    # ------------------------------------------------------------------ the driver gateway
    @property
    def driver(self) -> Path:
        """RUN/driver (0700): the driver gateway's own folder, never mounted in the sandbox:
        its config, the per-run gateway key, running totals and the call bodies."""
        return self.root / "driver"

    @property
    def driver_config(self) -> Path:
        """driver/gateway.json: upstream, model, wire formats, budget (no provider key)."""
        return self.driver / "gateway.json"

    @property
    def driver_key(self) -> Path:
        """driver/gateway.key (0600): the per-run key the agent presents to the gateway."""
        return self.driver / "gateway.key"

    @property
    def driver_totals(self) -> Path:
        """driver/totals.json: running totals (calls, tokens, cost), rewritten after each call."""
        return self.driver / "totals.json"

    @property
    def driver_blobs(self) -> Path:
        """driver/blobs/<sha256>: request and response bodies, content-addressed."""
        return self.driver / "blobs"

    @property
    def driver_pid(self) -> Path:
        return self.driver / "gateway.pid"

    @property
    def driver_ready(self) -> Path:
        return self.driver / "ready"

    @property
    def driver_socket(self) -> Path:
        """The gateway's Unix socket (bound at /run/a2c/driver.sock in the sandbox): in driver/
        when the path is short enough, else the grader's short tmp folder."""
        candidate = self.driver / "driver.sock"
        if len(str(candidate)) < SOCKET_LIMIT:
            return candidate
        return self.socket.parent / "driver.sock"

    @property
    def driver_log(self) -> Path:
        return self.logs / "driver-gateway.log"

    @property
    def scripted_driver_log(self) -> Path:
        """logs/scripted-driver.log: what the scripted driver served (turn, usage) per call."""
        return self.logs / "scripted-driver.log"

    @property
    def agent_home(self) -> Path:
        """RUN/agent-home: the scaffold's HOME (configuration, caches, native session logs),
        writable by the agent, bound at /run/a2c/home; outside the workspace snapshots."""
        return self.root / "agent-home"

    @property
    def agent_tmp(self) -> Path:
        """RUN/agent-tmp: the agent's /tmp (mode 0700, owned by the agent's uid), a host folder
        rather than a tmpfs so the recorder can keep scripts the agent ran from /tmp; outside
        the workspace snapshots."""
        return self.root / "agent-tmp"

    @property
    def trajectory(self) -> Path:
        """trajectory.json: the run's steps in one schema for every scaffold."""
        return self.root / "trajectory.json"

    # ------------------------------------------------------------------ logs
    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def agent_log(self) -> Path:
        return self.logs / "agent.log"

    @property
    def commands_log(self) -> Path:
        return self.logs / "commands.log"

    @property
    def grader_log(self) -> Path:
        return self.logs / "grader.log"

    def transcript(self, ext: str) -> Path:
        return self.logs / f"transcript.{ext}"

    # ------------------------------------------------------------------ the task bundle
    @property
    def bundle(self) -> Path:
        return self.root / "bundle"

    @property
    def bundle_manifest(self) -> Path:
        return self.bundle / "bundle.json"

    @property
    def bundle_workspace(self) -> Path:
        return self.bundle / "workspace"

    @property
    def bundle_run_meta(self) -> Path:
        """bundle/workspace/run_meta.json: the bundle's template of workspace/run_meta.json."""
        return self.bundle_workspace / "run_meta.json"

    @property
    def bundle_hooks(self) -> Path:
        return self.bundle / "hooks"

    @property
    def bash_logging_hook(self) -> Path:
        return self.bundle_hooks / "bash_logging.sh"


def env_service_socket_dir(run_dir: str | Path) -> Path:
    """RunPaths(run_dir).env_service_sockets, for callers holding only the folder."""
    return RunPaths(Path(run_dir)).env_service_sockets
