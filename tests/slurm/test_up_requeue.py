"""An ``up`` cluster whose Slurm job is requeued (a preemption under
``PreemptMode=REQUEUE``, a node failure, ``scontrol requeue``) runs again as the next
attempt: the watcher follows it, ``submit`` reaches the new head at once, and ``down``
stops that head.  On the real local Slurm cluster, as the unprivileged CI user."""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

import pytest

from syndeo.launcher.targets.slurm import commands
from testbeds import slurmcluster
from testbeds.users import UserRun, give_to_ci_user
from tests.support.slurm import ci_jobs, user_syndeo, wait_for

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

PROGRAM = "import ray\nray.init()\nprint('nodes', len([n for n in ray.nodes() if n['Alive']]))\n"


def _phase(scope: Path, attempt: int) -> str | None:
    try:
        return str(json.loads((scope / f"a{attempt}" / "status.json").read_text())["phase"])
    except (OSError, ValueError):
        return None


def _submit(run: UserRun, cid: str) -> subprocess.CompletedProcess[str]:
    return user_syndeo(
        run,
        *("submit", "--cluster-id", cid, "--workdir", str(run.root / "job")),
        *("--follow", "--", "python", "nodes.py"),
    )


def test_a_requeued_up_cluster_takes_jobs_as_its_next_attempt_and_down_stops_it(
    slurm_cluster: slurmcluster.LocalCluster, user_run: UserRun
) -> None:
    cfg = user_run.config(
        'target = "slurm"\nnodes = 2\ncpus_per_node = 1\njoin_timeout_s = 120\n'
        '[slurm]\npartition = "debug"\ntime = "00:15:00"\nrequeue = true\n'
    )
    (user_run.root / "job").mkdir()
    (user_run.root / "job" / "nodes.py").write_text(PROGRAM)
    give_to_ci_user(user_run.root / "job")
    give_to_ci_user(user_run.root / "job" / "nodes.py")
    cid = f"srq-{uuid.uuid4().hex[:6]}"
    up = user_syndeo(user_run, "up", "--config", str(cfg), "--cluster-id", cid, timeout=400)
    try:
        assert up.returncode == 0, up.stderr[-3000:]
        _requeue_then_serve(user_run, cid)
    finally:
        down = user_syndeo(user_run, "down", "--cluster-id", cid)
    assert down.returncode == 0, down.stderr[-2000:]
    assert "has ended" not in _watch_log(user_run, cid)  # `down` ended the watcher, not a0
    assert ci_jobs() == {}
    assert not list((user_run.home / "slurm" / "rendezvous").glob(f"{cid}/a*"))


def _watch_log(run: UserRun, cid: str) -> str:
    return (run.home / "clusters" / cid / "watch.log").read_text()


def _requeue_then_serve(run: UserRun, cid: str) -> None:
    home = run.home
    launched = json.loads((home / "clusters" / cid / "launched.json").read_text())
    job_id = str(launched["part"]["job_id"])
    scope = Path(launched["rendezvous"].removeprefix("file://")) / cid
    first = _submit(run, cid)
    assert first.returncode == 0 and "nodes 2" in first.stdout, first.stdout + first.stderr
    subprocess.run(["scontrol", "requeue", job_id], check=True)
    wait_for("attempt 1 serves", lambda: _phase(scope, 1) == "serving", 300)
    # At once, before the watcher's next look at Slurm: the job goes to attempt 1's head.
    again = _submit(run, cid)
    assert again.returncode == 0 and "nodes 2" in again.stdout, again.stdout + again.stderr
    assert (scope / "a1" / "jobs").is_dir() and not (scope / "a0").exists()
    # The watcher follows attempt 1 (its next target poll): status reads it as serving.
    wait_for("the watcher follows", lambda: "runs again as attempt 1" in _watch_log(run, cid), 90)
    assert commands.job_info(job_id).restarts == 1
    listed = json.loads(user_syndeo(run, "status", "--json").stdout)
    row = next(r for r in listed if r["cluster_id"] == cid)
    assert row["state"] == "serving", row
