"""A site that tracks memory (``CR_Core_Memory``, ``DefMemPerCPU``), on the real local
Slurm cluster: a node the watcher job grows is a clean job of its own, not one that
inherits the watcher job's ``SLURM_*`` (its ``SLURM_MEM_PER_NODE`` beside the new job's
``SLURM_MEM_PER_CPU`` made the node's ``srun`` refuse to start: "mutually exclusive")."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from testbeds import slurmcluster
from testbeds.users import UserRun
from tests.slurm.conftest import local_slurm
from tests.support.slurm import ci_jobs, program_dir, user_syndeo, wait_for

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

MEM_PER_CPU_MB = 1000

# Two one-CPU tasks on two nodes at once: the head's autoscaler asks for a node of the
# `cpu` group, which the watcher job submits.
SPREAD = """\
import ray
from ray.util.placement_group import placement_group
ray.init()
pg = placement_group([{"CPU": 1}] * 2, strategy="STRICT_SPREAD")
ray.get(pg.ready(), timeout=150)
print("nodes", len([n for n in ray.nodes() if n["Alive"]]), flush=True)
"""


@pytest.fixture(scope="module")
def slurm_cluster() -> Iterator[slurmcluster.LocalCluster]:
    """This module's cluster (``user_run`` takes it): memory tracked."""
    with local_slurm(mem_per_cpu_mb=MEM_PER_CPU_MB) as cluster:
        yield cluster


def test_a_watcher_job_grows_a_node_on_a_site_that_tracks_memory(
    slurm_cluster: slurmcluster.LocalCluster, user_run: UserRun
) -> None:
    assert "CR_Core_Memory" in slurm_cluster.conf.read_text()
    cfg = user_run.config(
        'target = "slurm"\ncpus_per_node = 1\njoin_timeout_s = 120\n'
        '[slurm]\npartition = "debug"\ntime = "00:10:00"\nwatcher = "job"\n'
        '[[groups]]\nname = "cpu"\nmax_nodes = 1\n'
    )
    job = program_dir(user_run, "spread.py", SPREAD)
    cid = f"smt-{uuid.uuid4().hex[:6]}"
    up = user_syndeo(user_run, "up", "--config", str(cfg), "--cluster-id", cid, timeout=400)
    state = user_run.home / "clusters" / cid
    try:
        assert up.returncode == 0, up.stderr[-3000:]
        wait_for("the watcher job polls", lambda: (state / "watch.alive").exists(), 120)
        done = user_syndeo(
            user_run,
            *("submit", "--cluster-id", cid, "--workdir", str(job)),
            *("--follow", "--", "python", "spread.py"),
            timeout=400,
        )
        assert done.returncode == 0 and "nodes 2" in done.stdout, (
            done.stdout[-2000:] + done.stderr[-2000:] + (state / "watch.log").read_text()
        )
        log = state / "watch.log"
        wait_for("the start logged", lambda: "group cpu: started" in log.read_text(), 60)
    finally:
        down = user_syndeo(user_run, "down", "--cluster-id", cid)
    assert down.returncode == 0, down.stderr[-2000:]
    assert ci_jobs() == {}
