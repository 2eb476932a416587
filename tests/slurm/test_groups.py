"""Node groups on the real local Slurm cluster, brought up once and checked several ways.

The cluster: partition ``debug`` (node1-3) and partition ``gpu`` (node4, gres gpu:1 whose
"device" is /dev/null, so Ray sees one logical GPU there).  The CI user runs ``syndeo up``
with three groups -- the head, ``cpu`` and ``gpu`` (``min_nodes = 0``; its job submitted
held, and released only once the head has started without it) -- each its own job, then drives the
cluster from a job step in the head's allocation (a Ray driver must run on a node of the
cluster), grows it, cancels a group's job, and takes it down.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from syndeo.launcher.targets.slurm import commands
from testbeds import slurmcluster
from testbeds.users import CI_PYTHON, CI_USER, UserRun, as_user, give_to_ci_user
from tests.slurm.conftest import local_slurm, user_procs_on_nodes
from tests.support.slurm import ci_jobs, user_syndeo

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

PROBE = Path(__file__).resolve().parents[1] / "groups_probe.py"
JOIN_S = 35  # the head's deadline: then it starts with every group at its min_nodes


@pytest.fixture(scope="module")
def gpu_cluster() -> Iterator[slurmcluster.LocalCluster]:
    with local_slurm(gpu_nodes=1) as cluster:
        yield cluster


@pytest.fixture
def run(gpu_cluster: slurmcluster.LocalCluster) -> Iterator[UserRun]:
    root = Path(f"/home/{CI_USER}/g-{uuid.uuid4().hex[:8]}")
    root.mkdir(mode=0o700)
    give_to_ci_user(root)
    probe = root / "groups_probe.py"
    shutil.copy(PROBE, probe)
    give_to_ci_user(probe)
    run = UserRun(root)
    yield run
    run.remove()


def _config(run: UserRun, groups: str, join_s: float = 240) -> Path:
    return run.config(
        f'target = "slurm"\ncpus_per_node = 1\njoin_timeout_s = {join_s}\n'
        '[slurm]\npartition = "debug"\ntime = "00:15:00"\n' + groups
    )


def _show(job_id: str) -> dict[str, str]:
    out = subprocess.run(
        ["scontrol", "show", "job", "-o", job_id], capture_output=True, text=True, check=True
    ).stdout
    return dict(re.findall(r"(\w+)=(\S*)", out))


def _epoch(stamp: str) -> float:
    return time.mktime(time.strptime(stamp, "%Y-%m-%dT%H:%M:%S"))


def _probe(run: UserRun, launched: dict[str, Any], up_out: str, *ranks: str) -> dict[str, Any]:
    """Run the probe as a Ray driver in a job step of the head's job (on the head's node)."""
    env = dict(re.findall(r"(RAY_\w+)=(\S+)", up_out))
    head_job = str(launched["part"]["job_id"])
    node = _show(head_job)["BatchHost"]
    ip = next(n.ip for n in slurmcluster.load().nodes if n.name == node)  # type: ignore[union-attr]
    step = [
        "srun",
        f"--jobid={head_job}",
        "--overlap",
        "-N1",
        "-n1",
        f"--nodelist={node}",
        str(CI_PYTHON),
        str(run.root / "groups_probe.py"),
        *ranks,
    ]
    proc = subprocess.run(
        as_user(step, {**run.env, **env, "PROBE_NODE_IP": ip}),
        capture_output=True,
        text=True,
        cwd=run.root,
        timeout=180,
        check=False,
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("GROUPS-PROBE ")]
    assert lines, f"probe failed (rc {proc.returncode}): {proc.stderr[-3000:]}"
    out: dict[str, Any] = json.loads(lines[-1].removeprefix("GROUPS-PROBE "))
    return out


def _status(run: UserRun, cluster_id: str) -> dict[str, Any]:
    path = run.home / "slurm" / "rendezvous" / cluster_id / "a0" / "status.json"
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def _wait(pred: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


def test_bad_groups_are_refused_before_any_submit(
    gpu_cluster: slurmcluster.LocalCluster, run: UserRun
) -> None:
    cases = {
        '[[groups]]\nname = "cpu"\nnodes = 4\n': (
            "group 'cpu': the job asks for 4 nodes but partition 'debug' has only 3"
        ),
        '[[groups]]\nname = "gpu"\ngpus_per_node = 1\n': (
            "group 'gpu' asks for 1 GPU(s) per node but partition 'debug' has no 'gpu' resources"
        ),
        '[[groups]]\nname = "gpu"\ngpus_per_node = 2\nslurm = { partition = "gpu" }\n': (
            "group 'gpu' asks for 1 node(s) with 2 GPU(s) each but partition 'gpu' has 0 such"
        ),
    }
    for groups, message in cases.items():
        proc = user_syndeo(run, "deploy", "--config", str(_config(run, groups)))
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2 and len(lines) == 1 and message in lines[0], proc.stderr
    assert list(ci_jobs()) == []
    assert not list((run.home).glob("slurm/jobs/*/*.sbatch"))


def test_three_groups_late_join_placement_grow_and_cancel_one_group(
    gpu_cluster: slurmcluster.LocalCluster, run: UserRun
) -> None:
    # --exclusive: one syndeo node per Slurm node (each its own IP), as on a real site.
    groups = (
        '[[groups]]\nname = "head"\nslurm = { extra_sbatch = ["--exclusive"] }\n'
        '[[groups]]\nname = "cpu"\nslurm = { extra_sbatch = ["--exclusive"] }\n'
        '[[groups]]\nname = "gpu"\ngpus_per_node = 1\nmin_nodes = 0\n'
        # Held until this test releases it: late by an event, not by a clock.
        'slurm = { partition = "gpu", extra_sbatch = ["--hold"] }\n'
    )
    cid = f"grp-{uuid.uuid4().hex[:6]}"
    cfg = _config(run, groups, join_s=JOIN_S)
    up = user_syndeo(run, "up", "--config", str(cfg), "--cluster-id", cid, timeout=400)
    try:
        assert up.returncode == 0, up.stderr[-3000:]
        launched = json.loads((run.home / "clusters" / cid / "launched.json").read_text())
        entries = launched["part"]["groups"]
        assert [(e["group"], e["rank_base"]) for e in entries] == [
            ("head", 0),
            ("cpu", 1),
            ("gpu", 2),
        ]
        head_job, cpu_job, gpu_job = (str(e["job_id"]) for e in entries)

        # Readiness: at the deadline every group had its min_nodes (gpu: 0), so the
        # head started serving without the gpu group, whose job was still pending...
        st = _status(run, cid)
        assert st["phase"] == "serving" and st["groups"]["gpu"] == [0, 1], st
        assert commands.job_info(gpu_job).state == "PENDING"
        head_log = run.home / "slurm" / "jobs" / cid / f"slurm-{head_job}.out"
        assert "starting with groups head 1/1, cpu 1/1, gpu 0/1 (min_nodes met)" in (
            head_log.read_text()
        )
        assert _show(gpu_job)["Reason"] == "JobHeldUser"
        # ...and the late group, released now, then joins the running head.
        released = time.time()
        subprocess.run(["scontrol", "release", gpu_job], check=True)
        _wait(
            lambda: _status(run, cid)["groups"] == {"head": [1, 1], "cpu": [1, 1], "gpu": [1, 1]},
            180,
            "the late gpu group to join",
        )
        head_start = _epoch(_show(head_job)["StartTime"])
        gpu_start = _epoch(_show(gpu_job)["StartTime"])
        # StartTime has whole seconds: the gpu job started after its release, after the head.
        assert head_start <= int(released) <= gpu_start, (head_start, released, gpu_start)

        # Placement with Ray's own API: num_gpus lands on the gpu node only; label
        # selectors land in their group.
        out = _probe(run, launched, up.stdout)
        assert out["groups"] == {"head": [0], "cpu": [1], "gpu": [2]}
        assert out["gpu_per_group"] == {"head": 0, "cpu": 0, "gpu": 1}
        assert [(t["group"], t["rank"]) for t in out["gpu_tasks"]] == [("gpu", "2")]
        assert {g: t["group"] for g, t in out["by_label"].items()} == {
            "head": "head",
            "cpu": "cpu",
            "gpu": "gpu",
        }

        # grow: one more cpu node (rank 3, its own job) joins; work then runs on it.
        grow = user_syndeo(
            run,
            "grow",
            "--cluster-id",
            cid,
            "--group",
            "cpu",
            "--nodes",
            "1",
            "--wait-s",
            "180",
        )
        assert grow.returncode == 0, grow.stderr[-3000:]
        launched = json.loads((run.home / "clusters" / cid / "launched.json").read_text())
        grown_job = str(launched["part"]["groups"][-1]["job_id"])
        assert launched["part"]["groups"][-1]["rank_base"] == 3
        out = _probe(run, launched, up.stdout, "3")
        assert out["groups"]["cpu"] == [1, 3]
        assert (out["by_rank"]["3"]["group"], out["by_rank"]["3"]["rank"]) == ("cpu", "3")

        # A job through the rendezvous: no job step and no route to the head needed.
        (run.root / "job").mkdir()
        (run.root / "job" / "printer.py").write_text(
            "import ray\nray.init()\nprint('cluster cpus', int(ray.cluster_resources()['CPU']))\n"
        )
        give_to_ci_user(run.root / "job")
        give_to_ci_user(run.root / "job" / "printer.py")
        job = user_syndeo(
            run,
            "submit",
            "--cluster-id",
            cid,
            "--workdir",
            str(run.root / "job"),
            "--follow",
            "--",
            "python",
            "printer.py",
        )
        assert job.returncode == 0, job.stdout[-2000:] + job.stderr[-2000:]
        assert "cluster cpus 4" in job.stdout and "succeeded" in job.stderr

        # Cancelling one group's job (the gpu group) leaves the rest running; shrink
        # removes the grown node the same way.  The head notices and keeps serving.
        commands.cancel(gpu_job)
        shrink = user_syndeo(run, "shrink", "--cluster-id", cid, "--group", "cpu", "--nodes", "1")
        assert shrink.returncode == 0 and grown_job in shrink.stderr, shrink.stderr[-2000:]
        _wait(
            lambda: commands.job_info(gpu_job).finished and commands.job_info(grown_job).finished,
            120,
            "the cancelled jobs to end",
        )
        _wait(
            lambda: _status(run, cid)["groups"] == {"head": [1, 1], "cpu": [1, 1], "gpu": [0, 1]},
            60,
            "the head to count the groups that shrank",
        )
        assert commands.job_info(head_job).state == "RUNNING"
        assert commands.job_info(cpu_job).state == "RUNNING"
        assert _status(run, cid)["phase"] == "serving"
        out = _probe(run, launched, up.stdout)
        assert out["groups"] == {"cpu": [1], "head": [0]} and out["gpu_tasks"] == []
        assert out["by_label"]["cpu"]["rank"] == "1"
        assert "lost node(s) of rank 2 (gpu)" in head_log.read_text()
    finally:
        down = user_syndeo(run, "down", "--cluster-id", cid)
    assert down.returncode == 0, down.stderr[-2000:]
    assert list(ci_jobs()) == []
    _wait(lambda: not user_procs_on_nodes(gpu_cluster), 30, "nothing left on the nodes")


# Two one-CPU tasks on two nodes at once: Ray's autoscaler on the head asks for a node
# of the `cpu` group, which the watcher submits as a one-node job.
SPREAD = """\
import ray
from ray.util.placement_group import placement_group
ray.init()
pg = placement_group([{"CPU": 1}] * 2, strategy="STRICT_SPREAD")
ray.get(pg.ready(), timeout=240)
print("nodes", len([n for n in ray.nodes() if n["Alive"]]), flush=True)
"""


def test_a_group_follows_demand_through_one_node_jobs(
    gpu_cluster: slurmcluster.LocalCluster, run: UserRun
) -> None:
    groups = (
        '[[groups]]\nname = "head"\nslurm = { extra_sbatch = ["--exclusive"] }\n'
        '[[groups]]\nname = "cpu"\nmax_nodes = 1\nslurm = { extra_sbatch = ["--exclusive"] }\n'
    )
    cid = f"scl-{uuid.uuid4().hex[:6]}"
    cfg = _config(run, groups)
    (run.root / "job").mkdir()
    (run.root / "job" / "spread.py").write_text(SPREAD)
    give_to_ci_user(run.root / "job")
    give_to_ci_user(run.root / "job" / "spread.py")
    up = user_syndeo(
        run, "up", "--config", str(cfg), "--cluster-id", cid, "--idle-timeout", "10s", timeout=400
    )
    try:
        assert up.returncode == 0, up.stderr[-3000:]
        assert len(list(ci_jobs())) == 1  # the group starts at its min_nodes (0): no job
        job = user_syndeo(
            run,
            *("submit", "--cluster-id", cid, "--workdir", str(run.root / "job")),
            *("--follow", "--", "python", "spread.py"),
        )
        assert job.returncode == 0, job.stdout[-2000:] + job.stderr[-2000:]
        assert "nodes 2" in job.stdout
        launched = json.loads((run.home / "clusters" / cid / "launched.json").read_text())
        added = [e for e in launched["part"]["groups"] if e["group"] == "cpu"]
        assert [(e["rank_base"], e["nodes"]) for e in added] == [(1, 1)]
        # The watcher goes (a closed laptop) before Ray lets the idle node go: the node
        # learns from Ray's GCS that its end is a release and ends by itself, cleanly.
        os.kill(int(launched["watcher"]["pid"]), signal.SIGKILL)
        node_job = str(added[0]["job_id"])
        _wait(lambda: commands.job_info(node_job).finished, 180, "the release")
        shown = _show(node_job)
        assert (shown["JobState"], shown["ExitCode"]) == ("COMPLETED", "0:0"), shown
        assert list(ci_jobs()) == [str(launched["part"]["job_id"])]
        st = _status(run, cid)
        assert st["phase"] == "serving" and st["nodes_lost"] == [], st
        watch_log = (run.home / "clusters" / cid / "watch.log").read_text()
        assert "group cpu: started" in watch_log, watch_log
    finally:
        down = user_syndeo(run, "down", "--cluster-id", cid)
    assert down.returncode == 0, down.stderr[-2000:]
    assert list(ci_jobs()) == []
