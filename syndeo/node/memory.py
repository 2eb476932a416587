"""How much memory a node gives Ray: the allocation's, never the host's.

Ray sizes its heap (``--memory``) and object store from the machine's RAM.  Under a
scheduler the node owns only part of it (Slurm's ``--mem``: the job's cgroup), and a
Ray that counts the rest gets the job killed by the cgroup's OOM killer.  So the budget
is, first found: the configured ``memory_mb``, the job's allocation as Slurm states it
(``SLURM_MEM_PER_NODE``, MiB), the cgroup's limit.  The object store lives inside it
(``object_store_mb``, or Ray's own share, 30 %), the heap is the rest; and the store
must fit the ``/dev/shm`` it lives in (a fresh tmpfs in Apptainer's ``--containall``).
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

MIB = 2**20
# Ray's default share of memory for the object store (ray_constants
# DEFAULT_OBJECT_STORE_MEMORY_PROPORTION) and its smallest store (75 MiB; ours 80).
STORE_SHARE = 0.3
MIN_STORE_MB = 80
# Leave tmpfs room for what else lands in /dev/shm (Python's multiprocessing, NCCL).
SHM_USE = 0.8
CGROUP_LIMITS = (
    Path("/sys/fs/cgroup/memory.max"),  # cgroup v2
    Path("/sys/fs/cgroup/memory/memory.limit_in_bytes"),  # cgroup v1
)


@dataclass(frozen=True)
class Budget:
    memory_mb: int  # Ray's heap (--memory)
    object_store_mb: int  # --object-store-memory
    source: str  # where the total came from (for the node's log)


def _cgroup_limit_mb(paths: tuple[Path, ...], host_mb: int) -> int | None:
    for p in paths:
        with contextlib.suppress(OSError, ValueError):
            raw = p.read_text().strip()
            if raw != "max" and int(raw) // MIB < host_mb:  # v1's "no limit" is huge
                return int(raw) // MIB
    return None


def total_mb(
    memory_mb: int | None,
    env: dict[str, str],
    host_mb: int,
    cgroups: tuple[Path, ...] = CGROUP_LIMITS,
) -> tuple[int, str] | None:
    """The node's whole budget in MiB and where it came from; None: the host's (Ray's)."""
    if memory_mb:
        return memory_mb, "memory_mb_per_node"
    slurm = env.get("SLURM_MEM_PER_NODE", "")
    if slurm.isdigit() and int(slurm) > 0:
        return int(slurm), "SLURM_MEM_PER_NODE"
    limit = _cgroup_limit_mb(cgroups, host_mb)
    return (limit, "the cgroup's memory limit") if limit is not None else None


def shm_free_mb(path: str = "/dev/shm") -> int | None:
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize // MIB


def budget(
    memory_mb: int | None,
    object_store_mb: int | None,
    env: dict[str, str],
    host_mb: int,
    shm_mb: int | None,
    cgroups: tuple[Path, ...] = CGROUP_LIMITS,
) -> Budget | None:
    """Heap and object store inside the node's budget (None: no budget, Ray decides;
    a configured ``object_store_mb`` still applies then)."""
    found = total_mb(memory_mb, env, host_mb, cgroups)
    if found is None:
        return None
    total, source = found
    store = object_store_mb or max(MIN_STORE_MB, int(total * STORE_SHARE))
    if shm_mb is not None:
        store = min(store, max(MIN_STORE_MB, int(shm_mb * SHM_USE)))
    store = min(store, total // 2)  # the store never crowds out the heap
    return Budget(memory_mb=total - store, object_store_mb=store, source=source)
