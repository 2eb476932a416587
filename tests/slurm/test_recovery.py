"""Lost nodes come back on the real local Slurm cluster, deploys run by the CI user.

* A worker's node dies mid-benchmark (its slurmd and every process on it SIGKILLed):
  with ``[recovery] replace_lost`` the launcher submits a one-node job for the lost
  rank, which joins the running head, and the benchmark keeps its exact count.
* The head's node process tree is SIGKILLed mid-benchmark: with ``max_restarts = 1``
  the launcher submits the cluster again as attempt 1, which finishes.
"""

from __future__ import annotations

import contextlib
import json
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psutil
import pytest

from testbeds import slurmcluster
from testbeds.users import UserRun
from tests.support.helpers import processes_of
from tests.support.slurm import assert_clean, collected_result, job_id

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

SAMPLES, REPEATS = 40000, 3


def _config(cid: str, recovery: str) -> str:
    return (
        f'target = "slurm"\ncluster_id = "{cid}"\nnodes = 3\ncpus_per_node = 1\n'
        f"join_timeout_s = 180\n[bench]\nsamples_per_cpu = {SAMPLES}\nrepeats = {REPEATS}\n"
        f'[slurm]\npartition = "debug"\ntime = "00:15:00"\n[recovery]\n{recovery}'
    )


def _wait_sampling(run: UserRun, cid: str, proc: Any, timeout: float = 300) -> None:
    """Until the head says the benchmark is sampling (its progress is published)."""
    status = run.home / "slurm" / "rendezvous" / cid / "a0" / "status.json"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError, ValueError):
            st = json.loads(status.read_text())
            if st.get("phase") == "running" and st.get("progress"):
                return
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        time.sleep(0.5)
    raise AssertionError("the benchmark never started sampling")


def _watch_rank(
    status: Path, rank: int, finished: Future[dict[str, Any]]
) -> tuple[float | None, float | None]:
    """When (monotonic) the head's status first listed ``rank`` lost, and then joined again."""
    lost: float | None = None
    deadline = time.monotonic() + 600
    while not finished.done() and time.monotonic() < deadline:
        with contextlib.suppress(OSError, ValueError):
            st = json.loads(status.read_text())
            gone = rank in st.get("nodes_lost", [])
            if lost is None and gone:
                lost = time.monotonic()
            elif lost is not None and not gone and rank in st.get("nodes_joined", []):
                return lost, time.monotonic()
        time.sleep(0.2)
    return lost, None


def _all_joined(scope: Path, finished: Future[dict[str, Any]]) -> float | None:
    """When (monotonic) attempt 1's head first said all 3 nodes had joined."""
    deadline = time.monotonic() + 600
    while not finished.done() and time.monotonic() < deadline:
        with contextlib.suppress(OSError, ValueError):
            if len(json.loads((scope / "a1" / "status.json").read_text())["nodes_joined"]) >= 3:
                return time.monotonic()
        time.sleep(0.2)
    return None


def _exact_count(outcome: dict[str, Any]) -> None:
    [env] = collected_result(outcome)["results"]  # type: ignore[misc]
    assert env["samples_counted"] == env["samples_requested"] == SAMPLES * 3  # per repeat


def test_a_lost_worker_node_is_replaced_by_a_new_job(
    slurm_cluster: slurmcluster.LocalCluster, user_run: UserRun
) -> None:
    cid = "recover-slurm"
    proc = user_run.start(_config(cid, "replace_lost = true\nmax_replacements = 1\n"))
    status = user_run.home / "slurm" / "rendezvous" / cid / "a0" / "status.json"
    try:
        _wait_sampling(user_run, cid, proc)
        job = job_id(user_run)
        with ThreadPoolExecutor(1) as pool:
            finished = pool.submit(UserRun.finish, proc, 600)  # drains its output meanwhile
            killed = time.monotonic()
            slurmcluster.kill_node("node3")  # rank 2: one task per node, in node order
            seen_lost, back = _watch_rank(status, 2, finished)
            outcome = finished.result()
    finally:
        slurmcluster.revive_node("node3")
    assert seen_lost is not None and back is not None, "the head never saw rank 2 lost and back"
    print(
        f"node killed -> head saw rank 2 lost: {seen_lost - killed:.1f} s; "
        f"-> replacement joined: {back - killed:.1f} s"
    )
    assert outcome["exit_code"] == 0, outcome["_stderr"][-6000:]
    assert outcome["lost_ranks"] == [2], outcome
    err = " ".join(outcome["_stderr"].split())  # (the terminal's line breaks aside)
    assert "rank 2 lost; started a replacement: rank 2 in Slurm job" in err, err[-3000:]
    _exact_count(outcome)
    summary = json.loads((user_run.results / cid / "deploy.json").read_text())
    [event] = summary["recovery"]
    assert event["rank"] == 2 and event["replaced"].endswith("not on node3"), event
    assert event["lost_s"] <= event["replaced_s"] <= event["joined_s"]
    print("lost -> replacement joined, s:", event["replacement_joined_after_s"])
    [env] = collected_result(outcome)["results"]  # type: ignore[misc]
    print("benchmark: node losses", json.dumps(env["node_losses"]))
    # The replacement's own script: one node, rank 2, never requeued, not on node3.
    script = (user_run.home / "slurm" / "jobs" / cid / "job-r2.sbatch").read_text()
    assert "#SBATCH --nodes=1" in script and "#SBATCH --exclude=node3" in script
    assert "#SBATCH --no-requeue" in script and "$(( 2 + SLURM_PROCID ))" in script
    # Only the killed node's own scratch dir (rank 2 of the first job) may remain.
    assert_clean(slurm_cluster, crashed=f"sy-{job}-2")


def _kill_head(cid: str) -> int:
    """SIGKILL rank 0's node process and everything below it (Ray, the benchmark); the
    job's task shell and slurmd live on, as after a crash of the node program alone."""
    victims = [p for p in processes_of(cid) if p.environ().get("SYNDEO_RANK") == "0"]
    for p in victims:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.kill()
    return len(victims)


def test_a_lost_head_restarts_the_cluster_as_attempt_1(
    slurm_cluster: slurmcluster.LocalCluster, user_run: UserRun
) -> None:
    cid = "restart-slurm"
    proc = user_run.start(_config(cid, "max_restarts = 1\n"))
    try:
        _wait_sampling(user_run, cid, proc)
        first = job_id(user_run)
        with ThreadPoolExecutor(1) as pool:
            finished = pool.submit(UserRun.finish, proc, 600)  # drains its output meanwhile
            killed = time.monotonic()
            assert _kill_head(cid) >= 2  # the node and at least its Ray
            rejoined = _all_joined(user_run.home / "slurm" / "rendezvous" / cid, finished)
            outcome = finished.result()
    finally:
        if proc.poll() is None:
            proc.kill()
    assert rejoined is not None, "attempt 1 never had all its nodes"
    print(f"head killed -> attempt 1 all joined: {rejoined - killed:.1f} s")
    assert outcome["exit_code"] == 0, outcome["_stderr"][-6000:]
    assert outcome["attempt"] == 1, outcome
    err = " ".join(outcome["_stderr"].split())  # (the terminal's line breaks aside)
    assert "restarting the cluster as attempt 1" in err, err[-3000:]
    _exact_count(outcome)
    summary = json.loads((user_run.results / cid / "deploy.json").read_text())
    assert summary["attempt"] == 1
    [restart] = summary["restarts"]
    assert restart["attempt"] == 0 and restart["head_exit"] != 0
    assert restart["head_lost_s"] <= restart["restarted_s"] <= restart["joined_s"]
    print(
        "head lost seen -> attempt 1 all joined, s:", restart["joined_s"] - restart["head_lost_s"]
    )
    # The second job ran as attempt 1: its script says so and its head wrote a1's rc.
    jobs_dir = user_run.home / "slurm" / "jobs" / cid
    logs = sorted(jobs_dir.glob("slurm-*.out"))
    assert len(logs) == 2 and f"slurm-{first}.out" in {p.name for p in logs}
    assert "$(( 1 + ${SLURM_RESTART_COUNT:-0} ))" in (jobs_dir / "job.sbatch").read_text()
    assert (jobs_dir / "rank0.a1.rc").read_text().strip() == "0"
    # Attempt 0's workers were killed with their job (their Ray waited on a dead head).
    assert_clean(slurm_cluster, crashed=f"sy-{first}-[012]")
