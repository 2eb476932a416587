"""Where bring-up time goes: named moments in one node's life, in wall-clock seconds.

Every node keeps a :class:`Timeline` (its own marks plus Ray's phases read from
Ray's logs) and leaves it in the rendezvous (``timeline/rank-N``); ``deploy``
collects them with the launcher's own marks into ``results/<id>/timeline.json``
and ``invoke bench-bringup`` turns them into per-phase figures.  Wall-clock time
because the moments come from different processes (and, on a cluster, machines
whose clocks NTP keeps within milliseconds of each other).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import time
from datetime import datetime
from pathlib import Path
from typing import Any

# The phases each node records, and the orders they must happen in (chains: a
# phase may run in parallel with one of another chain -- the head publishes its
# address while its raylet starts).  tests check every recorded timeline with
# :func:`problems`; ``bench-bringup`` reports on them.
HEAD_PHASES = (
    "process_start",
    "main",
    "rendezvous_ok",
    "ray_start",
    "ray_gcs_process",
    "ray_gcs_listening",
    "gcs_reachable",
    "published",
    "ray_raylet_process",
    "ray_raylet_started",
    "ray_started",
    "driver_connected",
    "all_joined",
)
WORKER_PHASES = (
    "process_start",
    "main",
    "rendezvous_ok",
    "head_seen",
    "ray_start",
    "ray_raylet_process",
    "ray_raylet_started",
    "ray_started",
    "registered",
)
HEAD_CHAINS = (
    (
        "process_start",
        "main",
        "rendezvous_ok",
        "ray_start",
        "ray_gcs_process",
        "gcs_reachable",
        "published",
        "driver_connected",
        "all_joined",
    ),
    (
        "ray_start",
        "ray_gcs_listening",
        "ray_raylet_process",
        "ray_raylet_started",
        "driver_connected",
    ),
    # `ray start` reports started once the node is in the GCS; the raylet logs "Raylet
    # of id" after its registration returns.  Either may come first (16 ms on a busy CI
    # machine), so both are checked only against the raylet's process start.
    ("ray_raylet_process", "ray_started"),
)
WORKER_CHAINS = (
    tuple(p for p in WORKER_PHASES if p != "ray_raylet_started"),
    ("ray_raylet_process", "ray_raylet_started"),
)
# The head counts a worker once its raylet registers; `ray start` on the worker says
# so a moment later.  A run that ends within that moment stops the worker first.
OPTIONAL = frozenset({"ray_started", "registered"})
# Marks are rounded to 1 ms and Ray's log stamps truncated to 1 ms.
SLACK_S = 0.002

# Ray's C++ logs start with "[2026-11-22 23:57:11,305 I pid tid]"; its Python ones
# with "2026-11-22 23:57:11,265\tINFO".  Both are local time.
_STAMP = re.compile(r"^\[?(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3})")
# What marks each of Ray's phases in its own logs (file below the session's logs/).
_RAY_MARKS = {
    "ray_gcs_process": ("gcs_server.out", None),
    "ray_gcs_listening": ("gcs_server.out", "GcsServer server started"),
    "ray_raylet_process": ("raylet.out", None),
    "ray_raylet_started": ("raylet.out", "Raylet of id"),
}
RAY_STARTED_LINE = "Ray runtime started"


def _stamp(line: str) -> float | None:
    m = _STAMP.match(line)
    if m is None:
        return None
    dt = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S")
    return dt.timestamp() + int(m.group(2)) / 1000


def first_stamp(path: Path, needle: str | None = None) -> float | None:
    """The time of the first line of ``path`` containing ``needle`` (any line if None)."""
    with contextlib.suppress(OSError), path.open(errors="replace") as f:
        for line in f:
            if needle is None or needle in line:
                t = _stamp(line)
                if t is not None:
                    return t
    return None


def ray_phases(temp_dir: Path, ray_log: Path) -> dict[str, float]:
    """Ray's own start-up phases on this node, from the logs of its current session."""
    logs = temp_dir / "session_latest" / "logs"
    out = {}
    for name, (file, needle) in _RAY_MARKS.items():
        t = first_stamp(logs / file, needle)
        if t is not None:
            out[name] = t
    t = first_stamp(ray_log, RAY_STARTED_LINE)
    if t is not None:
        out["ray_started"] = t
    return out


def process_start() -> float | None:
    """When this process started, in wall-clock seconds, to the kernel's 10 ms tick.

    (psutil's create_time adds the boot time /proc/stat gives in whole seconds: up
    to a second off, as much as a phase we want to see.)
    """
    try:
        ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None
    age = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
    return time.time() - age


class Timeline:
    """Marks of one process; the first mark of a name wins (a retry does not move it)."""

    def __init__(self) -> None:
        self.marks: dict[str, float] = {}
        started = process_start()
        if started is not None:
            self.marks["process_start"] = started

    def mark(self, name: str, at: float | None = None) -> None:
        self.marks.setdefault(name, time.time() if at is None else at)

    def update(self, marks: dict[str, float]) -> None:
        for name, at in marks.items():
            self.mark(name, at)

    def as_dict(self) -> dict[str, float]:
        return {k: round(v, 3) for k, v in sorted(self.marks.items(), key=lambda kv: kv[1])}


def problems(doc: dict[str, Any], nodes: int) -> list[str]:
    """What is missing or out of order in a collected ``timeline.json`` (empty: none)."""
    out: list[str] = []
    marks = {int(r): m for r, m in doc.get("nodes", {}).items()}
    for rank in range(nodes):
        m = marks.get(rank)
        if m is None:
            out.append(f"rank {rank}: no timeline")
            continue
        phases, chains = (HEAD_PHASES, HEAD_CHAINS) if rank == 0 else (WORKER_PHASES, WORKER_CHAINS)
        out += [
            f"rank {rank}: no {p}" for p in phases if p not in m and not (rank and p in OPTIONAL)
        ]
        for chain in chains:
            seen = [p for p in chain if p in m]
            for a, b in itertools.pairwise(seen):
                if m[b] < m[a] - SLACK_S:
                    out.append(f"rank {rank}: {b} ({m[b]:.3f}) before {a} ({m[a]:.3f})")
    head = marks.get(0, {})
    # "published" is marked once the store has answered the write; a worker polling the
    # store may read the record before that answer reaches the head (a busy machine,
    # an emulated S3). What no worker can do is see it before the write began.
    write_began = head.get("gcs_reachable", head.get("published"))
    for rank, m in marks.items():
        if rank and write_began is not None and m.get("head_seen", write_began) < write_began:
            out.append(f"rank {rank}: saw the head before it was published")
        if rank and "all_joined" in head and m.get("ray_raylet_process", 0) > head["all_joined"]:
            out.append(f"rank {rank}: its raylet began after the head saw all nodes joined")
    start = doc.get("launcher", {}).get("launch_start")
    if start is not None:
        late = [r for r, m in marks.items() if m.get("process_start", start) < start - 0.02]
        out += [f"rank {r}: started before the launch" for r in late]
    return out
