"""Following demand on the emulated AWS when a VM fails: an instance the watcher started
for Ray's autoscaler fails to boot and powers off before its node joins (the bed's
``fail-boot`` fault).  The watcher sees it in EC2's instance state, says so, removes the
stopped VM, starts a successor after the group's backoff, and the job that asked for it
runs to its end."""

from __future__ import annotations

import re
import subprocess
import uuid

import boto3
import pytest

from testbeds import awsemu
from testbeds.users import give_to_ci_user
from tests.aws.clusters import cluster_config, running_instances, taken_down
from tests.aws.conftest import AwsUser, failed
from tests.aws.leaks import everything
from tests.support.programs import spread

pytestmark = [pytest.mark.aws, pytest.mark.slow]

# Two one-CPU tasks on two machines: the head alone cannot hold them, so Ray's
# autoscaler asks for a VM of group `cpu`.
WIDE = spread(2, timeout_s=600)


def _state(admin: awsemu.State, iid: str) -> str:
    ec2 = boto3.client("ec2", endpoint_url=admin.endpoint, region_name=admin.region)
    found = ec2.describe_instances(InstanceIds=[iid])["Reservations"]
    return str(found[0]["Instances"][0]["State"]["Name"]) if found else "gone"


def test_an_instance_that_fails_to_boot_is_seen_removed_and_started_again(
    aws_user: AwsUser, admin: awsemu.State, shared_bucket: str
) -> None:
    # A start clock far longer than the test: only EC2's word can tell in time.
    groups = '[[groups]]\nname = "cpu"\nmax_nodes = 1\nstart_timeout_s = 3600\n'
    cfg = cluster_config(aws_user, shared_bucket, groups)
    cid = f"aws-sf-{uuid.uuid4().hex[:6]}"
    job_dir = aws_user.root / "wide"
    job_dir.mkdir()
    (job_dir / "wide.py").write_text(WIDE)
    for path in (job_dir, *job_dir.iterdir()):
        give_to_ci_user(path)
    with taken_down(aws_user, cid):
        res = aws_user.invoke(
            *("up", "--config", cfg, "--cluster-id", cid, "--idle-timeout", "30s")
        )
        assert res.returncode == 0, failed(res)
        # The fault: the next VM to boot fails to, and powers off 25 s after it turned
        # running (its apply has returned by then).
        fail_boot = admin.base / "fail-boot"
        fail_boot.write_text("1 25\n")
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
        log = aws_user.home / "clusters" / cid / "watch.log"
        try:
            job.wait(timeout=900)
        finally:
            if job.poll() is None:
                job.kill()
                job.wait()
            fail_boot.unlink(missing_ok=True)
        out = output.read_text()
        assert job.returncode == 0 and "nodes used 2" in out, out[-6000:]
        said = log.read_text()
        # Seen from EC2's instance state: the start clock is an hour.
        ended = re.search(
            r"group cpu: rank (\d+) ended before it joined: "
            r"EC2 lists its instance (i-\w+) as (stopping|stopped)",
            said,
        )
        assert ended, said
        rank, iid = int(ended.group(1)), ended.group(2)
        assert "group cpu: next start in" in said[ended.end() :], said
        # The successor is a new rank, and the shrink that dropped the failed rank
        # removed its stopped VM: EC2 no longer lists it as stopped.
        successor = [r for r in running_instances(admin, cid) if r not in (0, rank)]
        assert successor and successor[0] > rank, said
        assert _state(admin, iid) in ("terminated", "shutting-down", "gone"), said
    assert [e for e in everything(admin) if e != f"bucket {shared_bucket}"] == []
