"""The CPU shared between the iclab runs on one machine: each run takes an equal share of the cores.

Two runs that each use every core make their threads wait on each other (torch's threads spin while they
wait), so that both take far longer than one after the other (measured in docs/performance.md). A run
therefore registers itself while it runs (a file named by its process id in :data:`REGISTRY`), and takes
``cores // runs`` threads, never more than it started with; it looks again when it starts and at every
logging step (:meth:`CoreShare.rebalance`), so a run that started alone gives up its extra threads when
another starts, and takes them back when the other ends.
``ICLAB_SHARE_CORES=0`` turns this off.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import torch

REGISTRY = Path(tempfile.gettempdir()) / "iclab-runs"
"""The folder where every running iclab run on this machine has a file, named by its process id."""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True


def cores() -> int:
    """The CPU cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


class CoreShare:
    """A run's share of this machine's cores while it runs (a context manager): on entering, it registers
    the run and sets torch's threads to its share; on leaving, it unregisters and restores the threads.
    Off (a no-op) when ``ICLAB_SHARE_CORES=0``."""

    def __init__(self, registry: Path = REGISTRY):
        self.registry, self.cap = registry, torch.get_num_threads()
        self.file = registry / str(os.getpid())
        self.enabled = os.environ.get("ICLAB_SHARE_CORES", "1") != "0"

    def __enter__(self) -> CoreShare:
        if self.enabled:
            self.registry.mkdir(parents=True, exist_ok=True)
            self.file.touch()
            self.rebalance()
        return self

    def __exit__(self, *exc) -> None:
        if self.enabled:
            self.file.unlink(missing_ok=True)
            torch.set_num_threads(self.cap)

    def runs(self) -> int:
        """How many iclab runs are running on this machine, this one included (stale files are removed)."""
        live = 0
        for entry in self.registry.iterdir():
            if entry.name.isdigit() and _alive(int(entry.name)):
                live += 1
            else:
                entry.unlink(missing_ok=True)
        return max(live, 1)

    def rebalance(self) -> int:
        """Set torch's threads to this run's share, ``cores // runs`` (at least 1, at most the threads it
        started with), and return it."""
        if not self.enabled:
            return torch.get_num_threads()
        threads = max(1, min(self.cap, cores() // self.runs()))
        if threads != torch.get_num_threads():
            torch.set_num_threads(threads)
        return threads
