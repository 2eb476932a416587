"""A cluster that follows demand when things go wrong, on the real local Slurm cluster,
while a placement group waits for a second node: the partition set INACTIVE (sbatch
refuses every job: the watcher backs off instead of submitting at every status), set
DOWN after a node job was submitted (the job waits in the queue past its group's clock:
the watcher cancels it and tries again later), and a node job cancelled from outside
before its node joined (the watcher sees it gone and starts another)."""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from syndeo.launcher.autoscale import QUOTA_S
from testbeds import slurmcluster
from testbeds.users import UserRun
from tests.support.slurm import ci_jobs, program_dir, user_syndeo, wait_for

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

REFUSED = "group cpu: could not follow demand"
# Demand unmet this long costs at most this many sbatch calls: shorter than the first
# wait after a quota refusal (QUOTA_S less its jitter: 45-60 s), where a watcher that
# did not back off would submit at each of its polls (every 1-5 s).
UNMET_S = 0.75 * QUOTA_S - 5
MOST_SUBMITS = 2

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
    job = program_dir(user_run, "spread.py", SPREAD)
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


GIVEN_UP = "group cpu: rank 1 given up after in the queue for"
CANCELLED = "group cpu: rank 2 ended before it joined: Slurm job"


def _said(log: Path) -> str:
    """watch.log with its lines' wrapping undone (one space between words)."""
    return " ".join(log.read_text().split())


def _node_job(launched: Path, rank: int) -> str:
    """The Slurm job the watcher submitted for ``rank`` (launched.json, as it saved it)."""
    for entry in json.loads(launched.read_text())["part"]["groups"]:
        if int(entry["rank_base"]) == rank:
            return str(entry["job_id"])
    return ""


def test_a_node_that_never_joins_is_given_up_and_started_again(
    slurm_cluster: slurmcluster.LocalCluster, user_run: UserRun, inactive_later: None
) -> None:
    cfg = user_run.config(
        'target = "slurm"\ncpus_per_node = 1\njoin_timeout_s = 120\n'
        '[slurm]\npartition = "debug"\ntime = "00:15:00"\n'
        '[[groups]]\nname = "cpu"\nmax_nodes = 1\nqueue_timeout_s = "15s"\n'
    )
    job = program_dir(user_run, "spread.py", SPREAD)
    cid = f"snj-{uuid.uuid4().hex[:6]}"
    up = user_syndeo(user_run, "up", "--config", str(cfg), "--cluster-id", cid, timeout=400)
    here = user_run.home / "clusters" / cid
    log = here / "watch.log"
    try:
        assert up.returncode == 0, up.stderr[-3000:]
        _partition(slurm_cluster, "DOWN")  # jobs are taken, and wait: nothing runs them
        driver = user_syndeo(
            user_run,
            *("submit", "--cluster-id", cid, "--workdir", str(job), "--"),
            *("python", "spread.py"),
        )
        assert driver.returncode == 0, driver.stderr[-2000:]
        # Rank 1's job waits in the queue past the group's 15 s: cancelled, said, backed off.
        wait_for("the queued node given up", lambda: GIVEN_UP in _said(log), 120)
        first = _node_job(here / "launched.json", 1)
        assert first and first not in ci_jobs(), (first, ci_jobs())
        after = _said(log).split(GIVEN_UP, 1)[1]
        assert "(PartitionDown): cancelled" in after[:40] and "next start in" in after, after
        _partition(slurm_cluster, "UP")
        # Rank 2's job, submitted once the backoff allows, cancelled from outside at once.
        wait_for("the next node job", lambda: _node_job(here / "launched.json", 2), 180)
        second = _node_job(here / "launched.json", 2)
        subprocess.run(
            ["scancel", second],
            check=True,
            env={"SLURM_CONF": str(slurm_cluster.conf), "PATH": "/usr/bin:/bin"},
        )
        wait_for("the cancelled node seen", lambda: CANCELLED in _said(log), 120)
        assert f"Slurm job {second} was cancelled" in _said(log)
        # The one after it joins, and the placement group is placed: the driver ends well.
        ended = user_syndeo(
            user_run,
            *("logs", "--job", driver.stdout.split()[0], "--cluster-id", cid, "--follow"),
            timeout=300,
        )
        print(log.read_text()[-3000:])
        assert ended.returncode == 0, ended.stdout[-2000:] + ended.stderr[-2000:]
        assert _node_job(here / "launched.json", 3) in ci_jobs()  # the node that came
    finally:
        down = user_syndeo(user_run, "down", "--cluster-id", cid)
    assert down.returncode == 0, down.stderr[-2000:]
    assert ci_jobs() == {}


def test_demand_that_goes_away_cancels_the_node_still_queued(
    slurm_cluster: slurmcluster.LocalCluster, user_run: UserRun, inactive_later: None
) -> None:
    cfg = user_run.config(
        'target = "slurm"\ncpus_per_node = 1\njoin_timeout_s = 120\n'
        '[slurm]\npartition = "debug"\ntime = "00:15:00"\n'
        '[[groups]]\nname = "cpu"\nmax_nodes = 1\n'
    )
    job = program_dir(user_run, "spread.py", SPREAD)
    cid = f"sgo-{uuid.uuid4().hex[:6]}"
    up = user_syndeo(user_run, "up", "--config", str(cfg), "--cluster-id", cid, timeout=400)
    here = user_run.home / "clusters" / cid
    log = here / "watch.log"
    try:
        assert up.returncode == 0, up.stderr[-3000:]
        _partition(slurm_cluster, "DOWN")  # the node job waits in the queue
        driver = user_syndeo(
            user_run,
            *("submit", "--cluster-id", cid, "--workdir", str(job), "--"),
            *("python", "spread.py"),
        )
        assert driver.returncode == 0, driver.stderr[-2000:]
        wait_for("the node job", lambda: _node_job(here / "launched.json", 1), 120)
        node = _node_job(here / "launched.json", 1)
        assert node in ci_jobs()
        # The work goes: nothing waits for a node any more, and the queued job goes too.
        gone = user_syndeo(
            user_run, "cancel", "--job", driver.stdout.split()[0], "--cluster-id", cid
        )
        assert gone.returncode == 0, gone.stderr[-2000:]
        wait_for("the queued node let go", lambda: f"let go {node}" in _said(log), 120)
        wait_for("its job gone from the queue", lambda: node not in ci_jobs(), 60)
        time.sleep(15)  # and not started again
        assert list(ci_jobs()) == [
            str(json.loads((here / "launched.json").read_text())["part"]["job_id"])
        ]
    finally:
        down = user_syndeo(user_run, "down", "--cluster-id", cid)
    assert down.returncode == 0, down.stderr[-2000:]
    assert ci_jobs() == {}
