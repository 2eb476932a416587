"""AWS: the deployer's permissions, simulated by IAM before anything is created.

IAM's ``SimulatePrincipalPolicy`` (Query API: a form-encoded POST of
``Action=SimulatePrincipalPolicy``, ``PolicySourceArn``, ``ActionNames.member.N``,
``ResourceArns.member.N``, ``ContextEntries.member.N``) evaluates the principal's own
policies for each action.  Its reply is XML:
``SimulatePrincipalPolicyResponse/SimulatePrincipalPolicyResult/EvaluationResults/member``
with ``EvalActionName``, ``EvalDecision`` (``allowed`` | ``explicitDeny`` |
``implicitDeny``) and ``MissingContextValues`` (the condition keys a policy needed but the
request did not give), plus ``IsTruncated``/``Marker`` (IAM API reference:
https://docs.aws.amazon.com/IAM/latest/APIReference/API_SimulatePrincipalPolicy.html and
API_EvaluationResult.html).  How a check passes, refuses or is skipped: ``cloudcheck.py``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from syndeo.core.errors import ConfigError
from syndeo.launcher.targets.cloudcheck import deployer_file, first_line


def deployer_actions() -> tuple[list[str], str]:
    """The actions terraform/aws/deployer-policy.json allows, wildcards left out (IAM
    simulates named actions only)."""
    path, shown = deployer_file("aws", "deployer-policy.json")
    actions: set[str] = set()
    for statement in json.loads(path.read_text())["Statement"]:
        if statement.get("Effect") != "Allow":
            continue
        named = statement.get("Action", [])
        actions.update(a for a in ([named] if isinstance(named, str) else named) if "*" not in a)
    return sorted(actions), shown


def principal_arn(caller: str) -> str | None:
    """The IAM principal whose policies apply to ``caller`` (STS's identity ARN): an
    assumed role's session (``arn:aws:sts::A:assumed-role/R/S``) is role R; a user or role
    is itself; root and federated users have no policies to simulate (None)."""
    session = re.fullmatch(r"arn:(aws[a-z-]*):sts::(\d{12}):assumed-role/([^/]+)/.+", caller)
    if session:
        partition, account, role = session.groups()
        return f"arn:{partition}:iam::{account}:role/{role}"
    return caller if re.fullmatch(r"arn:aws[a-z-]*:iam::\d{12}:(user|role)/.+", caller) else None


def _context(principal: str, region: str, boundary: str | None) -> list[dict[str, Any]]:
    """The condition keys terraform/aws's own requests carry, so that the policy's
    conditioned statements (tag on create, the node roles' boundary, PassRole to EC2, the
    SSM-only attach) are judged as they are for a deploy rather than denied for want of
    a key."""
    partition, account = principal.split(":")[1], principal.split(":")[4]
    boundary = boundary or f"arn:{partition}:iam::{account}:policy/syndeo-node-boundary"
    keys = {
        "aws:RequestedRegion": region,
        "aws:RequestTag/syndeo-cluster": "check",
        "aws:ResourceTag/syndeo-cluster": "check",
        "ec2:CreateAction": "RunInstances",
        "iam:PermissionsBoundary": boundary,
        "iam:PassedToService": "ec2.amazonaws.com",
        "iam:AWSServiceName": "spot.amazonaws.com",
        "iam:PolicyARN": f"arn:{partition}:iam::aws:policy/AmazonSSMManagedInstanceCore",
    }
    return [
        {"ContextKeyName": k, "ContextKeyValues": [v], "ContextKeyType": "string"}
        for k, v in keys.items()
    ]


def denied_actions(iam: Any, caller: str, region: str, boundary: str | None) -> str:
    """Every action of the deployer policy allowed for the caller's principal; one line
    naming the denied ones.  Not fatal when IAM cannot be asked (no
    iam:SimulatePrincipalPolicy, an emulator without it): the summary says so."""
    from botocore.exceptions import BotoCoreError, ClientError
    from botocore.parsers import ResponseParserError

    principal = principal_arn(caller)
    if principal is None:
        return f"permissions not checked ({caller} has no IAM policies to simulate)"
    actions, shown = deployer_actions()
    try:
        pages = iam.get_paginator("simulate_principal_policy").paginate(
            PolicySourceArn=principal,
            ActionNames=actions,
            ResourceArns=["*"],
            ContextEntries=_context(principal, region, boundary),
        )
        results = [r for page in pages for r in page.get("EvaluationResults", [])]
    except (BotoCoreError, ClientError, ResponseParserError) as exc:
        # ResponseParserError: a reply that is no IAM answer (moto's 500 page for a call
        # it does not implement).
        return f"permissions not checked ({first_line(exc)})"
    denied = sorted(
        {
            str(r["EvalActionName"])
            for r in results
            if r.get("EvalDecision") != "allowed" and not r.get("MissingContextValues")
        }
    )
    unsure = sorted(
        {
            str(r["EvalActionName"])
            for r in results
            if r.get("EvalDecision") != "allowed" and r.get("MissingContextValues")
        }
    )
    if denied:
        raise ConfigError(
            f"aws: {principal} is not allowed {len(denied)} action(s) terraform/aws needs: "
            f"{', '.join(denied)}: attach {shown} (ACCOUNT_ID and REGION filled in) to it"
        )
    said = f"{len(actions) - len(unsure)} actions of {shown} allowed"
    return f"{said}; {len(unsure)} depend on conditions not simulated" if unsure else said
