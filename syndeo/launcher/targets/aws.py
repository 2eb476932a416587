"""AWS: ``terraform/aws`` (private VPC, S3 rendezvous bucket, prefix-scoped role)."""

from __future__ import annotations

import os
from typing import Any

from syndeo.core.errors import ConfigError, TargetError
from syndeo.launcher.spec import ClusterSpec, Launched
from syndeo.launcher.targets.cloud import CloudTarget

# The tag packer/cloud gives an AMI: the sha256 of the SIF baked into it.
DIGEST_TAG = "syndeo-image-digest"
# What terraform/aws names after the cluster (``syndeo-<id>…``) and tags with
# ``syndeo-cluster = <id>`` (provider default_tags), by the API that lists it.
_TAGGED_EC2 = (
    ("describe_instances", "Reservations", "InstanceId", "instance"),
    ("describe_network_interfaces", "NetworkInterfaces", "NetworkInterfaceId", "network interface"),
    ("describe_security_groups", "SecurityGroups", "GroupId", "security group"),
    ("describe_vpcs", "Vpcs", "VpcId", "VPC"),
    ("describe_subnets", "Subnets", "SubnetId", "subnet"),
    ("describe_route_tables", "RouteTables", "RouteTableId", "route table"),
    ("describe_vpc_endpoints", "VpcEndpoints", "VpcEndpointId", "VPC endpoint"),
)
# States in which a listed thing is on its way out (it costs nothing and goes by itself).
_GONE = ("terminated", "shutting-down", "deleted", "deleting")


class AwsTarget(CloudTarget):
    name = "aws"
    module = "aws"
    replaces_lost = True
    node_resource = "aws_instance.node"
    scheme = "s3"
    own = ("permissions_boundary",)

    def machine_summary(self, spec: ClusterSpec) -> dict[str, Any]:
        summary = super().machine_summary(spec)
        # Not AWS itself (an emulator, a private endpoint): the machines were not of
        # this type, so `invoke compare` must not take the run as a measurement of it.
        endpoint = os.environ.get("AWS_ENDPOINT_URL_EC2") or os.environ.get("AWS_ENDPOINT_URL")
        if endpoint:
            summary["api_endpoint"] = endpoint
        return summary

    def _client(self, service: str, region: str | None = None) -> Any:
        import boto3

        return boto3.client(service, region_name=region or self.settings.region)

    def check_credentials(self) -> str:
        """Before anything is created: who we are, and that the image and the instance
        type exist in the region (a bad one would fail the apply half-way)."""
        import boto3
        from botocore.exceptions import BotoCoreError, ClientError

        if boto3.session.Session().get_credentials() is None:
            raise ConfigError(
                "aws: no AWS credentials found (aws configure / aws sso login, or "
                "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, or AWS_PROFILE)"
            )
        s = self.settings
        try:
            who = str(self._client("sts").get_caller_identity().get("Arn", "?"))
        except (BotoCoreError, ClientError) as exc:
            raise ConfigError(f"aws: the credentials found are not accepted: {_why(exc)}") from None
        ec2 = self._client("ec2")
        try:
            images = ec2.describe_images(ImageIds=[s.image])["Images"]
        except ClientError as exc:
            images = []
            if _code(exc) not in ("InvalidAMIID.NotFound", "InvalidAMIID.Malformed"):
                raise ConfigError(f"aws: cannot look up image {s.image}: {_why(exc)}") from None
        except BotoCoreError as exc:
            raise ConfigError(f"aws: cannot look up image {s.image}: {_why(exc)}") from None
        if images:
            tags = {t["Key"]: t["Value"] for t in images[0].get("Tags", [])}
            self.baked_digest = tags.get(DIGEST_TAG)
        else:
            raise ConfigError(
                f"aws: image {s.image} does not exist in {s.region} (an AMI is regional: "
                f"copy it there with `aws ec2 copy-image --source-region <its region> "
                f"--source-image-id {s.image} --region {s.region} --name syndeo-node`)"
            )
        offered: list[str] = []
        for itype in sorted(set(self._instance_types())):
            where = {"LocationType": "availability-zone" if s.zone else "region"}
            values = [s.zone or s.region]
            try:
                found = ec2.describe_instance_type_offerings(
                    **where, Filters=[{"Name": "instance-type", "Values": [itype]},
                                      {"Name": "location", "Values": values}],
                )["InstanceTypeOfferings"]  # fmt: skip
            except (BotoCoreError, ClientError) as exc:
                raise ConfigError(f"aws: cannot look up instance types: {_why(exc)}") from None
            if not found:
                raise ConfigError(
                    f"aws: instance type {itype} is not offered in {values[0]}: pick another "
                    "type or region (`aws ec2 describe-instance-type-offerings`)"
                )
            offered.append(itype)
        digest = (
            f"SIF sha256 {self.baked_digest[:12]}" if self.baked_digest else "no SIF digest tag"
        )
        return (
            f"identity {who}; image {s.image} in {s.region} ({digest}); "
            f"{', '.join(offered)} offered in {s.zone or s.region}"
        )

    def _instance_types(self) -> list[str]:
        types = self._group_types(self.cfg.layout)
        return [t or self.settings.instance_type or "" for t in types.values()] or [
            self.settings.instance_type or ""
        ]

    def machine_gone(self, launched: Launched, rank: int) -> str | None:
        """EC2's word on the rank's instance: a terminated or stopped one is gone for good
        (a failed call answers nothing: the head's silence still decides)."""
        from botocore.exceptions import BotoCoreError, ClientError

        ids = launched.data.get("outputs", {}).get("node_ids", [])
        if rank >= len(ids):
            return None
        region = launched.data.get("machines", {}).get("region")
        try:
            found = self._client("ec2", region).describe_instances(InstanceIds=[ids[rank]])
        except (BotoCoreError, ClientError):
            return None
        states = [_state(i) for r in found["Reservations"] for i in r["Instances"]]
        if states and states[0] in (*_GONE, "stopping", "stopped"):
            return f"EC2 lists its instance {ids[rank]} as {states[0]}"
        return None

    def leaks(self, launched: Launched) -> list[str]:
        """Everything of the cluster AWS still lists, by tag and by name (after destroy)."""
        from botocore.exceptions import BotoCoreError, ClientError

        cid = launched.cluster_id
        tag = [{"Name": "tag:syndeo-cluster", "Values": [cid]}]
        # The region the cluster ran in (a new shell's `down` has no [aws] settings).
        region = launched.data.get("machines", {}).get("region")
        found: list[str] = []
        try:
            ec2 = self._client("ec2", region)
            for call, key, ident, what in _TAGGED_EC2:
                items = getattr(ec2, call)(Filters=tag)[key]
                if key == "Reservations":
                    items = [i for r in items for i in r["Instances"]]
                found += [
                    f"{what} {i[ident]}" for i in items
                    if _state(i) not in _GONE
                ]  # fmt: skip
            prefix = f"syndeo-{cid[:24]}-"
            iam = self._client("iam", region)
            found += [
                f"role {r['RoleName']}" for r in iam.list_roles()["Roles"]
                if r["RoleName"].startswith(prefix)
            ]  # fmt: skip
            found += [
                f"instance profile {p['InstanceProfileName']}"
                for p in iam.list_instance_profiles()["InstanceProfiles"]
                if p["InstanceProfileName"].startswith(prefix)
            ]
            if launched.data.get("owns_rendezvous"):
                bucket = launched.rendezvous.split("/")[2]
                buckets = self._client("s3", region).list_buckets()["Buckets"]
                found += [f"bucket {b['Name']}" for b in buckets if b["Name"] == bucket]
        except (BotoCoreError, ClientError) as exc:
            raise TargetError(
                f"aws: could not check what is left of cluster {cid}: {_why(exc)}"
            ) from None
        return found


def _state(item: dict[str, Any]) -> str:
    state = item.get("State", "")
    return str(state.get("Name", "") if isinstance(state, dict) else state).lower()


def _code(exc: Exception) -> str:
    return str(getattr(exc, "response", {}).get("Error", {}).get("Code", ""))


def _why(exc: Exception) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
