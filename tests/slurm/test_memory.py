"""Ray's memory sized from the Slurm allocation, not the host's RAM, on the
real local Slurm: a job with ``--mem`` and no ``memory_mb_per_node``."""

from __future__ import annotations

import pytest

from testbeds import slurmcluster
from testbeds.users import UserRun
from tests.slurm.conftest import HERE
from tests.support.slurm import assert_clean, collected_result

pytestmark = [pytest.mark.slurm]

MIB = 2**20


def test_ray_memory_and_object_store_fit_the_allocation(
    slurm_cluster: slurmcluster.LocalCluster, user_run: UserRun
) -> None:
    outcome = user_run.deploy(
        f'target = "slurm"\nnodes = 2\ncpus_per_node = 1\nrun = "python {HERE / "resources.py"}"\n'
        '[slurm]\npartition = "debug"\ntime = "00:05:00"\nextra_sbatch = ["--mem=1000M"]\n'
    )
    assert outcome["exit_code"] == 0, outcome["_stderr"][-3000:]
    nodes = collected_result(outcome)["nodes"]
    assert len(nodes) == 2  # type: ignore[arg-type]
    for res in nodes:  # type: ignore[union-attr]
        # Ray's own 30 % share for the store, inside the 1000 MiB, the heap the rest.
        assert res["object_store_memory"] == 300 * MIB, res
        assert res["memory"] == 700 * MIB, res
    assert_clean(slurm_cluster)
