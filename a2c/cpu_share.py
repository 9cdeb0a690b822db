"""How many of this machine's cores are free for torch's intra-op threads right now.

torch's CPU kernels run on OpenMP threads that spin while they wait for each other; on cores
another process also wants, each spinning thread steals time from the rest of its own team. On
2 shared cores with two other busy processes, the arith evaluation of a trained SmolLM2 took
64 s wall (58 s CPU) with torch's default 2 threads and 42 s (26 s CPU) with one. The 1-minute
load average lags by a minute, so the decision reads what is runnable *now*: the kernel's count
of runnable tasks in /proc/loadavg (its 4th field, "running/total", the reader included), the
median of a few samples, minus the reader. The threads are the cores the others leave, at least
one; the load average still decides when it says the machine is overloaded (other work that is
bursty and happened to sleep during the samples).
"""

from __future__ import annotations

import os
import statistics
import time
from pathlib import Path

LOADAVG = Path("/proc/loadavg")
OVERLOAD_EXTRA = 2      # a 1-minute load average at cores + this: one thread, whatever the samples
SAMPLES = 5
SAMPLE_GAP_S = 0.02


def usable_cores() -> int:
    """The cores this process may run on (its affinity), else the machine's count."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def runnable_others(samples: int = SAMPLES, gap_s: float = SAMPLE_GAP_S) -> int | None:
    """Runnable tasks other than the reader, the median of `samples` reads of /proc/loadavg;
    None where the file is not there (not Linux) or does not read as the kernel writes it."""
    counts = []
    for i in range(max(1, samples)):
        try:
            running = LOADAVG.read_text().split()[3].split("/")[0]
            counts.append(max(0, int(running) - 1))
        except (OSError, IndexError, ValueError):
            return None
        if i + 1 < samples:
            time.sleep(gap_s)
    return int(statistics.median(counts))


def free_threads(cores: int | None = None) -> int:
    """Intra-op threads for CPU work starting now: the cores no other runnable task wants, at
    least 1, at most `cores`; 1 when the 1-minute load average says the CPU is overloaded."""
    cores = cores or usable_cores()
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):
        load = 0.0
    if cores > 1 and load >= cores + OVERLOAD_EXTRA:
        return 1
    others = runnable_others()
    if others is None:
        return cores
    return max(1, min(cores, cores - others))
