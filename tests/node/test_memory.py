"""The node's memory budget for Ray: the allocation's, the store inside it.

The real Slurm path is tests/slurm/test_memory.py; these are the rules, on files in a
temp dir standing for the cgroup's limit."""

from __future__ import annotations

from pathlib import Path

from syndeo.node.memory import budget

HOST_MB = 64000


def test_the_store_is_inside_the_allocation() -> None:
    b = budget(None, None, {"SLURM_MEM_PER_NODE": "1000"}, HOST_MB, shm_mb=None, cgroups=())
    assert b is not None and (b.memory_mb, b.object_store_mb) == (700, 300)
    assert b.source == "SLURM_MEM_PER_NODE"


def test_the_configured_memory_wins_and_a_set_store_is_kept() -> None:
    env = {"SLURM_MEM_PER_NODE": "1000"}
    b = budget(4000, 1000, env, HOST_MB, shm_mb=None, cgroups=())
    assert b is not None and (b.memory_mb, b.object_store_mb) == (3000, 1000)


def test_the_cgroup_limit_when_slurm_says_nothing(tmp_path: Path) -> None:
    v2, v1 = tmp_path / "memory.max", tmp_path / "memory.limit_in_bytes"
    v2.write_text("max\n")  # no limit in v2
    v1.write_text(f"{2000 * 2**20}\n")
    b = budget(None, None, {}, HOST_MB, shm_mb=None, cgroups=(v2, v1))
    assert b is not None and b.memory_mb + b.object_store_mb == 2000
    assert b.source == "the cgroup's memory limit"
    v1.write_text(f"{2**63 - 4096}\n")  # v1's "no limit": more than the host has
    assert budget(None, None, {}, HOST_MB, shm_mb=None, cgroups=(v2, v1)) is None


def test_the_store_fits_dev_shm() -> None:
    b = budget(10000, None, {}, HOST_MB, shm_mb=1000, cgroups=())
    assert b is not None and b.object_store_mb == 800 and b.memory_mb == 9200
