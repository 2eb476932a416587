"""Deployer permissions that cannot be turned into an admin's.

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
    request_tags: dict[str, str] | None = None,
    resource_tags: dict[str, str] | None = None,
    extra: dict[str, str] | None = None,
) -> dict[str, str | list[str]]:
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
    Request(
        "ec2:CreateTags",
        EC2 + "security-group-rule/sgr-1",
        _ctx(OURS, extra={"ec2:CreateAction": "AuthorizeSecurityGroupIngress"}),
    ),
    Request("ec2:RunInstances", EC2 + "instance/i-1", _ctx(OURS)),
    Request("ec2:RunInstances", EC2 + "volume/vol-1", _ctx(OURS)),
    Request("ec2:RunInstances", EC2 + "subnet/subnet-1", _ctx(OURS, OURS)),
    Request("ec2:RunInstances", EC2 + "security-group/sg-1", _ctx(OURS, OURS)),
    Request("ec2:RunInstances", f"arn:aws:ec2:{REGION}::image/ami-1", _ctx(OURS)),
    Request("ec2:RunInstances", EC2 + "network-interface/eni-1", _ctx(OURS)),
    Request(
        "ec2:CreateTags",
        EC2 + "instance/i-1",
        _ctx(OURS, extra={"ec2:CreateAction": "RunInstances"}),
    ),
    Request("ec2:CreateTags", EC2 + "instance/i-1", _ctx({"Name": "x"}, OURS)),
    Request("ec2:ModifyInstanceAttribute", EC2 + "instance/i-1", _ctx(resource_tags=OURS)),
    Request("ec2:TerminateInstances", EC2 + "instance/i-1", _ctx(resource_tags=OURS)),
    Request("ec2:DeleteVpc", EC2 + "vpc/vpc-1", _ctx(resource_tags=OURS)),
    Request(
        "iam:CreateRole",
        f"arn:aws:iam::{ACCOUNT}:role/syndeo-aws-1-x",
        {"iam:PermissionsBoundary": BOUNDARY_ARN},
    ),
    Request(
        "iam:PutRolePolicy",
        f"arn:aws:iam::{ACCOUNT}:role/syndeo-aws-1-x",
        {"iam:PermissionsBoundary": BOUNDARY_ARN},
    ),
    # The node role iam.tf creates carries the cluster tag and the boundary: RunInstances
    # and AddRoleToInstanceProfile pass it (iam:PassRole), destroy deletes it.
    Request(
        "iam:PassRole",
        f"arn:aws:iam::{ACCOUNT}:role/syndeo-aws-1-x",
        _ctx(resource_tags=OURS, extra={"iam:PassedToService": "ec2.amazonaws.com"}),
    ),
    Request("iam:CreateInstanceProfile", f"arn:aws:iam::{ACCOUNT}:instance-profile/syndeo-a"),
    Request("iam:AddRoleToInstanceProfile", f"arn:aws:iam::{ACCOUNT}:instance-profile/syndeo-a"),
    Request(
        "iam:DeleteRole",
        f"arn:aws:iam::{ACCOUNT}:role/syndeo-aws-1-x",
        {"iam:PermissionsBoundary": BOUNDARY_ARN},
    ),
    # A tag change on the role (the provider's update of `tags`), the cluster tag kept.
    Request(
        "iam:TagRole", f"arn:aws:iam::{ACCOUNT}:role/syndeo-aws-1-x", _ctx({"Name": "x"}, OURS)
    ),
    Request(
        "iam:UntagRole",
        f"arn:aws:iam::{ACCOUNT}:role/syndeo-aws-1-x",
        {**_ctx(resource_tags=OURS), "aws:TagKeys": ["Name"]},
    ),
    # After a destroy: what is left of the cluster (by name prefix), and a role or
    # instance profile IAM made but the state lacks (a create whose answer was lost),
    # removed with what IAM requires gone first.
    Request("iam:ListRoles", "*"),
    Request("iam:ListInstanceProfiles", "*"),
    Request("iam:GetRole", f"arn:aws:iam::{ACCOUNT}:role/syndeo-aws-1-x"),
    Request("iam:GetInstanceProfile", f"arn:aws:iam::{ACCOUNT}:instance-profile/syndeo-a"),
    Request("iam:ListInstanceProfilesForRole", f"arn:aws:iam::{ACCOUNT}:role/syndeo-aws-1-x"),
    Request(
        "iam:RemoveRoleFromInstanceProfile", f"arn:aws:iam::{ACCOUNT}:instance-profile/syndeo-a"
    ),
    Request("iam:DeleteInstanceProfile", f"arn:aws:iam::{ACCOUNT}:instance-profile/syndeo-a"),
    Request("iam:ListRolePolicies", f"arn:aws:iam::{ACCOUNT}:role/syndeo-aws-1-x"),
    Request(
        "iam:DeleteRolePolicy",
        f"arn:aws:iam::{ACCOUNT}:role/syndeo-aws-1-x",
        {"iam:PermissionsBoundary": BOUNDARY_ARN},
    ),
    Request("iam:ListAttachedRolePolicies", f"arn:aws:iam::{ACCOUNT}:role/syndeo-aws-1-x"),
    Request(
        "iam:DetachRolePolicy",
        f"arn:aws:iam::{ACCOUNT}:role/syndeo-aws-1-x",
        {"iam:PermissionsBoundary": BOUNDARY_ARN},
    ),
    # Terraform reads back its instances' attributes (user data among them).
    Request("ec2:DescribeInstanceAttribute", EC2 + "instance/i-1", _ctx(resource_tags=OURS)),
    Request("s3:CreateBucket", "arn:aws:s3:::syndeo-0123456789ab"),
    Request("s3:PutObject", "arn:aws:s3:::syndeo-0123456789ab/syndeo/aws-1/claim.json"),
]

# Each a way the old policy let a deployer become more than a deployer.
ESCALATIONS = {
    "a role without the boundary (then any inline policy, passed to an instance)": Request(
        "iam:CreateRole", f"arn:aws:iam::{ACCOUNT}:role/syndeo-admin"
    ),
    "a role with some other boundary": Request(
        "iam:CreateRole",
        f"arn:aws:iam::{ACCOUNT}:role/syndeo-admin",
        {"iam:PermissionsBoundary": f"arn:aws:iam::{ACCOUNT}:policy/AdminAccess"},
    ),
    "an inline policy on a role without the boundary": Request(
        "iam:PutRolePolicy", f"arn:aws:iam::{ACCOUNT}:role/syndeo-old"
    ),
    "lifting a role's boundary": Request(
        "iam:DeleteRolePermissionsBoundary", f"arn:aws:iam::{ACCOUNT}:role/syndeo-a-x"
    ),
    "replacing a role's boundary": Request(
        "iam:PutRolePermissionsBoundary",
        f"arn:aws:iam::{ACCOUNT}:role/syndeo-a-x",
        {"iam:PermissionsBoundary": BOUNDARY_ARN},
    ),
    "rewriting the boundary policy": Request("iam:CreatePolicyVersion", BOUNDARY_ARN),
    "attaching AdministratorAccess": Request(
        "iam:AttachRolePolicy",
        f"arn:aws:iam::{ACCOUNT}:role/syndeo-a-x",
        {
            "iam:PermissionsBoundary": BOUNDARY_ARN,
            "iam:PolicyARN": "arn:aws:iam::aws:policy/AdministratorAccess",
        },
    ),
    "passing a node role to Lambda": Request(
        "iam:PassRole",
        f"arn:aws:iam::{ACCOUNT}:role/syndeo-a-x",
        {"iam:PassedToService": "lambda.amazonaws.com"},
    ),
    "tagging someone else's instance as ours (then terminating it)": Request(
        "ec2:CreateTags", EC2 + "instance/i-theirs", _ctx(OURS)
    ),
    "moving our tag onto an instance tagged otherwise": Request(
        "ec2:CreateTags", EC2 + "instance/i-theirs", _ctx(OURS, {"team": "x"})
    ),
    "overwriting the cluster tag of one of ours": Request(
        "ec2:CreateTags", EC2 + "instance/i-1", _ctx({"syndeo-cluster": "b"}, OURS)
    ),
    "changing someone else's instance (user data, role)": Request(
        "ec2:ModifyInstanceAttribute", EC2 + "instance/i-theirs", _ctx()
    ),
    "opening someone else's security group": Request(
        "ec2:AuthorizeSecurityGroupIngress", EC2 + "security-group/sg-theirs", _ctx(OURS)
    ),
    "an untagged instance": Request("ec2:RunInstances", EC2 + "instance/i-2", _ctx()),
    "an instance in someone else's subnet": Request(
        "ec2:RunInstances", EC2 + "subnet/subnet-theirs", _ctx(OURS)
    ),
    "a subnet in someone else's VPC": Request(
        "ec2:CreateSubnet", EC2 + "vpc/vpc-theirs", _ctx(OURS)
    ),
    "terminating someone else's instance": Request(
        "ec2:TerminateInstances", EC2 + "instance/i-theirs", _ctx()
    ),
    "another region": Request(
        "ec2:RunInstances",
        EC2.replace(REGION, "eu-west-1") + "instance/i-3",
        {**_ctx(OURS), "aws:RequestedRegion": "eu-west-1"},
    ),
    "someone else's bucket": Request("s3:GetObject", "arn:aws:s3:::payroll/2026.csv"),
    # Issue 33, item 3.  User data holds every cluster's launch key and other teams'
    # bootstrap secrets: only instances carrying the cluster tag.
    "reading an untagged instance's user data": Request(
        "ec2:DescribeInstanceAttribute", EC2 + "instance/i-theirs", _ctx()
    ),
    "reading user data in another region": Request(
        "ec2:DescribeInstanceAttribute",
        EC2.replace(REGION, "eu-west-1") + "instance/i-3",
        {**_ctx(resource_tags=OURS), "aws:RequestedRegion": "eu-west-1"},
    ),
    # A syndeo-* role made by someone else, without the boundary and the tag that only
    # CreateRole (boundary required) gives: never passed, deleted or tagged as ours.
    "passing a syndeo-* role without the boundary to an instance": Request(
        "iam:PassRole",
        f"arn:aws:iam::{ACCOUNT}:role/syndeo-old",
        _ctx(extra={"iam:PassedToService": "ec2.amazonaws.com"}),
    ),
    "deleting a syndeo-* role without the boundary": Request(
        "iam:DeleteRole", f"arn:aws:iam::{ACCOUNT}:role/syndeo-old"
    ),
    "deleting a syndeo-* role with another boundary": Request(
        "iam:DeleteRole",
        f"arn:aws:iam::{ACCOUNT}:role/syndeo-old",
        {"iam:PermissionsBoundary": f"arn:aws:iam::{ACCOUNT}:policy/AdminAccess"},
    ),
    "tagging an untagged syndeo-* role as ours (then passing it)": Request(
        "iam:TagRole", f"arn:aws:iam::{ACCOUNT}:role/syndeo-old", _ctx(OURS)
    ),
    "tagging an otherwise-tagged syndeo-* role as ours": Request(
        "iam:TagRole", f"arn:aws:iam::{ACCOUNT}:role/syndeo-old", _ctx(OURS, {"team": "x"})
    ),
    "moving a node role's cluster tag": Request(
        "iam:TagRole",
        f"arn:aws:iam::{ACCOUNT}:role/syndeo-aws-1-x",
        _ctx({"syndeo-cluster": "b"}, OURS),
    ),
}


@pytest.mark.parametrize("req", NEEDED, ids=lambda r: f"{r.action} {r.resource.split(':')[-1]}")
def test_what_a_deploy_needs_is_allowed(req: Request) -> None:
    assert allowed(DEPLOYER, req), decide(DEPLOYER, req)


@pytest.mark.parametrize("what", sorted(ESCALATIONS))
def test_no_escalation_is_allowed(what: str) -> None:
    assert not allowed(DEPLOYER, ESCALATIONS[what]), what


def test_a_role_goes_into_an_instance_profile_only_if_it_may_be_passed() -> None:
    """AddRoleToInstanceProfile's resource is the instance profile alone (Service
    Authorization Reference: instance-profile*); the role is checked as the iam:PassRole
    the API requires of its caller (IAM API reference, AddRoleToInstanceProfile).  So a
    syndeo-* role without the boundary goes into a profile only as far as PassRole lets
    it: not at all."""

    def add(role: str, role_tags: dict[str, str]) -> list[Request]:
        return [
            Request(
                "iam:AddRoleToInstanceProfile", f"arn:aws:iam::{ACCOUNT}:instance-profile/syndeo-a"
            ),
            Request(
                "iam:PassRole",
                f"arn:aws:iam::{ACCOUNT}:role/{role}",
                _ctx(resource_tags=role_tags, extra={"iam:PassedToService": "ec2.amazonaws.com"}),
            ),
        ]

    assert all(allowed(DEPLOYER, r) for r in add("syndeo-aws-1-x", OURS))
    assert not all(allowed(DEPLOYER, r) for r in add("syndeo-old", {}))
    assert not all(allowed(DEPLOYER, r) for r in add("syndeo-old", {"team": "x"}))


def test_a_node_role_is_capped_by_its_boundary_whatever_its_policy() -> None:
    anything = {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}],
    }
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
    # ... and the cluster tag, which iam:PassRole and iam:TagRole read (neither has the
    # iam:PermissionsBoundary key; CreateRole, which requires the boundary, is the only
    # way the deployer gives a role that tag).
    role = iam.split('resource "aws_iam_role" "nodes"', 1)[1].split("\n}\n", 1)[0]
    assert re.search(r"\n\s*tags\s*=\s*local\.tags\n", role)
    main = (TF / "aws" / "main.tf").read_text()
    assert re.search(r"syndeo-cluster\s*=\s*local\.cluster_id", main)
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
        "iam.serviceAccounts.actAs",
        "iam.serviceAccounts.create",
        "iam.serviceAccounts.delete",
        "iam.serviceAccounts.setIamPolicy",
        "iam.serviceAccountKeys.create",
        "iam.serviceAccounts.getAccessToken",
        "iam.roles.create",
        "iam.roles.update",
        "resourcemanager.projects.setIamPolicy",
    }
    assert not perms & forbidden, perms & forbidden
    assert not [p for p in perms if "*" in p]
    # The launcher claims the cluster id with an object create (a --rendezvous gs:// of an
    # existing bucket failed at the claim without it).
    assert {"storage.objects.create", "storage.objects.get", "storage.objects.list"} <= perms
    # The binding's condition limits instances, firewalls, networks, subnetworks, buckets
    # and objects to syndeo-* (test_gcp_condition_... evaluates it).
    expr = _gcp_condition()
    for kind in (
        "compute.googleapis.com/Instance",
        "compute.googleapis.com/Firewall",
        "compute.googleapis.com/Network",
        "compute.googleapis.com/Subnetwork",
        "storage.googleapis.com/Bucket",
        "storage.googleapis.com/Object",
    ):
        assert f'resource.type != "{kind}" ||' in expr, kind
    assert expr.count('startsWith("syndeo-")') == 4
    assert expr.count('startsWith("projects/_/buckets/syndeo-")') == 2
    assert " || " not in expr.replace('" ||', "")  # every clause is one (type, name) pair
    # The module attaches the given service account when there is one.
    iam = (TF / "gcp" / "iam.tf").read_text()
    assert "var.node_service_account != null ? var.node_service_account" in iam
    assert "count = var.node_service_account == null ? 1 : 0" in " ".join(iam.split())
    # What `check` reads first (gcp.py, gcpcheck.py): with the role alone it must not
    # end in "not checked" or, for the APIs, in a refusal.
    for perm in (
        "compute.machineTypes.get",
        "compute.regions.get",
        "serviceusage.services.get",
        "compute.images.get",
    ):
        assert perm in perms, perm


_CLAUSE = re.compile(
    r'\(resource\.type != "([^"]+)" \|\| '
    r'resource\.name(?:\.extract\("([^"]*)"\))?\.startsWith\("([^"]*)"\)\)'
)


def _gcp_condition() -> str:
    cond = yaml.safe_load((TF / "gcp" / "deployer-condition.yaml").read_text())
    return re.sub(r"\s+", " ", cond["expression"]).strip()


def _extract(name: str, template: str) -> str:
    """CEL ``extract`` as IAM Conditions use it: the text after the template's literal
    before ``{var}`` up to its literal after (or the end); "" if a literal is missing."""
    before, _, rest = template.partition("{")
    after = rest.partition("}")[2]
    start = name.find(before)
    if start < 0:
        return ""
    value = name[start + len(before) :]
    if after:
        end = value.find(after)
        value = value[:end] if end >= 0 else ""
    return value


def _gcp_allows(expr: str, resource_type: str, name: str) -> bool:
    """The condition for one resource, for the one shape it is written in: clauses
    ``(resource.type != T || resource.name[.extract(X)].startsWith(P))`` joined by
    ``&&``.  Anything else in the expression fails the test instead of being guessed."""
    clauses = _CLAUSE.findall(expr)
    rebuilt = " && ".join(
        f'(resource.type != "{kind}" || resource.name'
        + (f'.extract("{template}")' if template else "")
        + f'.startsWith("{prefix}"))'
        for kind, template, prefix in clauses
    )
    assert rebuilt == expr, "deployer-condition.yaml is not of the shape this test evaluates"
    for kind, template, prefix in clauses:
        if resource_type == kind:
            value = _extract(name, template) if template else name
            if not value.startswith(prefix):
                return False
    return True


def test_gcp_condition_holds_only_on_the_modules_own_network_firewalls_and_vms() -> None:
    """Issue 33, item 2: firewall rules, networks (compute.networks.updatePolicy, checked
    on the network a rule is added to) and subnetworks (compute.subnetworks.use, checked on
    the subnet a VM is put in) only of the names terraform/gcp gives them."""
    # The names the module gives (network.tf, instances.tf): all under local.name.
    main = (TF / "gcp" / "main.tf").read_text()
    assert re.search(r'\n\s*name\s*=\s*"syndeo-\$\{local\.cluster_id\}"', main)
    net = (TF / "gcp" / "network.tf").read_text()
    names = re.findall(r"\n\s*name\s*=\s*(\S+)", net)
    assert names == [
        "local.name",
        '"${local.name}-nodes"',
        '"${local.name}-ray"',
        '"${local.name}-admin-ssh"',
    ], names
    vms = (TF / "gcp" / "instances.tf").read_text()
    assert 'name         = "${local.name}-${each.key}"' in vms

    expr = _gcp_condition()
    p, r, z = "projects/p", "regions/us-central1", "zones/us-central1-a"
    ours = [
        ("compute.googleapis.com/Network", f"{p}/global/networks/syndeo-gcp-1"),
        ("compute.googleapis.com/Subnetwork", f"{p}/{r}/subnetworks/syndeo-gcp-1-nodes"),
        ("compute.googleapis.com/Firewall", f"{p}/global/firewalls/syndeo-gcp-1-ray"),
        ("compute.googleapis.com/Firewall", f"{p}/global/firewalls/syndeo-gcp-1-admin-ssh"),
        ("compute.googleapis.com/Instance", f"{p}/{z}/instances/syndeo-gcp-1-0"),
        ("storage.googleapis.com/Bucket", "projects/_/buckets/syndeo-0123456789ab"),
        (
            "storage.googleapis.com/Object",
            "projects/_/buckets/syndeo-0123456789ab/objects/syndeo/gcp-1/claim.json",
        ),
        # Types the condition does not name keep the role's grant (the baked image).
        ("compute.googleapis.com/Image", f"{p}/global/images/syndeo-node"),
    ]
    theirs = [
        ("compute.googleapis.com/Firewall", f"{p}/global/firewalls/default-allow-ssh"),
        ("compute.googleapis.com/Firewall", f"{p}/global/firewalls/prod-allow-db"),
        ("compute.googleapis.com/Network", f"{p}/global/networks/default"),
        ("compute.googleapis.com/Network", f"{p}/global/networks/prod"),
        ("compute.googleapis.com/Subnetwork", f"{p}/{r}/subnetworks/prod"),
        ("compute.googleapis.com/Subnetwork", f"{p}/{r}/subnetworks/default"),
        # A "syndeo-" further along the name is not the name.
        ("compute.googleapis.com/Subnetwork", f"{p}/{r}/subnetworks/prod-syndeo-x"),
        ("compute.googleapis.com/Instance", f"{p}/{z}/instances/prod-db"),
        ("storage.googleapis.com/Bucket", "projects/_/buckets/payroll"),
    ]
    for kind, name in ours:
        assert _gcp_allows(expr, kind, name), (kind, name)
    for kind, name in theirs:
        assert not _gcp_allows(expr, kind, name), (kind, name)


# ------------------------------------------------------------------ Azure
def test_azure_role_is_scoped_to_a_resource_group_and_its_assignments_conditioned() -> None:
    role = json.loads((TF / "azure" / "deployer-role.json").read_text())
    scopes = role["AssignableScopes"]
    assert scopes == ["/subscriptions/SUBSCRIPTION_ID/resourceGroups/RESOURCE_GROUP"]
    actions = set(role["Actions"])
    assert not [a for a in actions if a.endswith("/*") or a == "*"]
    assert (
        not {
            "Microsoft.Resources/subscriptions/resourceGroups/write",
            "Microsoft.Resources/subscriptions/resourceGroups/delete",
            "Microsoft.Authorization/roleDefinitions/write",
            "Microsoft.Authorization/*/write",
        }
        & actions
    )
    # What destroy and refresh read (missing before).
    assert {
        "Microsoft.Resources/subscriptions/resourceGroups/resources/read",
        "Microsoft.Storage/storageAccounts/fileServices/read",
    } <= actions
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
    for op, holds in (
        ("StringEquals", False),
        ("StringNotEquals", True),
        ("ForAllValues:StringEquals", True),
        ("ForAnyValue:StringEquals", False),
        ("StringEqualsIfExists", True),
    ):
        s = {**allow, "Condition": {op: {"aws:TagKeys": "x"}}}
        assert (decide(pol(s), req) == "Allow") is holds, op
    null = {**allow, "Condition": {"Null": {"aws:ResourceTag/t": "false"}}}
    assert decide(pol(null), req) == "ImplicitDeny"
    assert (
        decide(pol(null), Request(req.action, req.resource, {"aws:ResourceTag/t": "v"})) == "Allow"
    )
    # Every key of every operator must hold (AND); any of a key's values may (OR).
    both = {**allow, "Condition": {"StringEquals": {"a": ["1", "2"], "b": "3"}}}
    assert decide(pol(both), Request(req.action, req.resource, {"a": "2", "b": "3"})) == "Allow"
    assert (
        decide(pol(both), Request(req.action, req.resource, {"a": "2", "b": "4"})) == "ImplicitDeny"
    )
    # Bool compares true/false whatever the case (RAM's ecs:AssociatePublicIpAddress).
    public = {**allow, "Condition": {"Bool": {"ecs:AssociatePublicIpAddress": "true"}}}
    for value, holds in (("True", True), ("false", False)):
        ctx = {"ecs:AssociatePublicIpAddress": value}
        assert (decide(pol(public), Request(req.action, req.resource, ctx)) == "Allow") is holds
    assert decide(pol(public), req) == "ImplicitDeny"
    # A boundary caps the identity policy.
    assert not allowed(pol(allow), req, boundary=pol({**allow, "Resource": "arn:aws:s3:::c/*"}))


# ------------------------------------------------------------------ egress (item 14)
def test_egress_to_the_object_store_reaches_the_clusters_bucket_only_where_it_can() -> None:
    # AWS: the S3 gateway endpoint's policy names the rendezvous bucket only.
    aws_net = (TF / "aws" / "network.tf").read_text()
    assert (
        'Resource  = ["arn:aws:s3:::${local.bucket}", "arn:aws:s3:::${local.bucket}/*"]' in aws_net
    )
    # Azure: the subnet's service endpoint carries a policy naming the cluster's account
    # (the NSG's Storage tag alone is every account in the region).
    net = (TF / "azure" / "network.tf").read_text()
    assert re.search(
        r"service_endpoint_policy_ids\s*=\s*\[azurerm_subnet_service_endpoint_storage_policy"
        r"\.nodes\.id\]",
        net,
    )
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


# ---------------------------------------------------------------- Alibaba Cloud
def _alibaba() -> list[dict[str, Any]]:
    policy = json.loads((TF / "alibaba" / "deployer-policy.json").read_text())
    assert policy["Version"] == "1"
    return list(policy["Statement"])


def _actions(st: dict[str, Any]) -> list[str]:
    return st["Action"] if isinstance(st["Action"], list) else [st["Action"]]


def _resources(st: dict[str, Any]) -> list[str]:
    return st["Resource"] if isinstance(st["Resource"], list) else [st["Resource"]]


def test_alibaba_deployer_policy_cannot_escalate() -> None:
    """RAM has no permissions boundary: the deployer creates no role, policy or user and
    attaches nothing; it may pass one role an admin made (terraform/alibaba's node_role)
    and nothing else; it cannot run commands on, or rewrite the user-data of, instances
    (Cloud Assistant, ModifyInstanceAttribute), which would run code as their roles."""
    statements = _alibaba()
    allows = [st for st in statements if st["Effect"] == "Allow"]
    actions = [a for st in allows for a in _actions(st)]
    # A Deny only narrows what an Allow grants.
    for st in statements:
        assert st["Effect"] in ("Allow", "Deny"), st["Sid"]
        if st["Effect"] == "Deny":
            assert set(_actions(st)) <= set(actions), st["Sid"]
    assert all(a.count(":") == 1 and "*" not in a for a in actions), actions
    ram = sorted(a for a in actions if a.startswith("ram:"))
    assert ram == ["ram:GetRole", "ram:PassRole"]
    [passing] = [st for st in statements if "ram:PassRole" in _actions(st)]
    assert _resources(passing) == ["acs:ram:*:*:role/syndeo-nodes"]
    forbidden = ("sts:", "ims:", "resourcemanager:", "actiontrail:")
    assert not [a for a in actions if a.startswith(forbidden)]
    code_on_instances = {
        "ecs:RunCommand",
        "ecs:InvokeCommand",
        "ecs:CreateCommand",
        "ecs:SendFile",
        "ecs:ModifyInstanceAttribute",
        "ecs:AttachInstanceRamRole",
        "ecs:ReActivateInstances",
        "ecs:ImportKeyPair",
        "ecs:AttachKeyPair",
        "ecs:ResetDisk",
        "ecs:ReplaceSystemDisk",
    }
    assert not code_on_instances & set(actions)


def test_alibaba_deployer_touches_only_syndeo_buckets() -> None:
    for st in _alibaba():
        if any(a.startswith("oss:") for a in _actions(st)):
            assert all(a.startswith("oss:") for a in _actions(st))
            assert _resources(st) == ["acs:oss:*:*:syndeo-*", "acs:oss:*:*:syndeo-*/*"]
            assert "oss:PutBucketPolicy" not in _actions(st)  # no public policy


def test_alibaba_deployer_may_do_what_the_module_and_check_do() -> None:
    actions = {a for st in _alibaba() for a in _actions(st)}
    # syndeo/launcher/targets/alibabacheck.py's calls, and the module's creates.
    check = {"ecs:DescribeRegions", "ecs:DescribeAvailableResource", "ecs:DescribeImages"}
    check |= {"ecs:DescribeInstanceTypes", "ecs:DescribeAccountAttributes"}
    assert check <= actions
    needed = {"vpc:CreateVpc", "vpc:CreateVSwitch", "ecs:CreateSecurityGroup"}
    needed |= {"ecs:AuthorizeSecurityGroup", "ecs:RunInstances", "ecs:DeleteInstance"}
    needed |= {"oss:PutBucket", "oss:PutBucketLifecycle", "oss:PutObject"}
    assert needed <= actions


# Alibaba Cloud RAM, evaluated as the AWS policy is (tests/support/iam_eval.py).  What RAM
# authorizes each action on, and with which condition keys, is ECS's "RAM authorization"
# reference (api-ecs-2014-05-26-ram): RunInstances and AuthorizeSecurityGroup on All
# Resources (`*`) only; DescribeUserData, DeleteInstance(s), StopInstance and
# ModifyInstanceMetadataOptions on acs:ecs:<region>:<account>:instance/<id>; the security
# group actions on .../securitygroup/<id>; TagResources on the instance, security group or
# disk.  The tag keys are RAM's common ones (acs:RequestTag/<key>, acs:ResourceTag/<key>).
ALI_ACCOUNT, ALI_REGION = "1234567890123456", "cn-hangzhou"
ECS = f"acs:ecs:{ALI_REGION}:{ALI_ACCOUNT}:"
VPC = f"acs:vpc:{ALI_REGION}:{ALI_ACCOUNT}:"
ALI_OURS = {"syndeo-cluster": "ali-1"}
ALI_DEPLOYER = json.loads((TF / "alibaba" / "deployer-policy.json").read_text())


def _actx(
    request_tags: dict[str, str] | None = None,
    resource_tags: dict[str, str] | None = None,
    extra: dict[str, str] | None = None,
) -> dict[str, str | list[str]]:
    ctx: dict[str, str | list[str]] = dict(extra or {})
    for k, v in (request_tags or {}).items():
        ctx[f"acs:RequestTag/{k}"] = v
    for k, v in (resource_tags or {}).items():
        ctx[f"acs:ResourceTag/{k}"] = v
    return ctx


# What terraform/alibaba (through the alicloud provider) and `check` do as the deployer.
# The provider sends the tags with CreateVpc, CreateSecurityGroup and RunInstances, and
# tags a vSwitch only after CreateVSwitch (TagResources); it then tags the VPC again
# (already tagged) and sets the metadata options of each new (tagged) instance.
ALI_NEEDED = [
    Request("ecs:DescribeRegions", "*"),
    Request("ecs:DescribeAvailableResource", "*"),
    Request("ecs:DescribeInstanceTypes", "*"),
    Request("ecs:DescribeAccountAttributes", "*"),
    Request("ecs:DescribeImages", ECS + "image/m-1"),
    Request("ecs:DescribeInstances", ECS + "instance/*"),
    Request("vpc:CreateVpc", VPC + "vpc/vpc-1", _actx(ALI_OURS)),
    Request("vpc:TagResources", VPC + "vpc/vpc-1", _actx(ALI_OURS, ALI_OURS)),
    Request("vpc:CreateVSwitch", VPC + "vswitch/vsw-1"),
    Request("vpc:CreateVSwitch", VPC + "vpc/vpc-1", _actx(resource_tags=ALI_OURS)),
    Request("vpc:TagResources", VPC + "vswitch/vsw-1", _actx(ALI_OURS)),
    Request("ecs:CreateSecurityGroup", ECS + "securitygroup/sg-1", _actx(ALI_OURS)),
    Request("ecs:CreateSecurityGroup", VPC + "vpc/vpc-1", _actx(ALI_OURS, ALI_OURS)),
    Request("ecs:ModifySecurityGroupPolicy", ECS + "securitygroup/sg-1", _actx({}, ALI_OURS)),
    Request("ecs:AuthorizeSecurityGroup", "*", {"ecs:SecurityGroupIpProtocols": "tcp"}),
    Request("ecs:AuthorizeSecurityGroup", "*", {"ecs:SecurityGroupSourceCidrIps": "10.8.0.0/16"}),
    Request(
        "ecs:RunInstances",
        "*",
        _actx(
            ALI_OURS,
            extra={"ecs:AssociatePublicIpAddress": "false", "vpc:IsDefaultVpc": "false"},
        ),
    ),
    Request("ram:PassRole", f"acs:ram::{ALI_ACCOUNT}:role/syndeo-nodes"),
    Request("ecs:ModifyInstanceMetadataOptions", ECS + "instance/i-1", _actx({}, ALI_OURS)),
    Request("ecs:TagResources", ECS + "disk/d-1", _actx(ALI_OURS)),
    Request("ecs:TagResources", ECS + "instance/i-1", _actx({"Name": "x"}, ALI_OURS)),
    # Refresh reads back its instances' user data.
    Request("ecs:DescribeUserData", ECS + "instance/i-1", _actx({}, ALI_OURS)),
    Request("ecs:DeleteInstance", ECS + "instance/i-1", _actx({}, ALI_OURS)),
    Request("ecs:StopInstance", ECS + "instance/i-1", _actx({}, ALI_OURS)),
    Request("ecs:RevokeSecurityGroup", ECS + "securitygroup/sg-1", _actx({}, ALI_OURS)),
    Request("ecs:DeleteSecurityGroup", ECS + "securitygroup/sg-1", _actx({}, ALI_OURS)),
    Request("vpc:DeleteVSwitch", VPC + "vswitch/vsw-1", _actx({}, ALI_OURS)),
    Request("vpc:DeleteVpc", VPC + "vpc/vpc-1", _actx({}, ALI_OURS)),
    Request("oss:PutBucket", "acs:oss:*:*:syndeo-0123456789ab"),
    Request("oss:PutObject", "acs:oss:*:*:syndeo-0123456789ab/syndeo/ali-1/claim.json"),
]

THEIRS = {"team": "payments"}
# Each a way the account-wide policy let a deployer reach beyond Syndeo's resources.
ALI_ESCALATIONS = {
    "reading an untagged instance's user data (other teams' secrets)": Request(
        "ecs:DescribeUserData", ECS + "instance/i-theirs", _actx()
    ),
    "reading the user data of an instance tagged otherwise": Request(
        "ecs:DescribeUserData", ECS + "instance/i-theirs", _actx({}, THEIRS)
    ),
    "deleting someone else's instance": Request(
        "ecs:DeleteInstance", ECS + "instance/i-theirs", _actx({}, THEIRS)
    ),
    "deleting someone else's instances in a batch": Request(
        "ecs:DeleteInstances", ECS + "instance/i-theirs", _actx()
    ),
    "stopping someone else's instance": Request(
        "ecs:StopInstance", ECS + "instance/i-theirs", _actx()
    ),
    "turning hardened metadata off on someone else's instance": Request(
        "ecs:ModifyInstanceMetadataOptions", ECS + "instance/i-theirs", _actx({}, THEIRS)
    ),
    "an untagged instance": Request("ecs:RunInstances", "*", _actx()),
    "an instance with a public address": Request(
        "ecs:RunInstances", "*", _actx(ALI_OURS, extra={"ecs:AssociatePublicIpAddress": "true"})
    ),
    "an instance in the default VPC": Request(
        "ecs:RunInstances", "*", _actx(ALI_OURS, extra={"vpc:IsDefaultVpc": "true"})
    ),
    "an untagged VPC": Request("vpc:CreateVpc", VPC + "vpc/vpc-2", _actx()),
    "deleting an untagged VPC": Request("vpc:DeleteVpc", VPC + "vpc/vpc-theirs", _actx()),
    "deleting a VPC tagged otherwise": Request(
        "vpc:DeleteVpc", VPC + "vpc/vpc-theirs", _actx({}, THEIRS)
    ),
    "changing someone else's VPC": Request(
        "vpc:ModifyVpcAttribute", VPC + "vpc/vpc-theirs", _actx()
    ),
    "tagging someone else's VPC as ours (then deleting it)": Request(
        "vpc:TagResources", VPC + "vpc/vpc-theirs", _actx(ALI_OURS, THEIRS)
    ),
    "a vSwitch in someone else's VPC": Request(
        "vpc:CreateVSwitch", VPC + "vpc/vpc-theirs", _actx({}, THEIRS)
    ),
    "deleting someone else's vSwitch": Request(
        "vpc:DeleteVSwitch", VPC + "vswitch/vsw-theirs", _actx()
    ),
    "an untagged security group": Request(
        "ecs:CreateSecurityGroup", ECS + "securitygroup/sg-2", _actx()
    ),
    "a security group in someone else's VPC": Request(
        "ecs:CreateSecurityGroup", VPC + "vpc/vpc-theirs", _actx(ALI_OURS, THEIRS)
    ),
    "deleting someone else's security group": Request(
        "ecs:DeleteSecurityGroup", ECS + "securitygroup/sg-theirs", _actx()
    ),
    "revoking someone else's rules": Request(
        "ecs:RevokeSecurityGroup", ECS + "securitygroup/sg-theirs", _actx({}, THEIRS)
    ),
    "letting members of someone else's security group talk": Request(
        "ecs:ModifySecurityGroupPolicy", ECS + "securitygroup/sg-theirs", _actx()
    ),
    "opening any security group to the whole internet": Request(
        "ecs:AuthorizeSecurityGroup", "*", {"ecs:SecurityGroupSourceCidrIps": "0.0.0.0/0"}
    ),
    "tagging someone else's instance as ours (then deleting it)": Request(
        "ecs:TagResources", ECS + "instance/i-theirs", _actx(ALI_OURS)
    ),
    "moving our tag onto an instance tagged otherwise": Request(
        "ecs:TagResources", ECS + "instance/i-theirs", _actx(ALI_OURS, THEIRS)
    ),
    "tagging someone else's security group as ours": Request(
        "ecs:TagResources", ECS + "securitygroup/sg-theirs", _actx(ALI_OURS)
    ),
    "passing another role to an instance": Request(
        "ram:PassRole", f"acs:ram::{ALI_ACCOUNT}:role/AdminRole"
    ),
    "someone else's bucket": Request("oss:GetObject", "acs:oss:*:*:payroll/2026.csv"),
}


@pytest.mark.parametrize("req", ALI_NEEDED, ids=lambda r: f"{r.action} {r.resource.split(':')[-1]}")
def test_alibaba_what_a_deploy_needs_is_allowed(req: Request) -> None:
    assert allowed(ALI_DEPLOYER, req), decide(ALI_DEPLOYER, req)


@pytest.mark.parametrize("what", sorted(ALI_ESCALATIONS))
def test_alibaba_deployer_stays_on_syndeo_resources(what: str) -> None:
    assert not allowed(ALI_DEPLOYER, ALI_ESCALATIONS[what]), what


# What RAM cannot scope, each allowed on purpose and named where the policy is described.
ALI_GAPS = {
    # RunInstances is authorized on `*` only: no vSwitch, security group or VPC resource
    # to condition on (vpc:VPC would need the VPC's id, unknown to a policy made once).
    "ecs:RunInstances": Request("ecs:RunInstances", "*", _actx(ALI_OURS)),
    # AuthorizeSecurityGroup is authorized on `*` only: a rule may go into any group.
    "ecs:AuthorizeSecurityGroup": Request(
        "ecs:AuthorizeSecurityGroup", "*", {"ecs:SecurityGroupSourceCidrIps": "10.0.0.0/8"}
    ),
    # The provider creates the vSwitch untagged and tags it afterwards, and RAM has no key
    # telling a tag on a new resource from a retag: any vSwitch can get the cluster tag.
    "vpc:TagResources": Request("vpc:TagResources", VPC + "vswitch/vsw-theirs", _actx(ALI_OURS)),
    # Likewise a disk; no action on disks is granted, so the tag leads nowhere.
    "ecs:TagResources": Request("ecs:TagResources", ECS + "disk/d-theirs", _actx(ALI_OURS)),
}


def test_alibaba_what_ram_cannot_scope_is_allowed_only_as_documented() -> None:
    readme = (TF / "alibaba" / "README.md").read_text()
    security = (TF.parent / "docs" / "security.md").read_text()
    for action, req in ALI_GAPS.items():
        assert allowed(ALI_DEPLOYER, req), action
        assert f"`{action}`" in readme, action
    assert "Alibaba" in security and "ecs:DescribeUserData" in security
    # Every other change is held to the cluster tag or to Syndeo's names: an Allow on `*`
    # without a condition holds only reads and the gaps above.
    for st in _alibaba():
        if st["Effect"] != "Allow" or "Condition" in st or _resources(st) != ["*"]:
            continue
        for action in _actions(st):
            verb = action.split(":", 1)[1]
            assert verb.startswith(("Describe", "List")) or action in ALI_GAPS, action


def test_alibaba_module_tags_what_the_policy_conditions_on() -> None:
    main = (TF / "alibaba" / "main.tf").read_text()
    assert re.search(r"syndeo-cluster\s*=\s*local\.cluster_id", main)
    code = "\n".join((TF / "alibaba" / f).read_text() for f in ("network.tf", "instances.tf"))
    for kind in (
        "alicloud_vpc",
        "alicloud_vswitch",
        "alicloud_security_group",
        "alicloud_instance",
    ):
        [body] = re.findall(rf'resource "{kind}" "\w+" {{\n(.*?)\n}}\n', code, re.S)
        assert re.search(r"\n\s*tags\s*=\s*(local\.tags|merge\(local\.tags)", body), kind
