"""The OSS backend's own rules, against moto_server behind testbeds/osshost.py (which
answers path-style requests as OSS does: 403 SecondLevelDomainForbidden) and the ECS
metadata fake of tests/support/metadata.py (hardened mode: no token, no answer).

The contract suite (test_contract.py, kind "oss") runs every rendezvous rule on the same
setup, including the races that prove the conditional create; here: that every request
is virtual-hosted, that a create carries both conditional headers and a plain write
neither, that OSS's own refusal (409 FileAlreadyExists) reads as "exists", that nodes
sign in with the RAM role's STS credentials from the metadata service, and that missing
credentials are one clear line.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from botocore.stub import Stubber

from syndeo.core.errors import RendezvousError
from syndeo.rendezvous import open_rendezvous
from syndeo.rendezvous.oss import OSSRendezvous
from testbeds.objectstores import Server
from testbeds.osshost import ENDPOINT_HOST, VirtualHosts
from tests.rendezvous.conftest import Backend, oss_backend
from tests.support.metadata import FakeMetadata

pytestmark = pytest.mark.objectstore


@pytest.fixture
def oss(
    shared_server: Callable[[str], Server],
    oss_hosts: VirtualHosts,
    monkeypatch: pytest.MonkeyPatch,
) -> Backend:
    return oss_backend(shared_server("s3"), oss_hosts, monkeypatch)


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _headers(rdv: OSSRendezvous) -> Iterator[list[dict[str, str]]]:
    sent: list[dict[str, str]] = []

    def keep(request: Any, **_: Any) -> None:
        sent.append({k.lower(): _text(v) for k, v in request.headers.items()})

    rdv.client.meta.events.register("before-send.s3.PutObject", keep)
    yield sent


def test_every_request_is_virtual_hosted(oss: Backend, oss_hosts: VirtualHosts) -> None:
    before = len(oss_hosts.seen_hosts)
    rdv = open_rendezvous(oss.uri, "vh1")
    rdv.check()
    assert rdv._create("a.json", b"1")
    assert rdv._read("a.json") == b"1"
    bucket = oss.uri.split("/")[2]
    hosts = set(oss_hosts.seen_hosts[before:])
    assert hosts == {f"{bucket}.{ENDPOINT_HOST}:{oss.server.port if oss.server else 0}"}


def test_path_style_is_refused_as_oss_refuses_it(oss: Backend, oss_hosts: VirtualHosts) -> None:
    """Guards the test above: a path-style client fails on this setup, as on OSS."""
    client = boto3.session.Session().client(
        "s3",
        endpoint_url=oss_hosts.endpoint,
        region_name="test-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(s3={"addressing_style": "path"}),
    )
    with pytest.raises(ClientError) as caught:
        client.list_objects_v2(Bucket=oss.uri.split("/")[2])
    assert caught.value.response["Error"]["Code"] == "SecondLevelDomainForbidden"


def test_a_create_carries_both_conditional_headers(oss: Backend) -> None:
    rdv = open_rendezvous(oss.uri, "hd1")
    assert isinstance(rdv, OSSRendezvous)
    sent = next(_headers(rdv))
    assert rdv._create("claim.json", b"x")
    assert not rdv._create("claim.json", b"y")  # 412 from the S3 header
    rdv._write("plain.json", b"z")
    creates, plain = sent[:2], sent[2]
    for h in creates:
        assert h["if-none-match"] == "*" and h["x-oss-forbid-overwrite"] == "true"
    for h in sent:
        # A plain body: OSS refuses aws-chunked uploads (its AWS SDK guide).
        assert "content-encoding" not in h and "x-amz-decoded-content-length" not in h
        assert not h.get("x-amz-content-sha256", "").startswith("STREAMING-")
        assert "x-amz-trailer" not in h
    assert "if-none-match" not in plain and "x-oss-forbid-overwrite" not in plain
    assert rdv._read("claim.json") == b"x"


def test_oss_own_refusal_reads_as_exists(oss: Backend) -> None:
    """OSS answers x-oss-forbid-overwrite with 409 FileAlreadyExists (not S3's 412)."""
    rdv = open_rendezvous(oss.uri, "fx1")
    assert isinstance(rdv, OSSRendezvous)
    with Stubber(rdv.client) as stub:
        stub.add_client_error("put_object", "FileAlreadyExists", "The object exists.", 409)
        assert rdv._put_if_absent("syndeo/rv/fx1/k", b"x") is False
        stub.add_client_error("put_object", "AccessDenied", "no", 403)
        with pytest.raises(ClientError):
            rdv._put_if_absent("syndeo/rv/fx1/k", b"x")


def test_nodes_sign_in_with_the_ram_roles_sts_credentials(
    oss: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("ALIBABA_CLOUD_ACCESS_KEY_ID", "ALIBABA_CLOUD_ACCESS_KEY_SECRET"):
        monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", "/nonexistent")  # no ~/.aliyun/config.json either
    with FakeMetadata("alibaba") as fake:
        expires = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 3600))
        fake.state.sts = {
            "Code": "Success",
            "AccessKeyId": "STS.testing",
            "AccessKeySecret": "sts-secret",
            "SecurityToken": "sts-token-abc",
            "Expiration": expires,
        }
        monkeypatch.setenv("SYNDEO_ALIBABA_METADATA_URL", fake.url)
        monkeypatch.setenv("ALIBABA_CLOUD_ECS_METADATA", fake.state.role)
        rdv = open_rendezvous(oss.uri, "sts1")
        assert isinstance(rdv, OSSRendezvous)
        sent = next(_headers(rdv))
        assert rdv._create("k.json", b"1")
        assert sent[0]["x-amz-security-token"] == "sts-token-abc"
        assert "Credential=STS.testing/" in sent[0]["authorization"]
        paths = [p for p, _h in fake.requests()]
        assert paths == [
            "/latest/api/token",
            f"/latest/meta-data/ram/security-credentials/{fake.state.role}",
        ]


def test_no_credentials_is_one_clear_line(oss: Backend, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ALIBABA_CLOUD_ACCESS_KEY_ID", "ALIBABA_CLOUD_ACCESS_KEY_SECRET"):
        monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", "/nonexistent")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    with pytest.raises(RendezvousError) as caught:
        open_rendezvous(oss.uri, "nc1").check()
    message = str(caught.value)
    assert "no Alibaba Cloud credentials" in message and "\n" not in message


def test_missing_bucket_is_one_line(
    shared_server: Callable[[str], Server],
    oss_hosts: VirtualHosts,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    backend = oss_backend(shared_server("s3"), oss_hosts, monkeypatch, create=False)
    with pytest.raises(RendezvousError) as caught:
        open_rendezvous(backend.uri, "mb1").check()
    message = str(caught.value)
    assert "the bucket does not exist" in message and "\n" not in message
    assert message.startswith(f"OSS rendezvous: cannot list {backend.uri.split('/rv')[0]}")
