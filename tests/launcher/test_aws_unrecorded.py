"""What ``down`` removes on AWS that Terraform's state lacks: a node role and instance
profile IAM created although the apply failed (a create whose answer was lost, so the
provider's retry met "EntityAlreadyExists" and nothing was recorded).  Seen in a CI run
on the emulated AWS, where the role then failed that test and, left behind, the leak
check of every AWS test after it.  EC2 and IAM are moto_server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import pytest

from syndeo.launcher.config import load_config
from syndeo.launcher.spec import Launched
from syndeo.launcher.targets import get_target
from syndeo.launcher.targets.aws import AwsTarget
from syndeo.launcher.targets.tfexec import Terraform
from tests.support.moto import moto_aws

CID = "c-7f3a"
PREFIX = f"syndeo-{CID}-"
TRUST = json.dumps(
    {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Action": "sts:AssumeRole",
                "Principal": {"Service": "ec2.amazonaws.com"},
            }
        ],
    }
)
POLICY = json.dumps(
    {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": "s3:ListBucket", "Resource": "*"}],
    }
)


class _State:
    """Terraform as the destroy sees it: the ids its state records."""

    def __init__(self, recorded: dict[str, list[str]]) -> None:
        self.recorded = recorded

    def ids(self, resource_type: str) -> list[str]:
        return self.recorded.get(resource_type, [])


@pytest.mark.objectstore
def test_a_role_and_profile_iam_made_but_the_state_lacks_are_removed_before_destroy(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import boto3

    with moto_aws(monkeypatch, tmp_path / "moto"):
        iam = boto3.client("iam", region_name="us-east-1")

        def role(name: str, cluster: str | None) -> None:
            tags = [{"Key": "syndeo-cluster", "Value": cluster}] if cluster else []
            iam.create_role(RoleName=name, AssumeRolePolicyDocument=TRUST, Tags=tags)
            iam.put_role_policy(
                RoleName=name, PolicyName="syndeo-rendezvous", PolicyDocument=POLICY
            )

        lost = PREFIX + "20261129084017720400000001"  # made, answer lost: not recorded
        recorded = PREFIX + "20261129084017720400000002"  # the state's own: destroy's
        foreign = PREFIX + "someone-elses"  # our prefix, not our tag: never touched
        role(lost, CID)
        role(recorded, CID)
        role(foreign, None)
        iam.create_instance_profile(
            InstanceProfileName=lost, Tags=[{"Key": "syndeo-cluster", "Value": CID}]
        )
        iam.add_role_to_instance_profile(InstanceProfileName=lost, RoleName=lost)
        launched = Launched.model_validate(
            {
                "target": "aws",
                "cluster_id": CID,
                "rendezvous": "s3://bucket/syndeo",
                "started_at": 0.0,
                "part": {
                    "target": "aws",
                    "module_dir": "-",
                    "workspace": "-",
                    "join_timeout": 60.0,
                    "machines": {"region": "us-east-1"},
                },
            }
        )
        said: list[str] = []
        cfg = load_config(None, target="aws", nodes=1, rendezvous=None)
        target = cast(AwsTarget, get_target(cfg, echo=said.append))
        tf = _State({"aws_iam_role": [recorded]})
        target.before_destroy(launched, cast(Terraform, tf))
        roles = sorted(r["RoleName"] for r in iam.list_roles()["Roles"])
        profiles = iam.list_instance_profiles()["InstanceProfiles"]
        left = target.leaks(launched)
    assert roles == [recorded, foreign]
    assert profiles == []
    assert f"aws: removing role {lost} (created, never recorded)" in said
    assert f"aws: removing instance profile {lost} (created, never recorded)" in said
    assert sorted(left) == [f"role {recorded}", f"role {foreign}"]


LOST = (
    "terraform apply failed in deploy: creating IAM Role (syndeo-aws-up-435b10-2026112908401"
    "7720400000001): operation error IAM: CreateRole, https response error StatusCode: 409, "
    "RequestID: DWub0vGO9, EntityAlreadyExists: Role with name syndeo-aws-up-435b10-2026112908"
    "4017720400000001 already exists"
)


@pytest.mark.parametrize(
    ("error", "again"),
    [
        (LOST, True),
        ("EntityAlreadyExists: Instance Profile syndeo-c-7f3a-01 already exists.", True),
        ("EntityAlreadyExists: Role with name admins already exists", False),  # not ours
        ("creating EC2 Instance: api error InvalidAMIID.NotFound", False),
    ],
)
def test_an_apply_whose_iam_answer_was_lost_is_applied_once_more(
    monkeypatch: pytest.MonkeyPatch, error: str, again: bool
) -> None:
    from syndeo.launcher.targets.terraform import TerraformTarget
    from syndeo.launcher.targets.tfexec import TerraformError

    tries: list[int] = []

    def launch(self: TerraformTarget, spec: object, *, detach: bool = False) -> str:
        tries.append(1)
        if len(tries) == 1 or not again:
            raise TerraformError(error)
        return "launched"

    monkeypatch.setattr(TerraformTarget, "launch", launch)
    said: list[str] = []
    cfg = load_config(None, target="aws", nodes=1, rendezvous=None, aws={"zone": "us-east-1a"})
    target = cast(AwsTarget, get_target(cfg, echo=said.append))
    if again:
        assert target.launch(cast(Any, None)) == "launched"
        assert len(tries) == 2 and "but its answer was lost; applying again" in said[-1]
    else:
        with pytest.raises(TerraformError):
            target.launch(cast(Any, None))
        assert len(tries) == 1
