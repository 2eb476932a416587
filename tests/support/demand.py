"""Pieces of the local tests of clusters that follow demand when nodes fail."""

from __future__ import annotations

import contextlib
import signal

import psutil

# Two one-CPU bundles on two nodes, on a head of one CPU: Ray asks for one more node.
SPREAD = """\
import ray
from ray.util.placement_group import placement_group
ray.init()
pg = placement_group([{"CPU": 1}] * 2, strategy="STRICT_SPREAD")
ray.get(pg.ready(), timeout=240)
print("placed", flush=True)
"""


def kill_tree(pid: int, ctime: float) -> None:
    """End the node process ``pid`` (only if it is still the one started then) and all
    its children at once, as a crash would."""
    with contextlib.suppress(psutil.NoSuchProcess):
        node = psutil.Process(pid)
        if abs(node.create_time() - ctime) >= 0.01:
            return
        for p in [*node.children(recursive=True), node]:
            with contextlib.suppress(psutil.NoSuchProcess):
                p.send_signal(signal.SIGKILL)
