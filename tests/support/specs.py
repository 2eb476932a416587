"""A launch's spec as the Slurm target's tests build it: one default, each test changing
what it is about."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from syndeo.launcher.spec import ClusterSpec


def slurm_spec(**over: Any) -> ClusterSpec:
    """A 3-node Slurm spec running the benchmark; ``over`` replaces any field."""
    base: dict[str, Any] = dict(
        target="slurm",
        cluster_id="slurm-0123abcd",
        rendezvous="file:///shared/u/rdv",
        nodes=3,
        cpus=4,
        gpus=0,
        memory_mb=None,
        object_store_mb=None,
        join_timeout=120.0,
        run="python -m syndeo.bench run --env CartPole-v1",
        workdir=Path("/shared/u/work"),
        image=None,
        not_before=1795000000.0,
    )
    base.update(over)
    return ClusterSpec(**base)
