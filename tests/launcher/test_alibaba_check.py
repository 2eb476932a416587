"""``check --target alibaba`` (and deploy/up before anything exists) against a fake of
the ECS RPC API on 127.0.0.1 (tests/support/ecs_api.py) that verifies every request's
signature: credentials, region, instance types offered in a zone, the image and its SIF
digest; each failure is one line, before anything is created.  Nothing here reaches
Alibaba Cloud (what only a real account shows: docs/verified.md)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from syndeo.core.errors import ConfigError
from syndeo.launcher import alibaba_api
from syndeo.launcher.config import load_config
from syndeo.launcher.preflight import check_deployment
from syndeo.launcher.targets import alibabacheck, get_target
from syndeo.launcher.targets.cloud import CloudTarget
from tests.support.ecs_api import KEY_ID, SECRET, FakeEcs

IMAGE = "m-bp1g7004ksh0oeuc1234"
DIGEST = "d" * 64


@pytest.fixture
def ecs(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeEcs]:
    for name in [k for k in os.environ if k.startswith(("ALIBABA_", "ALICLOUD_"))]:
        monkeypatch.delenv(name)
    # The target sets the region for the launcher's OSS client (setdefault): recorded
    # here so that it is gone after the test.
    for name in ("ALIBABA_CLOUD_REGION", "SYNDEO_OSS_ENDPOINT"):
        monkeypatch.setenv(name, "-")
        monkeypatch.delenv(name)
    with FakeEcs() as fake:
        monkeypatch.setenv("SYNDEO_ALIBABA_ECS_URL", fake.url)
        monkeypatch.setenv("ALIBABA_CLOUD_ACCESS_KEY_ID", KEY_ID)
        monkeypatch.setenv("ALIBABA_CLOUD_ACCESS_KEY_SECRET", SECRET)
        fake.state.stock[("cn-hangzhou", "ecs.g7.2xlarge", True)] = [
            "cn-hangzhou-k",
            "cn-hangzhou-h",
        ]
        fake.state.stock[("cn-hangzhou", "ecs.gn7i-c8g1.2xlarge", True)] = ["cn-hangzhou-h"]
        fake.state.images[IMAGE] = {"syndeo-image-digest": f"sha256:{DIGEST}"}
        fake.state.vcpus.update({"ecs.g7.2xlarge": 8, "ecs.gn7i-c8g1.2xlarge": 8})
        fake.state.attributes.update(
            {"max-spot-instance-vcpu-count": "100", "used-spot-instance-vcpu-count": "60"}
        )
        yield fake


def _cfg(**settings: Any) -> Any:
    over = {"vm_instance_type": "ecs.g7.2xlarge", "vm_region": "cn-hangzhou", **settings}
    over.setdefault("rendezvous", None)
    return load_config(None, target="alibaba", nodes=2, vm_image=IMAGE, vm_spot=True, **over)


def test_check_passes_and_records_the_image_digest(ecs: FakeEcs) -> None:
    lines = check_deployment(_cfg())
    line = next(ln for ln in lines if ln.startswith("alibaba: credentials"))
    assert "credentials from environment; region cn-hangzhou" in line
    assert "ecs.g7.2xlarge offered in cn-hangzhou-h, cn-hangzhou-k" in line
    assert "SIF sha256 dddddddddddd" in line
    assert "16 vCPUs of 40 left in the spot quota" in line
    assert ecs.state.actions == [
        "DescribeRegions",
        "DescribeAvailableResource",
        "DescribeInstanceTypes",
        "DescribeAccountAttributes",
        "DescribeImages",
    ]
    target = cast(CloudTarget, get_target(_cfg()))
    target.check_credentials()
    assert target.baked_digest == DIGEST


@pytest.mark.parametrize(
    ("settings", "change", "expected"),
    [
        (
            {"vm_region": "xx-nowhere-1"},
            None,
            "alibaba: unknown region 'xx-nowhere-1' (this account has cn-hangzhou, eu-central-1)",
        ),
        (
            {"vm_instance_type": "ecs.r8a.large"},
            None,
            "alibaba: ecs.r8a.large is not offered (spot, in stock) in any zone of cn-hangzhou",
        ),
        (
            {"vm_zone": "cn-hangzhou-k"},
            ("stock", ("cn-hangzhou", "ecs.g7.2xlarge", True), ["cn-hangzhou-h"]),
            "alibaba: ecs.g7.2xlarge is not offered (spot, in stock) in zone cn-hangzhou-k",
        ),
        (
            {},
            ("images", IMAGE, {"owner": "me"}),
            f"alibaba: image {IMAGE} has no syndeo-image-digest tag (the SIF's sha256): build "
            "it with packer/cloud, which tags it",
        ),
        ({}, ("images", IMAGE, None), f"alibaba: image {IMAGE} does not exist in cn-hangzhou"),
    ],
)
def test_bad_input_is_one_line(
    ecs: FakeEcs, settings: dict[str, Any], change: Any, expected: str
) -> None:
    if change is not None:
        table, key, value = change
        if value is None:
            getattr(ecs.state, table).pop(key)
        else:
            getattr(ecs.state, table)[key] = value
    with pytest.raises(ConfigError) as err:
        check_deployment(_cfg(**settings))
    assert str(err.value).startswith(expected) and "\n" not in str(err.value)


def test_types_of_every_group_must_share_a_zone(ecs: FakeEcs) -> None:
    types = ["ecs.g7.2xlarge", "ecs.gn7i-c8g1.2xlarge"]
    creds = alibaba_api.credentials()
    offered = alibabacheck.zones_offering("cn-hangzhou", types, True, creds, None)
    assert offered == "ecs.g7.2xlarge, ecs.gn7i-c8g1.2xlarge offered in cn-hangzhou-h"
    ecs.state.stock[("cn-hangzhou", "ecs.gn7i-c8g1.2xlarge", True)] = ["cn-hangzhou-j"]
    with pytest.raises(ConfigError, match="no zone of cn-hangzhou offers all of"):
        alibabacheck.zones_offering("cn-hangzhou", types, True, creds, None)


def test_a_wrong_secret_is_refused_by_the_signature_check(
    ecs: FakeEcs, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ALIBABA_CLOUD_ACCESS_KEY_SECRET", "not-the-secret")
    with pytest.raises(ConfigError, match="cannot list regions \\(SignatureDoesNotMatch"):
        check_deployment(_cfg())


def test_deploy_stops_before_anything_on_bad_input(ecs: FakeEcs, tmp_path: Path) -> None:
    env = {**os.environ, "HOME": str(tmp_path), "SYNDEO_HOME": str(tmp_path / ".syndeo")}
    args = ["--target", "alibaba", "--instance-type", "ecs.g7.2xlarge", "--spot"]
    args += ["--region", "xx-nowhere-1", "--image", IMAGE]
    out = subprocess.run(
        [sys.executable, "-m", "syndeo", "deploy", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    assert out.returncode == 2, out
    assert out.stderr.startswith("syndeo: error: alibaba: unknown region 'xx-nowhere-1'")
    assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr
    assert not list(tmp_path.rglob("terraform.tfstate")) and not list(tmp_path.rglob(".terraform"))


def test_vcpus_beyond_the_quota_are_one_line(ecs: FakeEcs) -> None:
    ecs.state.attributes["used-spot-instance-vcpu-count"] = "90"
    with pytest.raises(ConfigError) as err:
        check_deployment(_cfg())
    assert str(err.value) == (
        "alibaba: the cluster needs 16 vCPUs (spot) but cn-hangzhou has 10 of its quota of "
        "100 left: ask for more (Quota Center) or use fewer"
    )
    # A quota the API does not give is named, not guessed.
    ecs.state.attributes.clear()
    assert any("vCPU quota not checked" in line for line in check_deployment(_cfg()))


def test_check_reaches_a_named_bucket_in_the_clusters_region(
    ecs: FakeEcs, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bucket given with --rendezvous is reached at the region's OSS endpoint (the
    launcher's; the nodes get the internal one from terraform/alibaba)."""
    reached: list[str] = []

    class Probe:
        def __init__(self, uri: str, cluster_id: str, attempt: int = 0) -> None:
            reached.append(os.environ.get("ALIBABA_CLOUD_REGION", ""))

        def check(self) -> None:
            return None

    monkeypatch.setattr("syndeo.rendezvous.open_rendezvous", lambda uri, cid: Probe(uri, cid))
    lines = check_deployment(_cfg(rendezvous="oss://syndeo-mine/p"))
    assert reached == ["cn-hangzhou"] and lines[-1] == "rendezvous: oss://syndeo-mine/p reachable"
