"""`syndeo check` / `invoke check`: whether a deploy can start, before anything exists.

Local and bad input through the real command line; AWS against moto (in-process: EC2,
STS) and local fakes of what moto lacks: Service Quotas ``GetServiceQuota`` and IAM
``SimulatePrincipalPolicy`` (the deployer policy's actions for the caller's principal).
Google Cloud's check against a local fake of the REST calls it makes (Service Usage v1
``services.get``, whose reply is a Service with ``state`` ENABLED or DISABLED:
https://cloud.google.com/service-usage/docs/reference/rest/v1/services/get; Compute v1
``images.get``/``getFromFamily``, an Image with a ``description``; ``regions.get`` and
``machineTypes.get``; Cloud Resource Manager ``projects.testIamPermissions``), with
anonymous credentials standing in for application default credentials; Azure's
subscription rule without any Azure call, and the rest through a stand-in ``az``
(image tag, resource providers, VM sizes, vCPU usage, the permissions API).  Each reply's
shape and where it comes from is in the check's own module (awscheck.py, gcpcheck.py,
azurecheck.py).  Nothing here reaches a real cloud.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar, cast

import pytest

from syndeo.core.errors import ConfigError
from syndeo.launcher.config import load_config
from syndeo.launcher.preflight import check_deployment
from tests.support.fake_api import Fake as _Fake
from tests.support.fake_api import serving as _serving


def _syndeo(home: Path, *args: str, verb: str = "check") -> subprocess.CompletedProcess[str]:
    drop = ("AWS_", "GOOGLE_", "AZURE_", "ARM_", "CLOUDSDK_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env.update(HOME=str(home), SYNDEO_HOME=str(home / ".syndeo"))
    return subprocess.run(
        [sys.executable, "-m", "syndeo", verb, *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=home,
        timeout=120,
        check=False,
    )


def test_local_check_passes_and_creates_nothing(tmp_path: Path) -> None:
    out = _syndeo(tmp_path, "--target", "local", "--nodes", "2")
    assert out.returncode == 0, out.stderr
    assert "ok: local: settings ok (2 node(s)" in out.stdout
    assert not (tmp_path / ".syndeo").exists()  # no cluster dir, no rendezvous dir


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--target", "local", "--nodes", "0"], "nodes"),
        (["--target", "nowhere"], "target"),
        (["--target", "aws", "--nodes", "2"], "--instance-type"),
    ],
)
def test_bad_input_is_one_line(tmp_path: Path, args: list[str], says: str) -> None:
    out = _syndeo(tmp_path, *args)
    assert out.returncode != 0
    assert out.stderr.startswith("syndeo: error: ") and says in out.stderr
    assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1


GRACE = ["--autostop-grace", "5m"]


@pytest.mark.parametrize("verb", ["check", "up"])
@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--target", "local", *GRACE], "autostop_grace is a time after autostop"),
        (["--target", "local", "--autostop", "1m", *GRACE], "leave it out"),
        (["--target", "slurm", "--autostop", "1m", *GRACE], "on slurm only the watcher"),
    ],
)
def test_bad_autostop_grace_is_one_line_before_anything_starts(
    tmp_path: Path, verb: str, args: list[str], says: str
) -> None:
    out = _syndeo(tmp_path, *args, verb=verb)
    assert out.returncode != 0
    assert out.stderr.startswith("syndeo: error: ") and says in out.stderr, out.stderr
    assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1
    assert not (tmp_path / ".syndeo").exists()  # no cluster dir, no rendezvous dir


@pytest.mark.parametrize("verb", ["check", "up"])
def test_a_negative_autostop_grace_is_refused_as_any_bad_duration(
    tmp_path: Path, verb: str
) -> None:
    """As any bad duration: one line, naming the option and the verb's help."""
    out = _syndeo(
        tmp_path, "--target", "aws", "--autostop", "1m", "--autostop-grace=-5m", verb=verb
    )
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.strip() == (
        "syndeo: error: argument --autostop-grace: '-5m' is not a duration: "
        f"use e.g. 90, 30s, 5m, 2h or 1d (see: syndeo {verb} --help)"
    )
    assert not (tmp_path / ".syndeo").exists()


# ------------------------------------------------------------------ AWS (moto)
@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Any]:
    """A real moto_server process (EC2, STS) the check reaches through AWS_ENDPOINT_URL,
    as it would reach AWS."""
    import boto3

    from testbeds.objectstores import running

    for key in list(os.environ):
        if key.startswith("AWS_"):
            monkeypatch.delenv(key)
    with running("s3", tmp_path / "moto") as server:
        for key, value in server.env.items():
            monkeypatch.setenv(key, value)
        monkeypatch.setenv("AWS_ENDPOINT_URL", server.endpoint)
        yield boto3.client("ec2", region_name="us-east-1")


def _aws_cfg(image: str, itype: str = "c7i.large") -> Any:
    return load_config(
        None,
        target="aws",
        nodes=2,
        vm_instance_type=itype,
        vm_region="us-east-1",
        vm_image=image,
        rendezvous=None,
    )


def _ami(ec2: Any, digest: str) -> str:
    instance = ec2.run_instances(ImageId="ami-12c6146b", MinCount=1, MaxCount=1)
    iid = instance["Instances"][0]["InstanceId"]
    image = ec2.create_image(InstanceId=iid, Name="syndeo-test")["ImageId"]
    ec2.create_tags(Resources=[image], Tags=[{"Key": "syndeo-image-digest", "Value": digest}])
    return str(image)


@pytest.mark.objectstore
def test_aws_check_names_identity_image_digest_and_types(aws: Any) -> None:
    image = _ami(aws, "d" * 64)
    found = check_deployment(_aws_cfg(image))
    text = "\n".join(found)
    assert "identity arn:aws:" in text
    assert f"image {image} in us-east-1 (SIF sha256 dddddddddddd)" in text
    assert "c7i.large offered in us-east-1" in text
    assert "a new private bucket is made with the cluster" in text


@pytest.mark.objectstore
def test_aws_check_refuses_a_missing_image(aws: Any) -> None:
    with pytest.raises(ConfigError, match="does not exist in us-east-1"):
        check_deployment(_aws_cfg("ami-0123456789abcdef0"))


@pytest.mark.objectstore
def test_aws_check_refuses_a_type_not_offered(aws: Any) -> None:
    image = _ami(aws, "e" * 64)
    with pytest.raises(ConfigError, match="not offered in us-east-1"):
        check_deployment(_aws_cfg(image, itype="x9z.huge"))


class _ServiceQuotas(_Fake):
    """Service Quotas' GetServiceQuota (JSON 1.1: POST, X-Amz-Target
    ServiceQuotasV20190624.GetServiceQuota), which moto answers only for VPC quotas.  The
    reply's shape is the API reference's and the AWS CLI guide's example
    (get-aws-default-service-quota for L-1216C47A: {"Quota": {..., "Value": 5.0}});
    an unknown code is its NoSuchResourceException."""

    content_type = "application/x-amz-json-1.1"
    values: ClassVar[dict[str, float]] = {}
    asked: ClassVar[list[str]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        assert self.headers["X-Amz-Target"] == "ServiceQuotasV20190624.GetServiceQuota"
        code = body["QuotaCode"]
        self.asked.append(f"{body['ServiceCode']}/{code}")
        if code in self.values:
            status, reply = (
                200,
                {
                    "Quota": {
                        "ServiceCode": "ec2",
                        "QuotaCode": code,
                        "Value": self.values[code],
                        "QuotaArn": f"arn:aws:servicequotas:us-east-1::ec2/{code}",
                        "Unit": "None",
                        "Adjustable": True,
                        "GlobalQuota": False,
                    }
                },
            )
        else:
            status = 400
            reply = {"__type": "NoSuchResourceException", "message": f"no quota {code}"}
        self._send(status, json.dumps(reply).encode())


@pytest.fixture
def quotas(aws: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[type[_ServiceQuotas]]:
    with _serving(_ServiceQuotas) as url:
        monkeypatch.setenv("AWS_ENDPOINT_URL_SERVICE_QUOTAS", url)
        _ServiceQuotas.values, _ServiceQuotas.asked = {}, []
        yield _ServiceQuotas


@pytest.mark.objectstore
def test_aws_check_counts_the_clusters_vcpus_against_the_quota_in_use(
    aws: Any, quotas: type[_ServiceQuotas]
) -> None:
    image = _ami(aws, "f" * 64)  # also an instance that runs: 1 vCPU of the standard quota
    quotas.values["L-1216C47A"] = 16
    text = "\n".join(check_deployment(_aws_cfg(image)))  # 2 x c7i.large: 4 vCPUs
    assert "4 of 15 free vCPUs of On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances" in text
    assert quotas.asked == ["ec2/L-1216C47A"]
    # A new account's 5 vCPUs, 1 in use: 4 fit, 8 (two c7i.xlarge) do not.
    quotas.values["L-1216C47A"] = 5
    check_deployment(_aws_cfg(image))
    with pytest.raises(ConfigError) as refused:
        check_deployment(_aws_cfg(image, itype="c7i.xlarge"))
    message = str(refused.value)
    assert (
        "needs 8 vCPUs of On-Demand Standard" in message and "quota is 5 with 1 in use" in message
    )
    assert "--quota-code L-1216C47A --desired-value 9" in message


@pytest.mark.objectstore
def test_aws_check_spot_counts_against_the_spot_quota_and_an_unread_one_is_said(
    aws: Any, quotas: type[_ServiceQuotas]
) -> None:
    image = _ami(aws, "a" * 64)
    cfg = load_config(
        None,
        target="aws",
        nodes=2,
        vm_instance_type="g5.xlarge",
        vm_region="us-east-1",
        vm_image=image,
        vm_spot=True,
        rendezvous=None,
    )
    text = "\n".join(check_deployment(cfg))
    assert quotas.asked == ["ec2/L-3819A6DF"]  # G and VT spot; the quota is not known
    assert "Spot G and VT instances vCPU quota not read" in text


class _Iam(_Fake):
    """IAM's SimulatePrincipalPolicy, which moto does not implement: the Query API (a
    form-encoded POST) answered with the XML the IAM API reference shows
    (SimulatePrincipalPolicyResponse/SimulatePrincipalPolicyResult/EvaluationResults/member
    with EvalActionName, EvalDecision, MissingContextValues; API_SimulatePrincipalPolicy
    and API_EvaluationResult).  ``denied`` actions are implicitDeny; with ``refuse`` the
    caller may not simulate (AccessDenied)."""

    content_type = "text/xml"
    denied: ClassVar[set[str]] = set()
    # Denied for want of these condition keys (MissingContextValues): IAM could not judge.
    unsure: ClassVar[dict[str, list[str]]] = {}
    refuse: ClassVar[bool] = False
    asked: ClassVar[dict[str, list[str]]] = {}

    def _missing(self, action: str) -> str:
        keys = "".join(f"<member>{k}</member>" for k in self.unsure.get(action, []))
        return f"<MissingContextValues>{keys}</MissingContextValues>"

    def do_POST(self) -> None:
        from urllib.parse import parse_qs

        form = parse_qs(self.rfile.read(int(self.headers["Content-Length"])).decode())
        assert form["Action"] == ["SimulatePrincipalPolicy"], form["Action"]
        self.asked.clear()
        for key, values in sorted(form.items()):
            self.asked.setdefault(key.split(".")[0], []).extend(values)
        if self.refuse:
            return self._send(
                403,
                (
                    b'<ErrorResponse xmlns="https://iam.amazonaws.com/doc/2010-05-08/"><Error>'
                    b"<Type>Sender</Type><Code>AccessDenied</Code><Message>User is not authorized "
                    b"to perform: iam:SimulatePrincipalPolicy</Message></Error>"
                    b"<RequestId>1</RequestId></ErrorResponse>"
                ),
            )
        actions = [
            form[f"ActionNames.member.{n}"][0]
            for n in range(1, 1000)
            if f"ActionNames.member.{n}" in form
        ]
        members = "".join(
            f"<member><EvalActionName>{a}</EvalActionName><EvalResourceName>*</EvalResourceName>"
            f"<EvalDecision>{'allowed' if a not in self.denied else 'implicitDeny'}</EvalDecision>"
            f"<MatchedStatements/>{self._missing(a)}</member>"
            for a in actions
        )
        self._send(
            200,
            (
                '<SimulatePrincipalPolicyResponse xmlns="https://iam.amazonaws.com/doc/2010-05-08/">'
                f"<SimulatePrincipalPolicyResult><IsTruncated>false</IsTruncated>"
                f"<EvaluationResults>{members}</EvaluationResults></SimulatePrincipalPolicyResult>"
                "<ResponseMetadata><RequestId>1</RequestId></ResponseMetadata>"
                "</SimulatePrincipalPolicyResponse>"
            ).encode(),
        )


@pytest.fixture
def iam(aws: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[type[_Iam]]:
    """The fake IAM, and the caller as an assumed role (a session of role "deployer"
    made by moto's STS), as a deployer usually is."""
    import boto3

    handler = type(
        "Handler", (_Iam,), {"denied": set(), "unsure": {}, "refuse": False, "asked": {}}
    )
    session = boto3.client("sts", region_name="us-east-1").assume_role(
        RoleArn="arn:aws:iam::123456789012:role/deployer", RoleSessionName="me"
    )["Credentials"]
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", session["AccessKeyId"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", session["SecretAccessKey"])
    monkeypatch.setenv("AWS_SESSION_TOKEN", session["SessionToken"])
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)  # it keeps the first credentials
    with _serving(handler) as url:
        monkeypatch.setenv("AWS_ENDPOINT_URL_IAM", url)
        yield handler


@pytest.mark.objectstore
def test_aws_check_simulates_the_deployer_policy_for_the_callers_role(
    aws: Any, iam: type[_Iam]
) -> None:
    """SimulatePrincipalPolicy for the role behind the caller's session, with the deployer
    policy's named actions; a denied one is one line naming it and the policy file; an
    IAM that will not simulate is said in the summary, not fatal."""
    policy = json.loads(
        (Path(__file__).resolve().parents[2] / "terraform/aws/deployer-policy.json").read_text()
    )
    allows = [st["Action"] for st in policy["Statement"] if st["Effect"] == "Allow"]
    named = {a for action in allows for a in ([action] if isinstance(action, str) else action)}
    image = _ami(aws, "b" * 64)
    text = "\n".join(check_deployment(_aws_cfg(image)))
    assert f"{len(named)} actions of terraform/aws/deployer-policy.json allowed" in text
    assert iam.asked["PolicySourceArn"] == ["arn:aws:iam::123456789012:role/deployer"]
    assert set(iam.asked["ActionNames"]) == named and iam.asked["ResourceArns"] == ["*"]
    # The keys the policy's conditions read, as a deploy's requests carry them.
    boundary = "arn:aws:iam::123456789012:policy/syndeo-node-boundary"
    assert {"iam:PermissionsBoundary", boundary, "aws:RequestedRegion", "us-east-1"} <= set(
        iam.asked["ContextEntries"]
    )
    iam.denied = {"ec2:RunInstances", "iam:PassRole"}
    with pytest.raises(ConfigError) as denied:
        check_deployment(_aws_cfg(image))
    assert str(denied.value) == (
        "aws: arn:aws:iam::123456789012:role/deployer is not allowed 2 action(s) terraform/aws "
        "needs: ec2:RunInstances, iam:PassRole: attach terraform/aws/deployer-policy.json "
        "(ACCOUNT_ID and REGION filled in) to it"
    )
    # A decision that hangs on a key the simulation lacked is said, not refused.
    iam.denied, iam.unsure = {"ec2:CreateVpc"}, {"ec2:CreateVpc": ["aws:RequestTag/x"]}
    text = "\n".join(check_deployment(_aws_cfg(image)))
    assert (
        f"{len(named) - 1} actions of terraform/aws/deployer-policy.json allowed; 1 depend" in text
    )
    iam.refuse = True
    text = "\n".join(check_deployment(_aws_cfg(image)))
    assert "permissions not checked (An error occurred (AccessDenied)" in text


@pytest.mark.objectstore
def test_aws_check_without_simulation_says_so(aws: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """moto has no SimulatePrincipalPolicy (it answers a 500 page): for an IAM user the
    check still passes and says the permissions were not checked."""
    import boto3

    image = _ami(aws, "c" * 64)
    iam = boto3.client("iam", region_name="us-east-1")
    iam.create_user(UserName="deployer")
    key = iam.create_access_key(UserName="deployer")["AccessKey"]
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", key["AccessKeyId"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", key["SecretAccessKey"])
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)
    text = "\n".join(check_deployment(_aws_cfg(image)))
    assert "identity arn:aws:iam::123456789012:user/deployer" in text
    assert "permissions not checked (" in text


def test_principal_of_an_assumed_role_session_is_the_role() -> None:
    from syndeo.launcher.targets.awscheck import principal_arn

    assert principal_arn("arn:aws:sts::123456789012:assumed-role/Dep/me@x") == (
        "arn:aws:iam::123456789012:role/Dep"
    )
    assert principal_arn("arn:aws:iam::123456789012:user/ops/alice") == (
        "arn:aws:iam::123456789012:user/ops/alice"
    )
    assert principal_arn("arn:aws:iam::123456789012:root") is None


# ------------------------------------------------------------------ Google Cloud (fake)
_C3 = {"kind": "compute#machineType", "name": "c3-standard-8", "guestCpus": 8}


class _ServiceUsage(_Fake):
    """Google's REST calls the check makes, answered as their references show them (the
    shapes and their sources: syndeo/launcher/targets/gcpcheck.py's docstring)."""

    enabled: ClassVar[set[str]] = set()
    # Compute v1 images by their path (projects/P/global/images/[family/]NAME) -> the
    # Image's description (images.get / getFromFamily reply: an Image resource,
    # https://cloud.google.com/compute/docs/reference/rest/v1/images/get).
    images: ClassVar[dict[str, str]] = {}
    # regions.get: the region's zones and its quotas [{metric, limit, usage}]; machineTypes.get:
    # a MachineType per zone and type (404 where the zone does not offer it).
    zones: ClassVar[list[str]] = []
    quotas: ClassVar[list[dict[str, Any]]] = []
    machine_types: ClassVar[dict[str, dict[str, dict[str, Any]]]] = {}
    types_status: ClassVar[int] = 200  # machineTypes.get's answer when not 200 (no right)
    # projects.testIamPermissions: what the caller holds (None: whatever is asked); a
    # status other than 200 stands for an API that cannot be asked.
    granted: ClassVar[set[str] | None] = None
    iam_status: ClassVar[int] = 200
    asked: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        if self.path.startswith("/compute/v1/"):
            return self._compute(self.path.removeprefix("/compute/v1/"))
        parts = self.path.strip("/").split("/")  # v1/projects/P/services/NAME
        name = parts[-1]
        body = json.dumps(
            {
                "name": f"projects/123/services/{name}",
                "parent": "projects/123",
                "state": "ENABLED" if name in self.enabled else "DISABLED",
            }
        ).encode()
        self._send(200, body)

    def _compute(self, path: str) -> None:
        parts = path.split("/")  # projects/P/(regions/R | zones/Z/machineTypes/T | global/…)
        if parts[2:3] == ["regions"]:
            region = {
                "kind": "compute#region",
                "name": parts[3],
                "quotas": self.quotas,
                "zones": [
                    f"https://www.googleapis.com/compute/v1/projects/{parts[1]}/zones/{z}"
                    for z in self.zones
                ],
            }
            return self._send(200, json.dumps(region).encode())
        if parts[2:3] == ["zones"] and self.types_status != 200:
            self.send_error(self.types_status)
            return
        if parts[2:3] == ["zones"]:
            found = self.machine_types.get(parts[3], {}).get(parts[5])
        else:
            description = self.images.get(path)
            found = (
                None
                if description is None
                else {
                    "kind": "compute#image",
                    "name": parts[-1],
                    "status": "READY",
                    "description": description,
                }
            )
        if found is None:
            self.send_error(404)
            return
        self._send(200, json.dumps(found).encode())

    def do_POST(self) -> None:
        # /crm/v1/projects/P:testIamPermissions {"permissions": [...]}
        assert self.path.endswith(":testIamPermissions"), self.path
        wanted = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["permissions"]
        self.asked[:] = wanted
        if self.iam_status != 200:
            self.send_error(self.iam_status)
            return
        held = [p for p in wanted if self.granted is None or p in self.granted]
        self._send(200, json.dumps({"permissions": held} if held else {}).encode())


@pytest.fixture
def serviceusage(monkeypatch: pytest.MonkeyPatch) -> Iterator[type[_ServiceUsage]]:
    import google.auth
    from google.auth.credentials import AnonymousCredentials

    handler = type(
        "Handler",
        (_ServiceUsage,),
        {
            "enabled": set(),
            "images": {},
            "granted": None,
            "iam_status": 200,
            "asked": [],
            "types_status": 200,
            "zones": ["us-central1-a", "us-central1-b", "us-central1-c"],
            "quotas": [
                {"metric": "CPUS", "limit": 24.0, "usage": 0.0},
                {"metric": "C3_CPUS", "limit": 24.0, "usage": 0.0},
                {"metric": "PREEMPTIBLE_CPUS", "limit": 0.0, "usage": 0.0},
            ],
            "machine_types": {"us-central1-a": {"c3-standard-8": _C3}},
        },
    )
    anonymous = AnonymousCredentials()  # type: ignore[no-untyped-call]
    monkeypatch.setattr(google.auth, "default", lambda **_: (anonymous, "proj-1"))
    with _serving(handler) as url:
        monkeypatch.setenv("SYNDEO_GCP_SERVICEUSAGE_URL", f"{url}/v1")
        monkeypatch.setenv("SYNDEO_GCP_COMPUTE_URL", f"{url}/compute/v1")
        monkeypatch.setenv("SYNDEO_GCP_RESOURCEMANAGER_URL", f"{url}/crm/v1")
        yield handler


def _gcp_cfg(**settings: Any) -> Any:
    over = {"vm_instance_type": "c3-standard-8", **settings}
    return load_config(
        None,
        target="gcp",
        nodes=2,
        vm_region="us-central1",
        vm_image="projects/p/global/images/syndeo",
        rendezvous=None,
        **over,
    )


def test_gcp_check_names_the_disabled_apis_and_the_command(
    serviceusage: type[_ServiceUsage], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "proj-1")
    serviceusage.enabled.add("compute.googleapis.com")
    with pytest.raises(ConfigError) as err:
        check_deployment(_gcp_cfg())
    assert str(err.value) == (
        "gcp: iam.googleapis.com not enabled in project proj-1: "
        "gcloud services enable iam.googleapis.com --project proj-1"
    )
    serviceusage.enabled.add("iam.googleapis.com")
    serviceusage.images["projects/p/global/images/syndeo"] = "built by hand"
    assert any(
        "compute.googleapis.com, iam.googleapis.com enabled" in line
        for line in check_deployment(_gcp_cfg())
    )


def test_gcp_check_reads_the_image_digest(
    serviceusage: type[_ServiceUsage], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The SIF digest packer/cloud writes into the image description is what the target
    records (deploy.json) and passes to the nodes, as on AWS; a missing image is one line."""
    from syndeo.launcher.targets import get_target
    from syndeo.launcher.targets.cloud import CloudTarget

    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "proj-1")
    serviceusage.enabled.update({"compute.googleapis.com", "iam.googleapis.com"})
    with pytest.raises(ConfigError, match="image projects/p/global/images/syndeo does not exist"):
        check_deployment(_gcp_cfg())
    serviceusage.images["projects/p/global/images/syndeo"] = "syndeo SIF sha256:" + "c" * 64
    target = cast(CloudTarget, get_target(_gcp_cfg()))
    line = target.check_credentials()
    assert target.baked_digest == "c" * 64 and "SIF sha256 cccccccccccc" in line


@pytest.fixture
def gcp_ready(
    serviceusage: type[_ServiceUsage], monkeypatch: pytest.MonkeyPatch
) -> type[_ServiceUsage]:
    """A project whose APIs are on and whose image exists: what follows is the check's own."""
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "proj-1")
    serviceusage.enabled.update({"compute.googleapis.com", "iam.googleapis.com"})
    serviceusage.images["projects/p/global/images/syndeo"] = "syndeo SIF sha256:" + "c" * 64
    return serviceusage


def _gcp_line(**settings: Any) -> str:
    return next(line for line in check_deployment(_gcp_cfg(**settings)) if "credentials" in line)


def test_gcp_check_refuses_a_machine_type_the_zone_does_not_offer(
    gcp_ready: type[_ServiceUsage],
) -> None:
    """machineTypes.get in the zone the cluster goes to (the user's, else the region's
    first by name, terraform/gcp's pick); a 404 is one line naming a zone that offers it
    or the command that lists them."""
    assert "c3-standard-8 offered in us-central1-a" in _gcp_line()
    gcp_ready.machine_types = {"us-central1-b": {"c3-standard-8": _C3}}
    with pytest.raises(ConfigError) as moved:
        check_deployment(_gcp_cfg())
    assert str(moved.value).startswith(
        "gcp: machine type c3-standard-8 is not offered in us-central1-a, the zone "
        'terraform/gcp takes first: set [gcp] zone = "us-central1-b"'
    )
    assert "c3-standard-8 offered in us-central1-b" in _gcp_line(vm_zone="us-central1-b")
    with pytest.raises(ConfigError) as nowhere:
        check_deployment(_gcp_cfg(vm_zone="us-central1-c"))
    message = str(nowhere.value)
    assert "not offered in us-central1-c: pick another type" in message
    assert "`gcloud compute machine-types list --filter=name=c3-standard-8`" in message
    assert "\n" not in message
    # No right to read machine types (deployer-role.yaml grants none): said, not fatal.
    gcp_ready.types_status = 403
    line = _gcp_line(vm_zone="us-central1-c")
    assert "machine types not checked (machineTypes.get: HTTP 403); quota not checked" in line


def test_gcp_check_counts_vcpus_and_gpus_against_the_regions_quotas(
    gcp_ready: type[_ServiceUsage],
) -> None:
    """regions.get's quotas less their usage: C3 counts against C3_CPUS, spot against
    PREEMPTIBLE_CPUS once the region grants it, a G2 VM's L4 against NVIDIA_L4_GPUS."""
    assert "16 of 24 free C3_CPUS" in _gcp_line()  # 2 x c3-standard-8
    gcp_ready.quotas = [
        {"metric": "C3_CPUS", "limit": 24.0, "usage": 10.0},
        {"metric": "PREEMPTIBLE_CPUS", "limit": 64.0, "usage": 0.0},
    ]
    with pytest.raises(ConfigError) as short:
        check_deployment(_gcp_cfg())
    assert str(short.value).startswith(
        "gcp: the cluster needs 16 C3_CPUS in us-central1, but the quota is 24 with 10 in "
        "use: ask for more (metric C3_CPUS, region us-central1: https://console.cloud."
        "google.com/iam-admin/quotas?project=proj-1) or use fewer or smaller nodes"
    )
    assert "16 of 64 free PREEMPTIBLE_CPUS" in _gcp_line(vm_spot=True)
    g2 = {
        "kind": "compute#machineType",
        "name": "g2-standard-8",
        "guestCpus": 8,
        "accelerators": [{"guestAcceleratorType": "nvidia-l4", "guestAcceleratorCount": 1}],
    }
    gcp_ready.machine_types["us-central1-a"]["g2-standard-8"] = g2
    gcp_ready.quotas = [
        {"metric": "CPUS", "limit": 24.0, "usage": 0.0},
        {"metric": "NVIDIA_L4_GPUS", "limit": 1.0, "usage": 0.0},
    ]
    with pytest.raises(
        ConfigError, match="needs 2 NVIDIA_L4_GPUS in us-central1, but the quota is 1 with 0 in use"
    ):
        check_deployment(_gcp_cfg(vm_instance_type="g2-standard-8"))
    gcp_ready.quotas[1]["limit"] = 4.0
    line = _gcp_line(vm_instance_type="g2-standard-8")
    assert "16 of 24 free CPUS; 2 of 4 free NVIDIA_L4_GPUS" in line


def test_gcp_check_names_the_permissions_the_caller_lacks(
    gcp_ready: type[_ServiceUsage],
) -> None:
    """testIamPermissions with deployer-role.yaml's own list; missing ones are one line
    naming them and the role file; an API that cannot be asked is said, not fatal."""
    import yaml

    role = Path(__file__).resolve().parents[2] / "terraform" / "gcp" / "deployer-role.yaml"
    wanted = yaml.safe_load(role.read_text())["includedPermissions"]
    assert f"all {len(wanted)} permissions of terraform/gcp/deployer-role.yaml held" in _gcp_line()
    assert gcp_ready.asked == wanted
    gcp_ready.granted = set(wanted) - {"compute.instances.create", "storage.buckets.create"}
    with pytest.raises(ConfigError) as lacking:
        check_deployment(_gcp_cfg())
    assert str(lacking.value) == (
        "gcp: the caller lacks 2 permission(s) terraform/gcp needs in project proj-1: "
        "compute.instances.create, storage.buckets.create: grant the role in "
        "terraform/gcp/deployer-role.yaml (the gcloud commands at its top)"
    )
    gcp_ready.iam_status = 403
    assert "permissions not checked (testIamPermissions: HTTP 403)" in _gcp_line()


# ------------------------------------------------------------------ Azure (a stand-in az)
_SUBSCRIPTION = "00000000-0000-0000-0000-000000000001"
_IMAGE = (
    f"/subscriptions/{_SUBSCRIPTION}/resourceGroups/images/providers/Microsoft.Compute/"
    "images/syndeo-1"
)
# A stand-in `az` answering from a JSON file the test may change between calls, as the CLI
# prints the ARM objects (the shapes and their sources: azurecheck.py's docstring).  Each
# call is logged, one line of arguments each.
_FAKE_AZ = """
import json, os, sys
path = os.environ["FAKE_AZ_STATE"]
state = json.load(open(path))
a = sys.argv[1:]
open(path + ".log", "a").write(" ".join(a) + "\\n")
def arg(flag):
    return a[a.index(flag) + 1]
def out(value):
    print(value if isinstance(value, str) else json.dumps(value))
def fail(why):
    sys.exit("ERROR: " + why)
if a[:2] == ["account", "show"]:
    out(state["subscription"])
elif a[:2] == ["resource", "show"] and arg("--ids") in state["tags"]:
    out(state["tags"][arg("--ids")])
elif a[:2] == ["provider", "show"]:
    out(state["providers"].get(arg("--namespace"), "NotRegistered"))
elif a[:2] == ["group", "show"] and arg("--name") in state["groups"]:
    out(state["groups"][arg("--name")])
elif a[:2] == ["group", "show"]:
    fail(f"(ResourceGroupNotFound) Resource group '{arg('--name')}' could not be found.")
elif a[:2] == ["vm", "list-skus"]:
    out([s for s in state["skus"] if arg("--size").lower() in s["name"].lower()
         and arg("--location") in s["locations"]])
elif a[:2] == ["vm", "list-usage"]:
    out(state["usage"].get(arg("--location"), []))
elif a[:1] == ["rest"] and arg("--url").split("?")[0] in state["permissions"]:
    out({"value": state["permissions"][arg("--url").split("?")[0]]})
elif a[:1] == ["rest"]:
    fail("(AuthorizationFailed) The client does not have authorization to perform action.")
else:
    fail("(ResourceNotFound) The Resource was not found.")
"""


def _sku(name: str, family: str, vcpus: int, where: str = "westeurope") -> dict[str, Any]:
    return {
        "name": name,
        "family": family,
        "resourceType": "virtualMachines",
        "tier": "Standard",
        "locations": [where],
        "restrictions": [],
        "capabilities": [
            {"name": "vCPUs", "value": str(vcpus)},
            {"name": "MemoryGB", "value": "32"},
        ],
    }


def _usage(value: str, title: str, limit: int, used: int = 0) -> dict[str, Any]:
    return {
        "name": {"value": value, "localizedValue": title},
        "currentValue": used,
        "limit": limit,
        "unit": "Count",
    }


class _FakeAz:
    """The stand-in's state: change it, then ``save()``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.state: dict[str, Any] = {
            "subscription": _SUBSCRIPTION,
            "tags": {_IMAGE: {"syndeo-image-digest": "d" * 64}},
            "providers": {
                ns: "Registered"
                for ns in (
                    "Microsoft.Compute",
                    "Microsoft.Network",
                    "Microsoft.Storage",
                    "Microsoft.ManagedIdentity",
                )
            },
            "groups": {"syndeo-rg": "northeurope"},
            "skus": [
                _sku("Standard_D8s_v5", "standardDSv5Family", 8),
                _sku("Standard_D8s_v5", "standardDSv5Family", 8, "northeurope"),
            ],
            "usage": {
                where: [
                    _usage("cores", "Total Regional vCPUs", 100),
                    _usage("standardDSv5Family", "Standard DSv5 Family vCPUs", 100),
                    _usage("lowPriorityCores", "Total Regional Low-priority vCPUs", 100),
                ]
                for where in ("westeurope", "northeurope")
            },
            "permissions": {},
        }
        self.save()

    def save(self) -> None:
        self.path.write_text(json.dumps(self.state))

    def calls(self) -> list[str]:
        log = self.path.with_name(self.path.name + ".log")
        return log.read_text().splitlines() if log.exists() else []


@pytest.fixture
def fake_az(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> _FakeAz:
    """An `az login` (its profile) and the stand-in az first on PATH."""
    for key in list(os.environ):
        if key.startswith(("ARM_", "AZURE_")):
            monkeypatch.delenv(key)
    (tmp_path / ".azure").mkdir()
    (tmp_path / ".azure" / "azureProfile.json").write_text("{}")
    monkeypatch.setenv("HOME", str(tmp_path))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "az").write_text(f"#!{sys.executable}\n{_FAKE_AZ}")
    (bin_dir / "az").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_AZ_STATE", str(tmp_path / "az-state.json"))
    return _FakeAz(tmp_path / "az-state.json")


def _azure_cfg(image: str = _IMAGE, **settings: Any) -> Any:
    over = {"vm_instance_type": "Standard_D8s_v5", **settings}
    return load_config(
        None,
        target="azure",
        nodes=2,
        vm_region="westeurope",
        vm_image=image,
        rendezvous=None,
        **over,
    )


def _azure_line(**settings: Any) -> str:
    from syndeo.launcher.targets import get_target
    from syndeo.launcher.targets.cloud import CloudTarget

    return cast(CloudTarget, get_target(_azure_cfg(**settings))).check_credentials()


def test_azure_check_reads_the_image_digest_tag(fake_az: _FakeAz) -> None:
    """With an `az login`, the image's syndeo-image-digest tag (packer/cloud's) is read with
    `az resource show`."""
    from syndeo.launcher.targets import get_target
    from syndeo.launcher.targets.cloud import CloudTarget

    target = cast(CloudTarget, get_target(_azure_cfg()))
    line = target.check_credentials()
    assert target.baked_digest == "d" * 64 and "SIF sha256 dddddddddddd" in line
    with pytest.raises(ConfigError, match=r"cannot read image .*ResourceNotFound"):
        cast(CloudTarget, get_target(_azure_cfg(_IMAGE + "-gone"))).check_credentials()


def test_azure_check_refuses_unregistered_resource_providers(fake_az: _FakeAz) -> None:
    assert "Compute, Network, Storage, ManagedIdentity registered" in _azure_line()
    fake_az.state["providers"]["Microsoft.Network"] = "NotRegistered"
    fake_az.state["providers"]["Microsoft.ManagedIdentity"] = "Registering"
    fake_az.save()
    with pytest.raises(ConfigError) as refused:
        _azure_line()
    assert str(refused.value) == (
        f"azure: Microsoft.Network, Microsoft.ManagedIdentity not registered in subscription "
        f"{_SUBSCRIPTION} (terraform/azure registers none): az provider register --namespace "
        "Microsoft.Network && az provider register --namespace Microsoft.ManagedIdentity "
        "(once, by someone who may)"
    )


def test_azure_check_counts_vcpus_against_the_regional_and_family_quotas(
    fake_az: _FakeAz,
) -> None:
    """list-skus gives the size's vCPUs and family; list-usage the quotas and their use:
    on demand the regional total and the family, spot the low-priority total."""
    line = _azure_line()
    assert "Standard_D8s_v5 offered in westeurope" in line
    assert "16 of 100 free vCPUs of Total Regional vCPUs" in line
    assert "16 of 100 free vCPUs of Standard DSv5 Family vCPUs" in line
    fake_az.state["usage"]["westeurope"][1] = _usage(
        "standardDSv5Family", "Standard DSv5 Family vCPUs", 20, used=10
    )
    fake_az.save()
    with pytest.raises(ConfigError) as short:
        _azure_line()
    assert str(short.value).startswith(
        "azure: the cluster needs 16 vCPUs of Standard DSv5 Family vCPUs (standardDSv5Family) "
        "in westeurope, but the quota is 20 with 10 in use: ask for more (`az quota update "
        "--resource-name standardDSv5Family --scope /subscriptions/"
        f"{_SUBSCRIPTION}/providers/Microsoft.Compute/locations/westeurope "
        "--limit-object value=26`"
    )
    assert "16 of 100 free vCPUs of Total Regional Low-priority vCPUs" in _azure_line(vm_spot=True)
    with pytest.raises(ConfigError, match="VM size Standard_E4s_v5 is not offered in westeurope"):
        _azure_line(vm_instance_type="Standard_E4s_v5")


def test_azure_check_compares_the_callers_permissions_with_the_deployer_role(
    fake_az: _FakeAz,
) -> None:
    """The permissions API on [azure] resource_group (its location is where the VMs and
    their quota are), wildcards as granted; missing actions are one line naming them."""
    role = json.loads(
        (Path(__file__).resolve().parents[2] / "terraform/azure/deployer-role.json").read_text()
    )
    url = (
        f"https://management.azure.com/subscriptions/{_SUBSCRIPTION}/resourceGroups/"
        "syndeo-rg/providers/Microsoft.Authorization/permissions"
    )
    assert "permissions not checked (no [azure] resource_group" in _azure_line()
    assert "permissions not checked ((AuthorizationFailed)" in _azure_line(
        vm_resource_group="syndeo-rg"
    )
    fake_az.state["permissions"][url] = [
        {"actions": ["Microsoft.Network/*", "Microsoft.Compute/*"], "notActions": []},
        {
            "actions": [
                a
                for a in role["Actions"]
                if not a.startswith(("Microsoft.Network/", "Microsoft.Compute/"))
            ],
            "notActions": [],
        },
    ]
    fake_az.save()
    line = _azure_line(vm_resource_group="syndeo-rg")
    assert f"all {len(role['Actions'])} actions of terraform/azure/deployer-role.json held" in line
    assert any(c.startswith("vm list-usage --location northeurope") for c in fake_az.calls())
    fake_az.state["permissions"][url][0]["notActions"] = ["Microsoft.Compute/disks/*"]
    fake_az.save()
    with pytest.raises(ConfigError) as lacking:
        _azure_line(vm_resource_group="syndeo-rg")
    assert str(lacking.value) == (
        "azure: the caller lacks 3 action(s) terraform/azure needs on resource group "
        "syndeo-rg: Microsoft.Compute/disks/read, Microsoft.Compute/disks/write, "
        "Microsoft.Compute/disks/delete: assign the role in terraform/azure/deployer-role.json "
        "on that group (terraform/azure/README.md)"
    )
    with pytest.raises(ConfigError, match="resource group gone-rg does not exist in subscription"):
        _azure_line(vm_resource_group="gone-rg")


# ------------------------------------------------------------------ Azure
def test_azure_needs_a_subscription(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for key in list(os.environ):
        if key.startswith(("ARM_", "AZURE_")):
            monkeypatch.delenv(key)
    monkeypatch.setenv("HOME", str(tmp_path))  # no `az login` profile
    monkeypatch.setenv("ARM_CLIENT_ID", "app")
    cfg = load_config(
        None,
        target="azure",
        nodes=2,
        vm_instance_type="Standard_D8s_v5",
        vm_region="westeurope",
        vm_image="/subscriptions/s/images/syndeo",
        rendezvous=None,
    )
    with pytest.raises(ConfigError, match="no subscription: set ARM_SUBSCRIPTION_ID"):
        check_deployment(cfg)
    monkeypatch.setenv("ARM_SUBSCRIPTION_ID", "00000000-0000-0000-0000-000000000001")
    assert any(
        "subscription 00000000-0000-0000-0000-000000000001" in line
        for line in check_deployment(cfg)
    )
