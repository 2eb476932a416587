"""Everything the emulated AWS still holds, whoever made it: a check independent of
the aws target's own leak scan (which looks by the cluster's tag and name only)."""

from __future__ import annotations

import time
from typing import Any

import boto3

from testbeds import awsemu, netns
from tests.aws.conftest import BASE


def client(state: awsemu.State, service: str) -> Any:
    return boto3.client(
        service,
        endpoint_url=state.endpoint,
        region_name=state.region,
        aws_access_key_id=state.access_key_id,
        aws_secret_access_key=state.secret_access_key,
    )


def everything(state: awsemu.State) -> list[str]:
    """What no cluster should leave: instances, networks, endpoints, roles, buckets."""
    ec2, iam, s3 = (client(state, s) for s in ("ec2", "iam", "s3"))
    vpcs = [v["VpcId"] for v in ec2.describe_vpcs()["Vpcs"] if not v.get("IsDefault")]
    mine = [{"Name": "vpc-id", "Values": vpcs}]
    found = [
        f"instance {i['InstanceId']} ({i['State']['Name']})"
        for r in ec2.describe_instances()["Reservations"]
        for i in r["Instances"]
        if i["State"]["Name"] != "terminated"
    ]
    found += [f"vpc {v}" for v in vpcs]
    if vpcs:
        found += [f"subnet {x['SubnetId']}" for x in ec2.describe_subnets(Filters=mine)["Subnets"]]
        found += [
            f"security group {g['GroupId']}"
            for g in ec2.describe_security_groups(Filters=mine)["SecurityGroups"]
        ]
        found += [
            f"route table {t['RouteTableId']}"
            for t in ec2.describe_route_tables(Filters=mine)["RouteTables"]
        ]
        found += [
            f"network interface {n['NetworkInterfaceId']}"
            for n in ec2.describe_network_interfaces(Filters=mine)["NetworkInterfaces"]
        ]
    found += [
        f"vpc endpoint {e['VpcEndpointId']}"
        for e in ec2.describe_vpc_endpoints()["VpcEndpoints"]
        if e.get("State", "").lower() not in ("deleted", "deleting")
    ]
    found += [
        f"role {r['RoleName']}"
        for r in iam.list_roles()["Roles"]
        if r["RoleName"].startswith("syndeo-")
    ]
    found += [
        f"instance profile {p['InstanceProfileName']}"
        for p in iam.list_instance_profiles()["InstanceProfiles"]
        if p["InstanceProfileName"].startswith("syndeo-")
    ]
    found += [f"bucket {b['Name']}" for b in s3.list_buckets()["Buckets"]]
    return found


def _instances_gone(state: awsemu.State) -> list[str]:
    """Machines the emulator still runs (they go within a poll of the terminate)."""
    _, _, prefix = awsemu.bed_names(BASE)
    deadline = time.monotonic() + 15
    while netns.list_netns(prefix) and time.monotonic() < deadline:
        time.sleep(0.2)
    return netns.list_netns(prefix)


def assert_nothing_left(state: awsemu.State) -> None:
    assert everything(state) == [], "left in the emulated AWS"
    assert _instances_gone(state) == [], "emulated machines still running"
