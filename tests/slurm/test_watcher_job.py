"""``slurm.watcher = "job"``: the watcher of an ``up`` cluster runs as a Slurm job of its
own, not beside the launcher on the login node, and does there what it does beside it.
On the real local Slurm cluster, as the unprivileged CI user: the watcher job takes an
idle cluster down (autostop) and ends, leaving nothing."""

from __future__ import annotations

import json
import uuid

import pytest

from testbeds import slurmcluster
from testbeds.users import UserRun
from tests.support.slurm import ci_jobs, user_syndeo, wait_for

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

CONFIG = (
    'target = "slurm"\nnodes = 1\ncpus_per_node = 1\njoin_timeout_s = 120\n'
    '[slurm]\npartition = "debug"\ntime = "00:10:00"\nwatcher = "job"\n'
)


def test_a_watcher_job_takes_an_idle_cluster_down_and_leaves_nothing(
    slurm_cluster: slurmcluster.LocalCluster, user_run: UserRun
) -> None:
    cfg = user_run.config(CONFIG)
    cid = f"swj-{uuid.uuid4().hex[:6]}"
    state = user_run.home / "clusters" / cid
    up = user_syndeo(user_run, "up", "--config", str(cfg), "--cluster-id", cid, "--autostop", "20s")
    try:
        assert up.returncode == 0, up.stderr[-3000:]
        watcher = json.loads((state / "launched.json").read_text())["watcher"]
        job = str(watcher["job"]["job_id"])
        assert f"{cid}-watch" in ci_jobs()[job]  # a job of its own, named for the cluster
        wait_for("the watcher job polls", lambda: (state / "watch.alive").exists(), 120)
        row = next(
            r
            for r in json.loads(user_syndeo(user_run, "status", "--json").stdout)
            if r["cluster_id"] == cid
        )
        assert row["watcher"] is True, row
        # Idle (no job, no Ray task) for 20 s: the job runs `down` itself. `down` removes
        # launched.json before the watcher logs its last line: wait for that line.
        log = state / "watch.log"
        wait_for("autostop", lambda: "is down (autostop)" in log.read_text(), 180)
        assert f"watching cluster {cid}" in log.read_text(), log.read_text()
        assert not (state / "launched.json").exists()
        wait_for("every job of the cluster ended", lambda: not ci_jobs(), 60)
    finally:
        if (state / "launched.json").exists():
            user_syndeo(user_run, "down", "--cluster-id", cid)
    assert not list((user_run.home / "slurm" / "rendezvous").glob(f"{cid}/*"))


def test_down_cancels_the_watcher_job_first(
    slurm_cluster: slurmcluster.LocalCluster, user_run: UserRun
) -> None:
    cfg = user_run.config(CONFIG)
    cid = f"swd-{uuid.uuid4().hex[:6]}"
    up = user_syndeo(user_run, "up", "--config", str(cfg), "--cluster-id", cid, "--autostop", "1h")
    try:
        assert up.returncode == 0, up.stderr[-3000:]
        assert len(ci_jobs()) == 2  # the cluster's job and its watcher's
    finally:
        down = user_syndeo(user_run, "down", "--cluster-id", cid)
    assert down.returncode == 0, down.stderr[-2000:]
    assert ci_jobs() == {}


def test_a_watcher_job_with_a_bucket_rendezvous_is_refused_before_anything_starts(
    slurm_cluster: slurmcluster.LocalCluster, user_run: UserRun
) -> None:
    cfg = user_run.config('rendezvous = "s3://bucket/x"\n' + CONFIG)
    out = user_syndeo(user_run, "up", "--config", str(cfg), "--autostop", "1h")
    assert out.returncode != 0
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and 'slurm.watcher = "job" needs a file:// rendezvous' in lines[0]
    assert ci_jobs() == {}
    assert not list((user_run.home / "clusters").glob("*/launched.json"))
