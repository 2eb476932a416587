"""A cluster that follows demand when Slurm refuses its nodes, on the real local Slurm
cluster: the partition set INACTIVE (sbatch refuses every job) while a placement group
waits for a second node.  The watcher backs off instead of submitting at every status."""

from __future__ import annotations

import subprocess
import time
import uuid
from collections.abc import Iterator

import pytest

from testbeds import slurmcluster
from testbeds.users import UserRun, give_to_ci_user
from tests.support.slurm import ci_jobs, user_syndeo, wait_for

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

REFUSED = "group cpu: could not follow demand"
UNMET_S = 120  # demand unmet this long ...
MOST_SUBMITS = 8  # ... costs at most this many sbatch calls

# Two one-CPU tasks on two nodes at once: the head's autoscaler asks for a `cpu` node.
SPREAD = """\
import ray
from ray.util.placement_group import placement_group
ray.init()
pg = placement_group([{"CPU": 1}] * 2, strategy="STRICT_SPREAD")
ray.get(pg.ready(), timeout=400)
"""


def _partition(cluster: slurmcluster.LocalCluster, state: str) -> None:
    subprocess.run(
        ["scontrol", "update", f"partitionname={cluster.partition}", f"state={state}"],
        check=True,
        env={"SLURM_CONF": str(cluster.conf), "PATH": "/usr/bin:/bin"},
    )


@pytest.fixture
def inactive_later(slurm_cluster: slurmcluster.LocalCluster) -> Iterator[None]:
    """The partition is brought back UP whatever the test did to it."""
    try:
        yield
    finally:
        _partition(slurm_cluster, "UP")


def test_refused_starts_back_off(
    slurm_cluster: slurmcluster.LocalCluster, user_run: UserRun, inactive_later: None
) -> None:
    cfg = user_run.config(
        'target = "slurm"\ncpus_per_node = 1\njoin_timeout_s = 120\n'
        '[slurm]\npartition = "debug"\ntime = "00:15:00"\n'
        '[[groups]]\nname = "cpu"\nmax_nodes = 1\n'
    )
    job = user_run.root / "job"
    job.mkdir()
    (job / "spread.py").write_text(SPREAD)
    give_to_ci_user(job)
    give_to_ci_user(job / "spread.py")
    cid = f"sdf-{uuid.uuid4().hex[:6]}"
    up = user_syndeo(user_run, "up", "--config", str(cfg), "--cluster-id", cid, timeout=400)
    log = user_run.home / "clusters" / cid / "watch.log"
    try:
        assert up.returncode == 0, up.stderr[-3000:]
        _partition(slurm_cluster, "INACTIVE")  # the head runs on; no new job is taken
        driver = user_syndeo(
            user_run,
            *("submit", "--cluster-id", cid, "--workdir", str(job), "--"),
            *("python", "spread.py"),
        )
        assert driver.returncode == 0, driver.stderr[-2000:]
        wait_for("a refused start", lambda: REFUSED in log.read_text(), 120)
        first = time.monotonic()
        time.sleep(UNMET_S)
        text = log.read_text()
        refused = [line for line in text.splitlines() if REFUSED in line]
        print(f"{len(refused)} sbatch refusals in {UNMET_S} s of unmet demand")
        assert 1 <= len(refused) <= MOST_SUBMITS, text[-4000:]
        # Classified: Slurm's "partition not available (inactive or drain)" may pass.
        after = text.split(REFUSED, 1)[1]
        assert after.startswith(" (quota)") and "next try in" in after, after[:400]
        assert "group cpu: started" not in after
        assert time.monotonic() - first >= UNMET_S
        # Back UP: the next try starts the node and the placement group is placed.
        _partition(slurm_cluster, "UP")
        wait_for("the node started", lambda: "group cpu: started" in log.read_text(), 300)
    finally:
        down = user_syndeo(user_run, "down", "--cluster-id", cid)
    assert down.returncode == 0, down.stderr[-2000:]
    assert ci_jobs() == {}
