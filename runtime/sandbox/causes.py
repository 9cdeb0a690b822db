"""Why an agent ended, named by what happened, in the same words for both backends.

    out of memory            only when the kernel's OOM killer acted: the cgroup's `oom_kill`
                             counter rose (memory.events, v1 memory.oom_control), or docker's
                             OOMKilled / `oom` event
    process limit reached    the pids limit refused a fork or a thread (pids.events `max` rose);
                             the agent then ended on its own, often with a "fork: Resource
                             temporarily unavailable" that is not a memory shortage
    disk budget exceeded     the runtime's disk watcher stopped it (disk.py)
    killed by signal N       otherwise, when its exit status says a signal ended it
                             (a negative return code, or 128 + N as shells, bubblewrap's init
                             and docker report it)

The deadline is the runner's to name (`agent_exit.reason: deadline`), as is any stop of its own.
When both counters rose, a SIGKILL is the OOM killer's and any other end is the fork's.
"""

from __future__ import annotations

SIGRTMAX = 64


def signal_of(returncode: int | None) -> int | None:
    """The signal an exit status reports, or None."""
    if returncode is None:
        return None
    if returncode < 0:
        return -returncode
    if 128 < returncode <= 128 + SIGRTMAX:
        return returncode - 128
    return None


def out_of_memory(limit: str | int | None, who: str = "the agent") -> str:
    """Docker's words, and the local backend's (`who`: "the agent" or "the container")."""
    if who == "the container":
        return (f"out of memory: the container reached its memory limit ({limit}) and the "
                "kernel killed the agent" if limit else "out of memory: the kernel killed the agent")
    return (f"out of memory: the agent reached its memory limit ({limit}) and the kernel killed it"
            if limit else "out of memory: the kernel killed the agent")


def process_limit(limit: str | int | None, refusals: int) -> str:
    times = f"{refusals} time{'s' if refusals != 1 else ''}"
    return ("process limit reached: the agent's processes and threads hit its pids limit"
            + (f" ({limit})" if limit else "") + f" and a fork was refused ({times})")


def name(returncode: int | None, *, oom_kills: int = 0, pid_refusals: int = 0,
         mem_limit: str | int | None = None, pids_limit: str | int | None = None,
         who: str = "the agent", oom_exact: bool = True) -> str | None:
    """The cause of an end with `returncode` (None: not known yet) given what the kernel counted
    during the run; None when the exit status says it all (an exit of the agent's own).
    `oom_exact` False: the OOM count is only a failed charge (kernels before 4.13), believed for
    a SIGKILL alone."""
    sig = signal_of(returncode)
    if oom_kills and not oom_exact and returncode is not None and sig != 9:
        oom_kills = 0
    if oom_kills and (sig == 9 or returncode is None or not pid_refusals):
        return out_of_memory(mem_limit, who)
    if pid_refusals:
        return process_limit(pids_limit, pid_refusals)
    if sig:
        return f"killed by signal {sig}"
    return None
