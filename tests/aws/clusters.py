"""What the AWS tests share: a user's config file, the cluster taken down whatever the
test finds, the running instances by rank."""

from __future__ import annotations

import contextlib
import os
import textwrap
from collections.abc import Iterator

import boto3

from testbeds import awsemu
from tests.aws.conftest import AwsUser


def cluster_config(user: AwsUser, bucket: str, groups: str = "", aws: str = "") -> str:
    path = user.root / "aws.toml"
    path.write_text(
        textwrap.dedent(f"""\
        target = "aws"
        cpus_per_node = 1
        join_timeout_s = 240
        rendezvous = "s3://{bucket}/team"
        results_dir = "{user.results}"
        [bench]
        samples_per_cpu = 100
        repeats = 1
        [aws]
        instance_type = "c7i.xlarge"
        region = "{user.state.region}"
        image = "{user.state.image_id}"
        """)
        + aws
        + groups
    )
    os.chown(path, *ci_ids())
    return str(path)


def ci_ids() -> tuple[int, int]:
    import pwd

    pw = pwd.getpwnam("syndeo-ci")
    return pw.pw_uid, pw.pw_gid


@contextlib.contextmanager
def taken_down(user: AwsUser, cid: str) -> Iterator[None]:
    """Whatever the test finds, the cluster does not outlive it."""
    try:
        yield
    finally:
        if (user.home / "clusters" / cid / "launched.json").exists():
            user.invoke("down", "--cluster-id", cid)


def running_instances(state: awsemu.State, cid: str) -> dict[int, str]:
    """Running instances of cluster ``cid`` by rank."""
    ec2 = boto3.client("ec2", endpoint_url=state.endpoint, region_name=state.region)
    found = {}
    for r in ec2.describe_instances(
        Filters=[
            {"Name": "tag:syndeo-cluster", "Values": [cid]},
            {"Name": "instance-state-name", "Values": ["running"]},
        ]
    )["Reservations"]:
        for i in r["Instances"]:
            tags = {t["Key"]: t["Value"] for t in i.get("Tags", [])}
            found[int(tags["syndeo-rank"])] = i["InstanceId"]
    return found
