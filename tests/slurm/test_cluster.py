"""Jobs on the real local Slurm cluster, submitted by the unprivileged CI user.

Bare mode (the CI user's interpreter on the shared filesystem); the container
path is the same script with an ``apptainer exec`` launch line (see test_render).
"""

from __future__ import annotations

import json
import os
import pwd
import re
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from syndeo.launcher.targets.slurm import commands
from syndeo.rendezvous import open_rendezvous
from testbeds import slurmcluster
from testbeds.machine import SLURM_TESTBED_LOCK
from testbeds.users import CI_PYTHON, CI_USER, INVOKE, UserRun, as_user, give_to_ci_user
from tests.slurm.conftest import HERE, WORKLOAD
from tests.support.helpers import launcher_of, lock_is_held
from tests.support.listeners import assert_ray_ports
from tests.support.programs import write_project
from tests.support.slurm import NODE_IPS, assert_clean, collected_result, job_config, wait_running
from tests.support.task_reach import reach_spec

pytestmark = [pytest.mark.slurm, pytest.mark.slow]
REACH = HERE.parent / "support" / "task_reach.py"


def test_three_node_job(slurm_cluster: slurmcluster.LocalCluster, user_run: UserRun) -> None:
    # From a login shell with SBATCH_EXPORT=NONE (some sites set it): the job still gets
    # the secrets sbatch passes it (the launch key), since the launcher says --export=ALL.
    outcome = user_run.deploy(job_config(), env={"SBATCH_EXPORT": "NONE"})
    assert outcome["exit_code"] == 0, outcome
    result = collected_result(outcome)
    assert result["ray_nodes"] == 3
    assert set(result["node_ips"]) == NODE_IPS  # type: ignore[arg-type]
    assert result["tasks_done"] == 6
    assert result["probe_hosts"] == ["node1", "node2", "node3"]
    print("timings", outcome["timings"])
    assert "all_joined_s" in outcome["timings"]  # type: ignore[operator]
    assert_clean(slurm_cluster)


@pytest.fixture(scope="module")
def sif() -> Path:
    """The real Syndeo image (testbeds/image.py)."""
    from testbeds.image import test_image

    return Path(test_image().sif)


@pytest.mark.apptainer
def test_three_node_job_in_container(
    slurm_cluster: slurmcluster.LocalCluster, user_run: UserRun, sif: Path
) -> None:
    """The same job with every node inside the unprivileged Apptainer container."""
    local = user_run.root / "workload.py"
    shutil.copy(WORKLOAD, local)  # the work dir is bound into the container
    shutil.copy(REACH, user_run.root / REACH.name)
    cid = f"slurm-{uuid.uuid4().hex[:8]}"
    # What no task may reach: the job dir's secrets and script (the launch key; what
    # the launcher runs again on a requeue), the launcher's state, other clusters'
    # records in the same rendezvous.
    jobs, rdv = user_run.home / "slurm" / "jobs" / cid, user_run.home / "slurm" / "rendezvous"
    other = rdv / "other-cluster"
    other.mkdir(parents=True)
    forbidden = [
        str(jobs / "job.sbatch.secrets"),
        str(jobs / "job.sbatch"),
        str(user_run.home / "clusters"),
        str(other),
    ]
    (user_run.root / "reach.json").write_text(json.dumps(reach_spec(forbidden)))
    for path in [*user_run.root.iterdir(), user_run.home, *user_run.home.rglob("*")]:
        give_to_ci_user(path)
        path.chmod(0o700 if path.is_dir() else 0o644)
    body = f'container = "{sif}"\ncluster_id = "{cid}"\n' + job_config(workload="workload.py")
    outcome = user_run.deploy(body)
    assert outcome["exit_code"] == 0, outcome
    result = collected_result(outcome)
    assert result["ray_nodes"] == 3
    assert set(result["node_ips"]) == NODE_IPS  # type: ignore[arg-type]
    assert result["probe_hosts"] == ["node1", "node2", "node3"]
    # A task on every node, in either form a process holds it (NAME=value, Apptainer's
    # JSON), sees no secret, and none of those paths.
    assert result["reach"] == [{"secrets": [], "access": dict.fromkeys(forbidden, "absent")}] * 3, (
        result["reach"]
    )
    log = next((user_run.home / "slurm" / "jobs").glob("*/job.sbatch")).read_text()
    assert "apptainer exec" in log and str(sif) in log
    assert_clean(slurm_cluster)


@pytest.mark.apptainer
def test_bench_bringup_on_slurm_in_the_container(
    slurm_cluster: slurmcluster.LocalCluster, user_run: UserRun, sif: Path
) -> None:
    """``invoke bench-bringup --target slurm --container SIF`` as docs/how-it-works.md shows it, by
    the CI user: one bare ``ray start`` and one 3-node job whose nodes ran in the image."""
    cfg = user_run.config('[slurm]\npartition = "debug"\ntime = "00:10:00"\n')
    out = user_run.root / "bringup.json"
    proc = subprocess.run(
        as_user(
            [
                *INVOKE,
                "bench-bringup",
                "--target",
                "slurm",
                "--nodes",
                "3",
                "--runs",
                "1",
                "--container",
                str(sif),
                "--config",
                str(cfg),
                "--out",
                str(out),
            ],
            user_run.env,
        ),
        capture_output=True,
        text=True,
        cwd=user_run.root,
        timeout=900,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(out.read_text())
    assert (doc["target"], doc["nodes"], doc["container"]) == ("slurm", 3, str(sif))
    assert [r["kind"] for r in doc["runs"]] == ["reference", "cluster"]
    [run] = [r for r in doc["runs"] if r["kind"] == "cluster"]
    assert run["timeline_problems"] == [], run
    assert sorted(run["nodes"]) == ["0", "1", "2"]
    assert 0 < run["launch_to_joined_s"] == run["nodes"]["0"]["all_joined"]
    assert json.loads(proc.stdout) == doc["summary"]
    # Its job ran every node in the image.
    [script] = (user_run.home / "slurm" / "jobs").glob("*/job.sbatch")
    assert "apptainer exec" in script.read_text() and str(sif) in script.read_text()
    assert_clean(slurm_cluster)


def test_two_jobs_share_nodes_and_cancel_one(
    slurm_cluster: slurmcluster.LocalCluster, named_runs: Callable[[str], UserRun]
) -> None:
    """Two clusters on the same 3 nodes: no port/temp/rendezvous clash; scancel of one
    leaves the other running to completion and leaves no Ray process of its own."""
    runs = [named_runs(name) for name in ("a", "b")]
    long_run, short_run = runs
    p_long = long_run.start(job_config(tasks=400, seconds=1.0))
    p_short = short_run.start(job_config(tasks=30, seconds=0.5))
    job_long = wait_running(long_run)
    wait_running(short_run)
    nodes = [(n.name, n.netns, n.ip) for n in slurm_cluster.nodes]
    assert_ray_ports(nodes, pwd.getpwnam(CI_USER).pw_uid)
    # The way docs/targets/slurm.md shows: `invoke slurm.cancel --cluster-id ID`, as the
    # user who submitted.
    cid = UserRun.cluster_id(p_long)
    cancel = subprocess.run(
        as_user(
            [*INVOKE, "slurm.cancel", "--cluster-id", cid],
            {**long_run.env, "SLURM_CONF": str(slurm_cluster.conf)},
        ),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert cancel.returncode == 0 and cancel.stdout.strip() == f"cancelled {cid}", cancel
    cancelled = UserRun.finish(p_long)
    assert cancelled["exit_code"] != 0, cancelled
    assert commands.job_info(job_long).state == "CANCELLED"
    done = UserRun.finish(p_short)
    assert done["exit_code"] == 0, done
    result = collected_result(done)
    assert result["ray_nodes"] == 3 and result["tasks_done"] == 30
    assert_clean(slurm_cluster)


def test_ctrl_c_and_sigterm_cancel_the_job_and_leave_nothing(
    slurm_cluster: slurmcluster.LocalCluster, named_runs: Callable[[str], UserRun]
) -> None:
    """Two deploys on the same nodes: Ctrl-C (SIGINT) ends one, SIGTERM the other, mid-run.
    Each cancels its own job, removes its records and exits 130; nothing is left."""
    runs = [named_runs(name) for name in ("int", "term")]
    procs = [run.start(job_config(tasks=400, seconds=1.0)) for run in runs]
    job_ids = [wait_running(run) for run in runs]
    for proc, signum in zip(procs, (signal.SIGINT, signal.SIGTERM), strict=True):
        launcher_of(proc).send_signal(signum)
    for run, proc, job in zip(runs, procs, job_ids, strict=True):
        _out, err = proc.communicate(timeout=300)
        assert proc.returncode == 130, err[-3000:]
        assert "syndeo: interrupted" in err and "Traceback" not in err, err[-3000:]
        assert commands.job_info(job).state == "CANCELLED"
        scope = run.home / "slurm" / "rendezvous" / UserRun.cluster_id(proc)
        assert not list(scope.glob("a*/*")), f"records left: {list(scope.rglob('*'))}"
    assert_clean(slurm_cluster)


def test_invalid_settings_fail_before_submission(
    slurm_cluster: slurmcluster.LocalCluster, user_run: UserRun
) -> None:
    before = commands.partitions()
    bad_partition = user_run.deploy(job_config().replace('"debug"', '"nosuch"'))
    assert "unknown Slurm partition 'nosuch'; available: debug" in bad_partition["error"]
    too_big = user_run.deploy(job_config(nodes=5))
    assert "asks for 5 nodes but partition 'debug' has only 3" in too_big["error"]
    no_image = user_run.deploy(f'container = "{user_run.root}/nope.sif"\n' + job_config())
    assert "container image not found" in no_image["error"]
    zero = user_run.deploy(job_config(nodes=0))
    assert "nodes" in zero["error"]
    for outcome in (bad_partition, too_big, no_image, zero):
        assert outcome["_rc"] != 0 and "Traceback" not in outcome["_stderr"]
    assert not (user_run.home / "slurm" / "jobs").exists() or not list(
        (user_run.home / "slurm" / "jobs").glob("*/slurm-*.out")
    ), "a job was submitted"
    assert commands.partitions() == before


def test_worker_node_killed(slurm_cluster: slurmcluster.LocalCluster, user_run: UserRun) -> None:
    """node3 dies mid-run (slurmd and all its processes): the job still completes every
    task on the surviving nodes and reports the lost rank."""
    proc = user_run.start(job_config(tasks=60, seconds=1.0))
    try:
        job = wait_running(user_run, tasks_done=1)
        slurmcluster.kill_node("node3")
        outcome = UserRun.finish(proc, timeout=600)
    finally:
        slurmcluster.revive_node("node3")
    assert outcome["exit_code"] == 0, outcome["_stdout"][-6000:]
    assert outcome["lost_ranks"] == [2], outcome
    assert collected_result(outcome)["tasks_done"] == 60
    assert job
    # Only the killed node's own scratch dir (rank 2 of this job) may remain.
    assert_clean(slurm_cluster, crashed=f"sy-{job}-2")


def test_requeued_job_starts_clean(
    slurm_cluster: slurmcluster.LocalCluster, user_run: UserRun
) -> None:
    """``scontrol requeue`` mid-run: attempt 1 gets its own rendezvous scope, ignores
    attempt 0's records (its head address is dead) and completes the workload."""
    # The job alone, launched without deploy's preparations (no TLS authority is made).
    body = "tls = false\n" + job_config(tasks=40, seconds=1.0, slurm="requeue = true\n")
    cfg = user_run.config(body)
    out = subprocess.run(
        as_user([str(CI_PYTHON), str(HERE / "submit_as_user.py"), str(cfg)], user_run.env),
        capture_output=True,
        text=True,
        cwd=user_run.root,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    job = json.loads(out.stdout.strip().splitlines()[-1])
    scope = Path(job["rendezvous"].removeprefix("file://")) / job["cluster_id"]
    _wait_phase(scope / "a0" / "status.json", "running")
    old_head = json.loads((scope / "a0" / "head.json").read_text())
    subprocess.run(["scontrol", "requeue", job["job_id"]], check=True)
    deadline = time.monotonic() + 420
    while not (info := commands.job_info(job["job_id"])).finished and time.monotonic() < deadline:
        time.sleep(0.5)
    assert info.state == "COMPLETED" and info.exit_code == 0, info
    assert info.restarts == 1
    new_head = json.loads((scope / "a1" / "head.json").read_text())
    assert new_head["attempt"] == 1 and new_head["nonce"] != old_head["nonce"]
    assert not (scope / "a0").exists(), "attempt 0's records were not cleaned up"
    done = json.loads((scope / "a1" / "done.json").read_text())
    assert done["exit_code"] == 0
    sealed = open_rendezvous(job["rendezvous"], job["cluster_id"], 1, job["launch_key"])
    assert json.loads(sealed.get_result() or b"{}")["tasks_done"] == 40
    log = Path(job["log"]).read_text()
    assert "attempt 0" in log and "attempt 1" in log  # --open-mode=append kept both
    assert_clean(slurm_cluster)


def test_head_node_lost(slurm_cluster: slurmcluster.LocalCluster, user_run: UserRun) -> None:
    """node1 (rank 0, the batch host) dies mid-run: the deploy fails with a clear reason,
    keeps no half-written result, and nothing is left on the surviving nodes."""
    proc = user_run.start(job_config(tasks=400, seconds=1.0))
    try:
        job = wait_running(user_run)
        slurmcluster.kill_node("node1")
        outcome = UserRun.finish(proc, timeout=600)
    finally:
        slurmcluster.revive_node("node1")
    # One shape whatever the timing: an outcome (not an exception) whose message says
    # why, carried from what the Slurm target knows.
    assert "error" not in outcome, outcome
    assert outcome["exit_code"] != 0, outcome
    assert "lost its head node node1" in outcome["message"], outcome
    assert "Traceback" not in outcome["_stderr"]
    assert not list(user_run.results.glob("*/result.json"))
    # No process survives; scratch dirs of this aborted job may (known gap: the workers
    # are killed after KillWait while their Ray still waits for the dead head), and
    # none of any other job.
    assert job
    assert_clean(slurm_cluster, crashed=f"sy-{job}-[012]")


def _wait_phase(status: Path, phase: str, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if json.loads(status.read_text())["phase"] == phase:
                return
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(0.2)
    raise AssertionError(f"{status} never reached phase {phase!r}")


@pytest.fixture
def named_runs() -> Iterator[Callable[[str], UserRun]]:
    """Runs of the CI user, each in a dir of its own named after its role; all removed
    (dir and SYNDEO_HOME) once the test ends, however it ends."""
    made: list[UserRun] = []

    def make(name: str) -> UserRun:
        root = Path(f"/home/syndeo-ci/t-{uuid.uuid4().hex[:8]}-{name}")
        root.mkdir(mode=0o700)
        pw = pwd.getpwnam("syndeo-ci")
        os.chown(root, pw.pw_uid, pw.pw_gid)
        made.append(UserRun(root))
        return made[-1]

    yield make
    for run in made:
        run.remove()


def test_the_testbed_is_locked_while_in_use(slurm_cluster: slurmcluster.LocalCluster) -> None:
    # Another checkout's session would wait instead of reconfiguring this cluster.
    assert lock_is_held(SLURM_TESTBED_LOCK)


def test_your_program_its_module_and_its_packages_on_slurm(
    slurm_cluster: slurmcluster.LocalCluster, user_run: UserRun
) -> None:
    """Issue 36 on Slurm: a program of the user's own, its module imported by tasks on
    both nodes from the shared work dir (the fast path: nothing packed), and `typer`
    from its requirements.txt installed on every node from the launcher's wheels."""
    write_project(user_run.root)
    for path in [user_run.root, *user_run.root.rglob("*")]:
        give_to_ci_user(path)
    body = (
        'target = "slurm"\nnodes = 2\ncpus_per_node = 1\njoin_timeout_s = 180\n'
        'run = "python prog.py"\n[slurm]\npartition = "debug"\ntime = "00:10:00"\n'
    )
    proc = user_run.start(body)
    out, err = proc.communicate(timeout=420)
    assert proc.returncode == 0, err[-3000:]
    # The head's output as srun labels it: "0: <line>".
    lines = [re.sub(r"^\d+: ", "", ln) for ln in out.splitlines()]
    assert "hello from mylib" in lines, out[-2000:]
    assert next(ln for ln in lines if ln.startswith("NODES")) == "NODES 2"
    driver = next(ln for ln in lines if ln.startswith("DRIVER")).split()
    assert driver[1] == str(user_run.root)  # the shared path itself
    tasks = [ln.split() for ln in lines if ln.startswith("TASK")]
    assert len(tasks) == 6 and all("/pylib/typer/" in t[3] for t in tasks), tasks
    assert_clean(slurm_cluster)
