"""Following demand on the emulated AWS when a VM fails: an instance the watcher started
for Ray's autoscaler is stopped before its node joins (a machine that failed at boot,
capacity taken back).  The watcher sees it in EC2's instance state, says so, starts a
successor after the group's backoff, and the job that asked for it runs to its end."""

from __future__ import annotations

import re
import subprocess
import time
import uuid

import boto3
import pytest

from testbeds import awsemu
from testbeds.users import give_to_ci_user
from tests.aws.conftest import AwsUser, failed
from tests.aws.leaks import everything
from tests.aws.test_lifecycle import _config, _instances, _taken_down

pytestmark = [pytest.mark.aws, pytest.mark.slow]

# Two one-CPU tasks on two machines: the head alone cannot hold them, so Ray's
# autoscaler asks for a VM of group `cpu`.
WIDE = """\
import ray
from ray.util.placement_group import placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy as Bundle
ray.init()
pg = placement_group([{"CPU": 1}] * 2, strategy="STRICT_SPREAD")
ray.get(pg.ready(), timeout=600)

@ray.remote(num_cpus=1)
def where():
    return ray.get_runtime_context().get_node_id()

found = ray.get([where.options(scheduling_strategy=Bundle(pg, i)).remote() for i in range(2)])
print("ran on", len(set(found)), "nodes", flush=True)
"""


def _first_grown(admin: awsemu.State, cid: str, timeout: float) -> tuple[int, str]:
    deadline = time.monotonic() + timeout
    while not (grown := {r: i for r, i in _instances(admin, cid).items() if r != 0}):
        assert time.monotonic() < deadline, "the watcher started no VM for the job"
        time.sleep(0.5)
    return min(grown.items())


def _state(admin: awsemu.State, iid: str) -> str:
    ec2 = boto3.client("ec2", endpoint_url=admin.endpoint, region_name=admin.region)
    found = ec2.describe_instances(InstanceIds=[iid])["Reservations"]
    return str(found[0]["Instances"][0]["State"]["Name"]) if found else "gone"


def test_an_instance_stopped_before_its_node_joins_is_seen_and_started_again(
    aws_user: AwsUser, admin: awsemu.State, shared_bucket: str
) -> None:
    # A start clock far longer than the test: only EC2's word can tell in time.
    groups = '[[groups]]\nname = "cpu"\nmax_nodes = 1\nstart_timeout_s = 3600\n'
    cfg = _config(aws_user, shared_bucket, groups)
    cid = f"aws-sf-{uuid.uuid4().hex[:6]}"
    job_dir = aws_user.root / "wide"
    job_dir.mkdir()
    (job_dir / "wide.py").write_text(WIDE)
    for path in (job_dir, *job_dir.iterdir()):
        give_to_ci_user(path)
    with _taken_down(aws_user, cid):
        res = aws_user.invoke(
            *("up", "--config", cfg, "--cluster-id", cid, "--idle-timeout", "30s")
        )
        assert res.returncode == 0, failed(res)
        # Its output to a file: a pipe nobody reads while the test waits could fill.
        output = aws_user.root / "submit.out"
        with output.open("w") as sink:
            job = subprocess.Popen(
                aws_user.argv(
                    *("submit", "--cluster-id", cid, "--workdir", str(job_dir), "--follow"),
                    *("--", "python", "wide.py"),
                ),
                stdout=sink,
                stderr=subprocess.STDOUT,
                text=True,
                cwd=aws_user.root,
                start_new_session=True,
            )
        try:
            rank, iid = _first_grown(admin, cid, 300)
            # The fault: EC2 stops the VM before its node has joined.
            ec2 = boto3.client("ec2", endpoint_url=admin.endpoint, region_name=admin.region)
            ec2.stop_instances(InstanceIds=[iid], Force=True)
            job.wait(timeout=900)
        finally:
            if job.poll() is None:
                job.kill()
                job.wait()
        out = output.read_text()
        assert job.returncode == 0 and "ran on 2 nodes" in out, out[-6000:]
        said = (aws_user.home / "clusters" / cid / "watch.log").read_text()
        ended = re.search(
            rf"group cpu: rank {rank} ended before it joined: "
            rf"EC2 lists its instance {iid} as (stopping|stopped)",
            said,
        )
        assert ended, said
        assert "group cpu: next start in" in said[ended.end() :], said
        # The successor is another rank, and its apply removed what was left of the
        # stopped VM: EC2 no longer lists it as stopped.
        successor = [r for r in _instances(admin, cid) if r not in (0, rank)]
        assert successor and successor[0] > rank, said
        assert _state(admin, iid) in ("terminated", "shutting-down", "gone"), said
    assert [e for e in everything(admin) if e != f"bucket {shared_bucket}"] == []
