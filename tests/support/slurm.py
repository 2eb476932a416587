"""Helpers of the Slurm tests: the cluster's settings, results and what a job leaves."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from testbeds import slurmcluster
from testbeds.users import CI_PYTHON, CI_USER, UserRun, as_user, give_to_ci_user
from tests.slurm.conftest import WORKLOAD, node_scratch, user_procs_on_nodes

NODE_IPS = {"10.99.0.11", "10.99.0.12", "10.99.0.13"}


def job_config(
    tasks: int = 6, seconds: float = 0.2, nodes: int = 3, slurm: str = "", workload: str = ""
) -> str:
    return (
        f'target = "slurm"\nnodes = {nodes}\ncpus_per_node = 1\njoin_timeout_s = 180\n'
        f'run = "python {workload or WORKLOAD} --tasks {tasks} --seconds {seconds}"\n'
        f'[slurm]\npartition = "debug"\ntime = "00:10:00"\n{slurm}'
    )


def collected_result(outcome: dict[str, object]) -> dict[str, object]:
    path = outcome.get("result_path")
    assert path, f"no result collected: {outcome}"
    data: dict[str, object] = json.loads(Path(str(path)).read_text())
    return data


def assert_clean(cluster: slurmcluster.LocalCluster, crashed: str = "") -> None:
    # The job has ended (deploy waits for that): proctrack/cgroup leaves nothing behind.
    deadline = time.monotonic() + 20
    while (left := user_procs_on_nodes(cluster)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not left, f"processes left on the nodes: {left}"
    # A crashed node could not clean up (on a real cluster that is its own disk).
    left_dirs = [p for p in node_scratch() if not crashed or not p.match(crashed)]
    assert not left_dirs, "scratch dirs left behind"
    for p in node_scratch():
        shutil.rmtree(p, ignore_errors=True)


def job_id(run: UserRun) -> str:
    jobs_dir = run.home / "slurm" / "jobs"
    logs = list(jobs_dir.glob("*/slurm-*.out"))
    return logs[0].name.removeprefix("slurm-").removesuffix(".out") if logs else ""


def wait_running(run: UserRun, timeout: float = 240, tasks_done: int = 0) -> str:
    """Job id once the workload runs (head published phase 'running' and, if asked,
    progress of at least ``tasks_done`` tasks: the per-node probes are done by then)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for status in (run.home / "slurm" / "rendezvous").glob("*/a0/status.json"):
            try:
                st = json.loads(status.read_text())
                done = int(st.get("progress", {}).get("tasks_done", 0))
                if st["phase"] == "running" and done >= tasks_done:
                    return job_id(run)
            except (OSError, ValueError, KeyError):
                pass
        time.sleep(0.2)
    raise AssertionError("the job's workload never started running")


def user_syndeo(run: UserRun, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``python -m syndeo ARGS`` as the CI user, in the run's dir with its $SYNDEO_HOME."""
    return subprocess.run(
        as_user([str(CI_PYTHON), "-m", "syndeo", *args], run.env),
        capture_output=True,
        text=True,
        cwd=run.root,
        timeout=timeout,
        check=False,
    )


def ci_jobs() -> dict[str, str]:
    """The CI user's jobs in the queue: id -> "name nodes"."""
    out = subprocess.run(
        ["squeue", "-h", "-u", CI_USER, "-o", "%i %j %N"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return {line.split()[0]: line.split(maxsplit=1)[1] for line in out.splitlines()}


def wait_for(what: str, check: Callable[[], object], timeout_s: float) -> None:
    """Poll ``check`` every second until it is true; fail naming ``what`` after the timeout."""
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, f"not within {timeout_s:.0f} s: {what}"
        time.sleep(1)


def program_dir(run: UserRun, name: str, source: str) -> Path:
    """The CI user's work dir (``<root>/job``) holding one program, ``name``."""
    job = run.root / "job"
    job.mkdir()
    (job / name).write_text(source)
    give_to_ci_user(job)
    give_to_ci_user(job / name)
    return job
