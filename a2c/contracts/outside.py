"""The agent's folders outside its workspace that the code snapshots keep, and how the agent
names them: one home for the recorder (runtime/snapshots.py writes them) and the analysis
(analysis/executed.py reads them).

An agent can run code it wrote outside the workspace (`python /tmp/sft.py`, `bash ~/run.sh`) and
leave something else in the workspace. So each snapshot also keeps the text files of the agent's
/tmp (RUN/agent-tmp) and HOME (RUN/agent-home), under `OUTSIDE_PREFIX/<name>/` in the snapshot's
tree. The workspace walk never takes a top-level folder of that name, so a file under the prefix
always came from outside the workspace.
"""

from __future__ import annotations

from pathlib import Path

OUTSIDE_PREFIX = ".a2c-outside"
# name in the snapshot -> the folder's path as the agent sees it in a sandbox
AGENT_VIEW = {"tmp": "/tmp", "home": "/run/a2c/home"}


def outside_roots(paths) -> dict[str, Path]:
    """{name: host folder} of a run's outside folders (`paths`: a RunPaths); a folder that does
    not exist (yet: the sandbox makes them at start) is skipped by each snapshot."""
    roots = {"tmp": getattr(paths, "agent_tmp", None), "home": getattr(paths, "agent_home", None)}
    return {name: Path(p) for name, p in roots.items() if p is not None}


def snapshot_path(name: str, rel: str) -> str:
    """Where the file `rel` of outside folder `name` sits in a snapshot's tree."""
    return f"{OUTSIDE_PREFIX}/{name}/{rel}"
