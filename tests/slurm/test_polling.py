"""A launcher polls Slurm like a good citizen: every job-state question it asks is ONE
batched ``squeue`` naming every job of its cluster that still runs, never two within
the queue's minimum interval (syndeo/launcher/targets/slurm/queue.py).

Checked structurally on the real local cluster, from what the CI user's launcher
really ran: logging wrappers first on its PATH (testbeds/slurmrpc.py).  How many
requests per minute that makes is a benchmark (benchmarks/slurm_polling.py), not a test.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from syndeo.launcher.targets.slurm.queue import MIN_INTERVAL_S
from testbeds import slurmcluster, slurmrpc
from testbeds.users import CI_PYTHON, UserRun, as_user
from tests.support.slurm import job_config

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

GROUPS = '[[groups]]\nname = "head"\n[[groups]]\nname = "cpu"\n[[groups]]\nname = "more"\n'
# The watcher, alone with the idle cluster, asks at least twice (its target poll: every
# 30 s) within this.
IDLE_S = 100


def _queried_ids(call: slurmrpc.Call) -> set[str]:
    """The job ids one query names (``squeue ... -j 1,2,3 ...``)."""
    assert call.argv[0] == "squeue", f"a job query that is not one squeue: {call.argv}"
    return set(call.argv[call.argv.index("-j") + 1].split(","))


def _assert_paced(queries: list[slurmrpc.Call]) -> None:
    for a, b in itertools.pairwise(queries):
        assert b.at - a.at >= MIN_INTERVAL_S, (
            f"two queries {b.at - a.at:.2f} s apart: {a.argv} / {b.argv}"
        )


def test_a_following_deploy_asks_one_paced_query_at_a_time(
    slurm_cluster: slurmcluster.LocalCluster, user_run: UserRun
) -> None:
    bindir, log = slurmrpc.make_wrappers(user_run.root)
    outcome = user_run.deploy(
        job_config(tasks=6, seconds=5.0), {"PATH": slurmrpc.user_path(bindir)}
    )
    assert outcome["exit_code"] == 0, outcome.get("_stderr", "")[-3000:]
    calls = [c for c in slurmrpc.read_calls(log) if not c.job]
    logs = list((user_run.home / "slurm" / "jobs").glob("*/slurm-*.out"))
    assert len(logs) == 1, logs
    job_id = logs[0].stem.removeprefix("slurm-")
    queries = [c for c in calls if c.query]
    assert len(queries) >= 2, [c.argv for c in calls]  # it did follow the job
    assert all(_queried_ids(q) == {str(job_id)} for q in queries)
    assert not [c for c in calls if c.argv[:2] == ["scontrol", "show"] and c.rpc]
    _assert_paced(queries)


def _syndeo(run: UserRun, path: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        as_user([str(CI_PYTHON), "-m", "syndeo", *args], {**run.env, "PATH": path}),
        capture_output=True,
        text=True,
        cwd=run.root,
        timeout=400,
        check=False,
    )


def _wait_watched(log: Path, since: float, count: int) -> None:
    """Until the watcher (the launcher's own calls) has queried ``count`` times."""
    deadline = time.monotonic() + IDLE_S
    while True:
        found = [c for c in slurmrpc.read_calls(log) if not c.job and c.query and c.at >= since]
        if len(found) >= count:
            return
        assert time.monotonic() < deadline, f"{len(found)} watcher queries in {IDLE_S} s"
        time.sleep(1)


def test_an_up_cluster_of_three_jobs_is_watched_and_taken_down_in_batches(
    slurm_cluster: slurmcluster.LocalCluster, user_run: UserRun
) -> None:
    bindir, log = slurmrpc.make_wrappers(user_run.root)
    path = slurmrpc.user_path(bindir)
    cfg = user_run.config(
        'target = "slurm"\ncpus_per_node = 1\njoin_timeout_s = 120\n'
        '[slurm]\npartition = "debug"\ntime = "00:10:00"\n' + GROUPS
    )
    cid = f"slurm-{uuid.uuid4().hex[:8]}"
    up = _syndeo(user_run, path, "up", "--config", str(cfg), "--cluster-id", cid)
    try:
        assert up.returncode == 0, up.stderr[-3000:]
        launched = json.loads((user_run.home / "clusters" / cid / "launched.json").read_text())
        ids = {str(e["job_id"]) for e in launched["part"]["groups"]}
        assert len(ids) == 3
        idle_from = time.time()
        _wait_watched(log, idle_from, 2)
        down_from = time.time()
        down = _syndeo(user_run, path, "down", "--cluster-id", cid)
        assert down.returncode == 0, down.stderr[-3000:]
    finally:
        _syndeo(user_run, path, "down", "--cluster-id", cid)
    calls = [c for c in slurmrpc.read_calls(log) if not c.job]
    # The watcher, alone while the cluster idles: each query names all three jobs.
    watched = [c for c in calls if idle_from <= c.at < down_from and c.query]
    assert len(watched) >= 2, [c.argv for c in calls]
    assert all(_queried_ids(q) == ids for q in watched)
    _assert_paced(watched)
    # `down`: one query for all, then at most one scancel for those still running (the
    # head's stop request may have ended them all), then paced queries of what is left.
    ending = [c for c in calls if c.at >= down_from]
    assert _queried_ids(next(c for c in ending if c.query)) == ids
    cancels = [c for c in ending if c.argv[0] == "scancel"]
    assert len(cancels) <= 1 and all(set(c.argv[1:]) <= ids for c in cancels), cancels
    assert all(_queried_ids(q) <= ids for q in ending if q.query)
    _assert_paced([c for c in ending if c.query])
    assert not [c for c in calls if c.argv[:2] == ["scontrol", "show"] and c.rpc]
