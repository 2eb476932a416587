"""`syndeo check` / `invoke check`: whether a deploy can start, before anything exists.

Local and bad input through the real command line; AWS against moto (in-process: EC2,
STS); Google Cloud's check against a local fake of the two REST calls it makes
(Service Usage v1 ``services.get``, whose reply is a Service with ``state`` ENABLED or
DISABLED: https://cloud.google.com/service-usage/docs/reference/rest/v1/services/get;
Compute v1 ``images.get``/``getFromFamily``, an Image with a ``description``), with
anonymous credentials standing in for application default credentials; Azure's
subscription rule without any Azure call, and its image tag through a stand-in ``az``.
Nothing here reaches a real cloud.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar, cast

import pytest

from syndeo.core.errors import ConfigError
from syndeo.launcher.config import load_config
from syndeo.launcher.preflight import check_deployment


def _syndeo(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    drop = ("AWS_", "GOOGLE_", "AZURE_", "ARM_", "CLOUDSDK_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env.update(HOME=str(home), SYNDEO_HOME=str(home / ".syndeo"))
    return subprocess.run(
        [sys.executable, "-m", "syndeo", "check", *args], capture_output=True, text=True,
        env=env, cwd=home, timeout=120, check=False,
    )  # fmt: skip


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
        None, target="aws", nodes=2, vm_instance_type=itype, vm_region="us-east-1",
        vm_image=image, rendezvous=None,
    )  # fmt: skip


def _ami(ec2: Any, digest: str) -> str:
    instance = ec2.run_instances(ImageId="ami-12c6146b", MinCount=1, MaxCount=1)
    iid = instance["Instances"][0]["InstanceId"]
    image = ec2.create_image(InstanceId=iid, Name="syndeo-test")["ImageId"]
    ec2.create_tags(Resources=[image], Tags=[{"Key": "syndeo-image-digest", "Value": digest}])
    return str(image)


def test_aws_check_names_identity_image_digest_and_types(aws: Any) -> None:
    image = _ami(aws, "d" * 64)
    found = check_deployment(_aws_cfg(image))
    text = "\n".join(found)
    assert "identity arn:aws:" in text
    assert f"image {image} in us-east-1 (SIF sha256 dddddddddddd)" in text
    assert "c7i.large offered in us-east-1" in text
    assert "a new private bucket is made with the cluster" in text


def test_aws_check_refuses_a_missing_image(aws: Any) -> None:
    with pytest.raises(ConfigError, match="does not exist in us-east-1"):
        check_deployment(_aws_cfg("ami-0123456789abcdef0"))


def test_aws_check_refuses_a_type_not_offered(aws: Any) -> None:
    image = _ami(aws, "e" * 64)
    with pytest.raises(ConfigError, match="not offered in us-east-1"):
        check_deployment(_aws_cfg(image, itype="x9z.huge"))


class _ServiceQuotas(BaseHTTPRequestHandler):
    """Service Quotas' GetServiceQuota (JSON 1.1: POST, X-Amz-Target
    ServiceQuotasV20190624.GetServiceQuota), which moto answers only for VPC quotas.  The
    reply's shape is the API reference's and the AWS CLI guide's example
    (get-aws-default-service-quota for L-1216C47A: {"Quota": {..., "Value": 5.0}});
    an unknown code is its NoSuchResourceException."""

    values: ClassVar[dict[str, float]] = {}
    asked: ClassVar[list[str]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        assert self.headers["X-Amz-Target"] == "ServiceQuotasV20190624.GetServiceQuota"
        code = body["QuotaCode"]
        self.asked.append(f"{body['ServiceCode']}/{code}")
        if code in self.values:
            status, reply = 200, {"Quota": {
                "ServiceCode": "ec2", "QuotaCode": code, "Value": self.values[code],
                "QuotaArn": f"arn:aws:servicequotas:us-east-1::ec2/{code}", "Unit": "None",
                "Adjustable": True, "GlobalQuota": False,
            }}  # fmt: skip
        else:
            status = 400
            reply = {"__type": "NoSuchResourceException", "message": f"no quota {code}"}
        data = json.dumps(reply).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/x-amz-json-1.1")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *_args: Any) -> None:
        pass


@pytest.fixture
def quotas(aws: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[type[_ServiceQuotas]]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _ServiceQuotas)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("AWS_ENDPOINT_URL_SERVICE_QUOTAS", f"http://127.0.0.1:{server.server_port}")
    _ServiceQuotas.values, _ServiceQuotas.asked = {}, []
    try:
        yield _ServiceQuotas
    finally:
        server.shutdown()


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


def test_aws_check_spot_counts_against_the_spot_quota_and_an_unread_one_is_said(
    aws: Any, quotas: type[_ServiceQuotas]
) -> None:
    image = _ami(aws, "a" * 64)
    cfg = load_config(
        None, target="aws", nodes=2, vm_instance_type="g5.xlarge", vm_region="us-east-1",
        vm_image=image, vm_spot=True, rendezvous=None,
    )  # fmt: skip
    text = "\n".join(check_deployment(cfg))
    assert quotas.asked == ["ec2/L-3819A6DF"]  # G and VT spot; the quota is not known
    assert "Spot G and VT instances vCPU quota not read" in text


# ------------------------------------------------------------------ Google Cloud (fake)
class _ServiceUsage(BaseHTTPRequestHandler):
    enabled: ClassVar[set[str]] = set()
    # Compute v1 images by their path (projects/P/global/images/[family/]NAME) -> the
    # Image's description (images.get / getFromFamily reply: an Image resource,
    # https://cloud.google.com/compute/docs/reference/rest/v1/images/get).
    images: ClassVar[dict[str, str]] = {}

    def do_GET(self) -> None:
        if self.path.startswith("/compute/v1/"):
            found = self.images.get(self.path.removeprefix("/compute/v1/"))
            if found is None:
                self.send_error(404)
                return
            image = {"kind": "compute#image", "name": self.path.rsplit("/", 1)[-1],
                     "status": "READY", "description": found}  # fmt: skip
            return self._reply(json.dumps(image).encode())
        parts = self.path.strip("/").split("/")  # v1/projects/P/services/NAME
        name = parts[-1]
        body = json.dumps({
            "name": f"projects/123/services/{name}", "parent": "projects/123",
            "state": "ENABLED" if name in self.enabled else "DISABLED",
        }).encode()  # fmt: skip
        self._reply(body)

    def _reply(self, body: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def serviceusage(monkeypatch: pytest.MonkeyPatch) -> Iterator[type[_ServiceUsage]]:
    import google.auth
    from google.auth.credentials import AnonymousCredentials

    handler = type("Handler", (_ServiceUsage,), {"enabled": set(), "images": {}})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("SYNDEO_GCP_SERVICEUSAGE_URL", f"http://127.0.0.1:{server.server_port}/v1")
    monkeypatch.setenv(
        "SYNDEO_GCP_COMPUTE_URL", f"http://127.0.0.1:{server.server_port}/compute/v1"
    )
    anonymous = AnonymousCredentials()  # type: ignore[no-untyped-call]
    monkeypatch.setattr(google.auth, "default", lambda **_: (anonymous, "proj-1"))
    try:
        yield handler
    finally:
        server.shutdown()


def _gcp_cfg() -> Any:
    return load_config(
        None, target="gcp", nodes=2, vm_instance_type="c3-standard-8", vm_region="us-central1",
        vm_image="projects/p/global/images/syndeo", rendezvous=None,
    )  # fmt: skip


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
    assert any("compute.googleapis.com, iam.googleapis.com enabled" in line
               for line in check_deployment(_gcp_cfg()))  # fmt: skip


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


def test_azure_check_reads_the_image_digest_tag(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """With an `az login`, the image's syndeo-image-digest tag (packer/cloud's) is read with
    `az resource show` (here a stand-in az that answers as the CLI's JSON output does)."""
    from syndeo.launcher.targets import get_target
    from syndeo.launcher.targets.cloud import CloudTarget

    for key in list(os.environ):
        if key.startswith(("ARM_", "AZURE_")):
            monkeypatch.delenv(key)
    (tmp_path / ".azure").mkdir()
    (tmp_path / ".azure" / "azureProfile.json").write_text("{}")
    monkeypatch.setenv("HOME", str(tmp_path))
    image = ("/subscriptions/00000000-0000-0000-0000-000000000001/resourceGroups/images/"
             "providers/Microsoft.Compute/images/syndeo-1")  # fmt: skip
    tags = {image: {"syndeo-image-digest": "d" * 64}}
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "az").write_text(
        f"#!{sys.executable}\n"
        "import json, sys\n"
        f"tags = {tags!r}\n"
        "a = sys.argv[1:]\n"
        "if a[:2] == ['account', 'show']:\n"
        "    print('00000000-0000-0000-0000-000000000001')\n"
        "elif a[:2] == ['resource', 'show'] and a[a.index('--ids') + 1] in tags:\n"
        "    print(json.dumps(tags[a[a.index('--ids') + 1]]))\n"
        "else:\n"
        "    sys.exit('ERROR: (ResourceNotFound) The Resource was not found.')\n"
    )
    (bin_dir / "az").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")

    def cfg(img: str) -> Any:
        return load_config(
            None, target="azure", nodes=2, vm_instance_type="Standard_D8s_v5",
            vm_region="westeurope", vm_image=img, rendezvous=None,
        )  # fmt: skip

    target = cast(CloudTarget, get_target(cfg(image)))
    line = target.check_credentials()
    assert target.baked_digest == "d" * 64 and "SIF sha256 dddddddddddd" in line
    with pytest.raises(ConfigError, match=r"cannot read image .*ResourceNotFound"):
        cast(CloudTarget, get_target(cfg(image + "-gone"))).check_credentials()


# ------------------------------------------------------------------ Azure
def test_azure_needs_a_subscription(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for key in list(os.environ):
        if key.startswith(("ARM_", "AZURE_")):
            monkeypatch.delenv(key)
    monkeypatch.setenv("HOME", str(tmp_path))  # no `az login` profile
    monkeypatch.setenv("ARM_CLIENT_ID", "app")
    cfg = load_config(
        None, target="azure", nodes=2, vm_instance_type="Standard_D8s_v5",
        vm_region="westeurope", vm_image="/subscriptions/s/images/syndeo", rendezvous=None,
    )  # fmt: skip
    with pytest.raises(ConfigError, match="no subscription: set ARM_SUBSCRIPTION_ID"):
        check_deployment(cfg)
    monkeypatch.setenv("ARM_SUBSCRIPTION_ID", "00000000-0000-0000-0000-000000000001")
    assert any("subscription 00000000-0000-0000-0000-000000000001" in line
               for line in check_deployment(cfg))  # fmt: skip
