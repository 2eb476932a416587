"""Deployer permissions that cannot be turned into an admin's (issue 22, item 2).

AWS: the policy is evaluated (``tests/support/iam_eval.py``: IAM's documented logic;
neither moto nor anything installable here evaluates IAM conditions) for what a
deploy does and for each known escalation.  Google Cloud and Azure: their role files
are parsed for the forbidden shapes.  What the clouds themselves do with them is
verified only against the real clouds.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.iam_eval import Request, allowed, decide, fill

TF = Path(__file__).resolve().parents[2] / "terraform"
ACCOUNT, REGION = "123456789012", "us-east-1"
VALUES = {"ACCOUNT_ID": ACCOUNT, "REGION": REGION}
BOUNDARY_ARN = f"arn:aws:iam::{ACCOUNT}:policy/syndeo-node-boundary"
EC2 = f"arn:aws:ec2:{REGION}:{ACCOUNT}:"
OURS = {"syndeo-cluster": "aws-1"}


def _policy(name: str) -> dict[str, Any]:
    return fill(json.loads((TF / "aws" / name).read_text()), VALUES)


DEPLOYER = _policy("deployer-policy.json")
BOUNDARY = _policy("node-boundary-policy.json")


def _ctx(
    request_tags: dict[str, str] | None = None, resource_tags: dict[str, str] | None = None,
    extra: dict[str, str] | None = None,
) -> dict[str, str | list[str]]:  # fmt: skip
    ctx: dict[str, str | list[str]] = {"aws:RequestedRegion": REGION, **(extra or {})}
    for k, v in (request_tags or {}).items():
        ctx[f"aws:RequestTag/{k}"] = v
    if request_tags:
        ctx["aws:TagKeys"] = list(request_tags)
    for k, v in (resource_tags or {}).items():
        ctx[f"aws:ResourceTag/{k}"] = v
    return ctx


# What terraform/aws does as the deployer: each must be allowed.
NEEDED = [
    # invoke check / deploy's pre-flight: the instance types' vCPUs and their quotas.
    Request("ec2:DescribeInstanceTypes", "*"),
    Request("servicequotas:GetServiceQuota", f"arn:aws:servicequotas:{REGION}:{ACCOUNT}:ec2/L-x"),
    # ... and the deployer's own permissions (SimulatePrincipalPolicy on its role or user).
    Request("iam:SimulatePrincipalPolicy", f"arn:aws:iam::{ACCOUNT}:role/deployers"),
    Request("iam:SimulatePrincipalPolicy", f"arn:aws:iam::{ACCOUNT}:user/alice"),
    Request("ec2:CreateVpc", EC2 + "vpc/vpc-1", _ctx(OURS)),
    Request("ec2:CreateSubnet", EC2 + "subnet/subnet-1", _ctx(OURS)),
    Request("ec2:CreateSubnet", EC2 + "vpc/vpc-1", _ctx(OURS, OURS)),
    Request("ec2:CreateSecurityGroup", EC2 + "security-group/sg-1", _ctx(OURS)),
    Request("ec2:CreateSecurityGroup", EC2 + "vpc/vpc-1", _ctx(OURS, OURS)),
    Request("ec2:AuthorizeSecurityGroupIngress", EC2 + "security-group/sg-1", _ctx(OURS, OURS)),
    Request("ec2:AuthorizeSecurityGroupIngress", EC2 + "security-group-rule/sgr-1", _ctx(OURS)),
    Request("ec2:CreateTags", EC2 + "security-group-rule/sgr-1",
            _ctx(OURS, extra={"ec2:CreateAction": "AuthorizeSecurityGroupIngress"})),
    Request("ec2:RunInstances", EC2 + "instance/i-1", _ctx(OURS)),
    Request("ec2:RunInstances", EC2 + "volume/vol-1", _ctx(OURS)),
    Request("ec2:RunInstances", EC2 + "subnet/subnet-1", _ctx(OURS, OURS)),
    Request("ec2:RunInstances", EC2 + "security-group/sg-1", _ctx(OURS, OURS)),
    Request("ec2:RunInstances", f"arn:aws:ec2:{REGION}::image/ami-1", _ctx(OURS)),
    Request("ec2:RunInstances", EC2 + "network-interface/eni-1", _ctx(OURS)),
    Request("ec2:CreateTags", EC2 + "instance/i-1",
            _ctx(OURS, extra={"ec2:CreateAction": "RunInstances"})),
    Request("ec2:CreateTags", EC2 + "instance/i-1", _ctx({"Name": "x"}, OURS)),
    Request("ec2:ModifyInstanceAttribute", EC2 + "instance/i-1", _ctx(resource_tags=OURS)),
    Request("ec2:TerminateInstances", EC2 + "instance/i-1", _ctx(resource_tags=OURS)),
    Request("ec2:DeleteVpc", EC2 + "vpc/vpc-1", _ctx(resource_tags=OURS)),
    Request("iam:CreateRole", f"arn:aws:iam::{ACCOUNT}:role/syndeo-aws-1-x",
            {"iam:PermissionsBoundary": BOUNDARY_ARN}),
    Request("iam:PutRolePolicy", f"arn:aws:iam::{ACCOUNT}:role/syndeo-aws-1-x",
            {"iam:PermissionsBoundary": BOUNDARY_ARN}),
    Request("iam:PassRole", f"arn:aws:iam::{ACCOUNT}:role/syndeo-aws-1-x",
            {"iam:PassedToService": "ec2.amazonaws.com"}),
    Request("iam:CreateInstanceProfile", f"arn:aws:iam::{ACCOUNT}:instance-profile/syndeo-a"),
    Request("iam:DeleteRole", f"arn:aws:iam::{ACCOUNT}:role/syndeo-aws-1-x"),
    Request("s3:CreateBucket", "arn:aws:s3:::syndeo-0123456789ab"),
    Request("s3:PutObject", "arn:aws:s3:::syndeo-0123456789ab/syndeo/aws-1/claim.json"),
]  # fmt: skip

# Each a way the old policy let a deployer become more than a deployer.
ESCALATIONS = {
    "a role without the boundary (then any inline policy, passed to an instance)":
        Request("iam:CreateRole", f"arn:aws:iam::{ACCOUNT}:role/syndeo-admin"),
    "a role with some other boundary":
        Request("iam:CreateRole", f"arn:aws:iam::{ACCOUNT}:role/syndeo-admin",
                {"iam:PermissionsBoundary": f"arn:aws:iam::{ACCOUNT}:policy/AdminAccess"}),
    "an inline policy on a role without the boundary":
        Request("iam:PutRolePolicy", f"arn:aws:iam::{ACCOUNT}:role/syndeo-old"),
    "lifting a role's boundary":
        Request("iam:DeleteRolePermissionsBoundary", f"arn:aws:iam::{ACCOUNT}:role/syndeo-a-x"),
    "replacing a role's boundary":
        Request("iam:PutRolePermissionsBoundary", f"arn:aws:iam::{ACCOUNT}:role/syndeo-a-x",
                {"iam:PermissionsBoundary": BOUNDARY_ARN}),
    "rewriting the boundary policy":
        Request("iam:CreatePolicyVersion", BOUNDARY_ARN),
    "attaching AdministratorAccess":
        Request("iam:AttachRolePolicy", f"arn:aws:iam::{ACCOUNT}:role/syndeo-a-x",
                {"iam:PermissionsBoundary": BOUNDARY_ARN,
                 "iam:PolicyARN": "arn:aws:iam::aws:policy/AdministratorAccess"}),
    "passing a node role to Lambda":
        Request("iam:PassRole", f"arn:aws:iam::{ACCOUNT}:role/syndeo-a-x",
                {"iam:PassedToService": "lambda.amazonaws.com"}),
    "tagging someone else's instance as ours (then terminating it)":
        Request("ec2:CreateTags", EC2 + "instance/i-theirs", _ctx(OURS)),
    "moving our tag onto an instance tagged otherwise":
        Request("ec2:CreateTags", EC2 + "instance/i-theirs", _ctx(OURS, {"team": "x"})),
    "overwriting the cluster tag of one of ours":
        Request("ec2:CreateTags", EC2 + "instance/i-1", _ctx({"syndeo-cluster": "b"}, OURS)),
    "changing someone else's instance (user data, role)":
        Request("ec2:ModifyInstanceAttribute", EC2 + "instance/i-theirs", _ctx()),
    "opening someone else's security group":
        Request("ec2:AuthorizeSecurityGroupIngress", EC2 + "security-group/sg-theirs",
                _ctx(OURS)),
    "an untagged instance":
        Request("ec2:RunInstances", EC2 + "instance/i-2", _ctx()),
    "an instance in someone else's subnet":
        Request("ec2:RunInstances", EC2 + "subnet/subnet-theirs", _ctx(OURS)),
    "a subnet in someone else's VPC":
        Request("ec2:CreateSubnet", EC2 + "vpc/vpc-theirs", _ctx(OURS)),
    "terminating someone else's instance":
        Request("ec2:TerminateInstances", EC2 + "instance/i-theirs", _ctx()),
    "another region":
        Request("ec2:RunInstances", EC2.replace(REGION, "eu-west-1") + "instance/i-3",
                {**_ctx(OURS), "aws:RequestedRegion": "eu-west-1"}),
    "someone else's bucket":
        Request("s3:GetObject", "arn:aws:s3:::payroll/2026.csv"),
}  # fmt: skip


@pytest.mark.parametrize("req", NEEDED, ids=lambda r: f"{r.action} {r.resource.split(':')[-1]}")
def test_what_a_deploy_needs_is_allowed(req: Request) -> None:
    assert allowed(DEPLOYER, req), decide(DEPLOYER, req)


@pytest.mark.parametrize("what", sorted(ESCALATIONS))
def test_no_escalation_is_allowed(what: str) -> None:
    assert not allowed(DEPLOYER, ESCALATIONS[what]), what


def test_a_node_role_is_capped_by_its_boundary_whatever_its_policy() -> None:
    anything = {"Version": "2012-10-17",
                "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}  # fmt: skip
    node = [
        Request("s3:GetObject", "arn:aws:s3:::syndeo-0123456789ab/syndeo/aws-1/head.json"),
        Request("ssmmessages:OpenDataChannel", "*"),
    ]
    for req in node:
        assert allowed(anything, req, BOUNDARY), req
    for req in [
        Request("iam:CreateUser", f"arn:aws:iam::{ACCOUNT}:user/backdoor"),
        Request("ec2:RunInstances", EC2 + "instance/i-9"),
        Request("s3:GetObject", "arn:aws:s3:::payroll/2026.csv"),
        Request("ssm:GetParameter", f"arn:aws:ssm:{REGION}:{ACCOUNT}:parameter/db-password"),
        Request("sts:AssumeRole", f"arn:aws:iam::{ACCOUNT}:role/Admin"),
    ]:
        assert not allowed(anything, req, BOUNDARY), req


def test_the_module_sets_the_boundary_and_the_policy_names_it() -> None:
    iam = (TF / "aws" / "iam.tf").read_text()
    assert re.search(r"permissions_boundary\s*=\s*var\.permissions_boundary", iam)
    text = json.dumps(DEPLOYER)
    assert BOUNDARY_ARN in text
    # No statement grants iam:* or *:* anywhere.
    for s in DEPLOYER["Statement"]:
        actions = [s["Action"]] if isinstance(s["Action"], str) else s["Action"]
        assert not [a for a in actions if a in ("*", "iam:*", "ec2:*", "s3:*")], s["Sid"]


# ------------------------------------------------------------------ Google Cloud
def test_gcp_role_acts_as_no_service_account_and_can_claim_records() -> None:
    role = yaml.safe_load((TF / "gcp" / "deployer-role.yaml").read_text())
    perms = set(role["includedPermissions"])
    forbidden = {
        "iam.serviceAccounts.actAs", "iam.serviceAccounts.create", "iam.serviceAccounts.delete",
        "iam.serviceAccounts.setIamPolicy", "iam.serviceAccountKeys.create",
        "iam.serviceAccounts.getAccessToken", "iam.roles.create", "iam.roles.update",
        "resourcemanager.projects.setIamPolicy",
    }  # fmt: skip
    assert not perms & forbidden, perms & forbidden
    assert not [p for p in perms if "*" in p]
    # The launcher claims the cluster id with an object create (a --rendezvous gs:// of an
    # existing bucket failed at the claim without it).
    assert {"storage.objects.create", "storage.objects.get", "storage.objects.list"} <= perms
    # The binding's condition limits instances, buckets and objects to syndeo-*.
    cond = yaml.safe_load((TF / "gcp" / "deployer-condition.yaml").read_text())
    expr = re.sub(r"\s+", " ", cond["expression"])
    for kind in ("compute.googleapis.com/Instance", "storage.googleapis.com/Bucket",
                 "storage.googleapis.com/Object"):  # fmt: skip
        assert f'resource.type != "{kind}" ||' in expr, kind
    assert expr.count('startsWith("syndeo-")') == 1
    assert expr.count('startsWith("projects/_/buckets/syndeo-")') == 2
    assert " || " not in expr.replace('" ||', "")  # every clause is one (type, name) pair
    # The module attaches the given service account when there is one.
    iam = (TF / "gcp" / "iam.tf").read_text()
    assert "var.node_service_account != null ? var.node_service_account" in iam
    assert "count = var.node_service_account == null ? 1 : 0" in " ".join(iam.split())
    # What `check` reads first (gcp.py, gcpcheck.py): with the role alone it must not
    # end in "not checked" or, for the APIs, in a refusal.
    for perm in ("compute.machineTypes.get", "compute.regions.get",
                 "serviceusage.services.get", "compute.images.get"):  # fmt: skip
        assert perm in perms, perm


# ------------------------------------------------------------------ Azure
def test_azure_role_is_scoped_to_a_resource_group_and_its_assignments_conditioned() -> None:
    role = json.loads((TF / "azure" / "deployer-role.json").read_text())
    scopes = role["AssignableScopes"]
    assert scopes == ["/subscriptions/SUBSCRIPTION_ID/resourceGroups/RESOURCE_GROUP"]
    actions = set(role["Actions"])
    assert not [a for a in actions if a.endswith("/*") or a == "*"]
    assert not {"Microsoft.Resources/subscriptions/resourceGroups/write",
                "Microsoft.Resources/subscriptions/resourceGroups/delete",
                "Microsoft.Authorization/roleDefinitions/write",
                "Microsoft.Authorization/*/write"} & actions  # fmt: skip
    # What destroy and refresh read (missing before).
    assert {"Microsoft.Resources/subscriptions/resourceGroups/resources/read",
            "Microsoft.Storage/storageAccounts/fileServices/read"} <= actions  # fmt: skip
    # Role assignments only with the shipped condition: Storage Blob Data Contributor only.
    assert "Microsoft.Authorization/roleAssignments/write" in actions
    cond = (TF / "azure" / "deployer-assignment-condition.txt").read_text()
    guids = set(re.findall(r"\{([0-9a-f-]{36})\}", cond))
    assert guids == {"ba92f5b4-2d11-453d-a403-e96b0029c9fe"}  # Storage Blob Data Contributor
    for verb, side in (("write", "@Request"), ("delete", "@Resource")):
        assert f"ActionMatches{{'Microsoft.Authorization/roleAssignments/{verb}'}}" in cond
        assert f"{side}[Microsoft.Authorization/roleAssignments:RoleDefinitionId]" in cond
    # The module can deploy into the given group; the provider registers nothing.
    main = (TF / "azure" / "main.tf").read_text()
    assert 'data "azurerm_resource_group" "given"' in main
    files = ("bucket.tf", "iam.tf", "instances.tf", "network.tf")
    code = "\n".join((TF / "azure" / f).read_text() for f in files)
    assert "azurerm_resource_group.this" not in code
    # Wherever the provider is configured: the launcher's root and the example.
    for path in (
        TF / "azure" / "deploy" / "versions.tf",
        TF / "azure" / "examples" / "minimal" / "main.tf",
    ):
        text = " ".join(path.read_text().split())
        assert 'resource_provider_registrations = "none"' in text, path


# ------------------------------------------------------------------ the evaluator itself
def test_the_evaluator_follows_iams_documented_rules() -> None:
    def pol(*statements: dict[str, Any]) -> dict[str, Any]:
        return {"Version": "2012-10-17", "Statement": list(statements)}

    allow = {"Effect": "Allow", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::b/*"}
    req = Request("s3:getobject", "arn:aws:s3:::b/k")  # actions match case-insensitively
    assert decide(pol(allow), req) == "Allow"
    deny = {"Effect": "Deny", "Action": "s3:*", "Resource": "*"}
    assert decide(pol(allow, deny), req) == "Deny"  # an explicit deny wins
    assert decide(pol(allow), Request("s3:PutObject", "arn:aws:s3:::b/k")) == "ImplicitDeny"
    # A condition key absent from the request: plain operators fail, negated ones hold,
    # ForAllValues holds, ForAnyValue fails, Null "true" holds.
    for op, holds in (("StringEquals", False), ("StringNotEquals", True),
                      ("ForAllValues:StringEquals", True), ("ForAnyValue:StringEquals", False),
                      ("StringEqualsIfExists", True)):  # fmt: skip
        s = {**allow, "Condition": {op: {"aws:TagKeys": "x"}}}
        assert (decide(pol(s), req) == "Allow") is holds, op
    null = {**allow, "Condition": {"Null": {"aws:ResourceTag/t": "false"}}}
    assert decide(pol(null), req) == "ImplicitDeny"
    assert decide(pol(null), Request(req.action, req.resource, {"aws:ResourceTag/t": "v"})) \
        == "Allow"  # fmt: skip
    # Every key of every operator must hold (AND); any of a key's values may (OR).
    both = {**allow, "Condition": {"StringEquals": {"a": ["1", "2"], "b": "3"}}}
    assert decide(pol(both), Request(req.action, req.resource, {"a": "2", "b": "3"})) == "Allow"
    assert decide(pol(both), Request(req.action, req.resource, {"a": "2", "b": "4"})) \
        == "ImplicitDeny"  # fmt: skip
    # A boundary caps the identity policy.
    assert not allowed(pol(allow), req, boundary=pol({**allow, "Resource": "arn:aws:s3:::c/*"}))


# ------------------------------------------------------------------ egress (item 14)
def test_egress_to_the_object_store_reaches_the_clusters_bucket_only_where_it_can() -> None:
    # AWS: the S3 gateway endpoint's policy names the rendezvous bucket only.
    aws_net = (TF / "aws" / "network.tf").read_text()
    assert 'Resource  = ["arn:aws:s3:::${local.bucket}", "arn:aws:s3:::${local.bucket}/*"]' \
        in aws_net  # fmt: skip
    # Azure: the subnet's service endpoint carries a policy naming the cluster's account
    # (the NSG's Storage tag alone is every account in the region).
    net = (TF / "azure" / "network.tf").read_text()
    assert re.search(
        r"service_endpoint_policy_ids\s*=\s*\[azurerm_subnet_service_endpoint_storage_policy"
        r"\.nodes\.id\]", net
    )  # fmt: skip
    assert re.search(r"service_resources\s*=\s*\[local\.storage_account_arm_id\]", net)
    main = (TF / "azure" / "main.tf").read_text()
    assert "providers/Microsoft.Storage/storageAccounts/${local.storage_account}" in main
    role = json.loads((TF / "azure" / "deployer-role.json").read_text())
    assert "Microsoft.Network/serviceEndpointPolicies/join/action" in role["Actions"]
    # Google Cloud: no per-bucket egress control without VPC Service Controls; the gap
    # is stated where the network is described.
    gcp = (TF / "gcp" / "README.md").read_text()
    assert "**Gap:** Private Google Access reaches every Google API and every bucket" in gcp
    assert "VPC Service Controls" in gcp
