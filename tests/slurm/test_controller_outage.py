"""A Slurm controller that stops answering for a while must not cost the user the job."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from testbeds import slurmcluster
from testbeds.procs import pid_alive, read_pid, wait_until
from testbeds.users import UserRun
from tests.support.slurm import assert_clean, collected_result, job_config, wait_running

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

# scontrol itself rides out ~20 s of a silent or absent controller (its message
# timeout and connect retries, measured here): a longer outage is what reaches us.
OUTAGE_S = 30.0


def _controller_pid(cluster: slurmcluster.LocalCluster) -> int:
    pid = read_pid(cluster.base / "run" / "slurmctld.pid")
    assert pid is not None and pid_alive(pid), "slurmctld is not running"
    return pid


def _restart_controller(cluster: slurmcluster.LocalCluster) -> None:
    """Stop slurmctld (it saves its state), stay down OUTAGE_S, start it again."""
    pid = _controller_pid(cluster)
    os.kill(pid, signal.SIGTERM)
    wait_until(lambda: None if pid_alive(pid) else True, 30, "slurmctld to exit")
    down_at = time.monotonic()
    # Prove it is really gone: a query fails now, as a user's would.
    probe = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, check=False)
    assert "is UP" not in probe.stdout, probe.stdout
    time.sleep(max(0.0, OUTAGE_S - (time.monotonic() - down_at)))
    subprocess.run(["slurmctld", "-f", str(cluster.conf)], check=True, timeout=60)
    wait_until(
        lambda: (
            True
            if "is UP"
            in subprocess.run(["scontrol", "ping"], capture_output=True, text=True).stdout
            else None
        ),
        60,
        "slurmctld to answer again",
    )


def test_controller_outage_mid_run_does_not_cancel_the_job(
    slurm_cluster: slurmcluster.LocalCluster, user_run: UserRun
) -> None:
    proc = user_run.start(job_config(tasks=18, seconds=5.0))
    try:
        job_id = wait_running(user_run)
        _restart_controller(slurm_cluster)
    except BaseException:
        proc.kill()
        raise
    outcome = user_run.finish(proc)
    assert outcome["exit_code"] == 0, outcome
    assert collected_result(outcome)["tasks_done"] == 18
    # deploy saw the outage (and said so) instead of failing or cancelling.
    assert "retrying for up to" in outcome["_stderr"] + outcome["_stdout"], outcome
    summary = json.loads((user_run.results / outcome["cluster_id"] / "deploy.json").read_text())
    assert summary["exit_code"] == 0
    log = Path(next((user_run.home / "slurm" / "jobs").glob(f"*/slurm-{job_id}.out")))
    assert "CANCELLED" not in log.read_text()
    assert_clean(slurm_cluster)
