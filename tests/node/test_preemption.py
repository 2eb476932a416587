"""Each cloud's spot notice, read by the node's watcher from a real HTTP server on
127.0.0.1 that acts as that cloud's metadata service: EC2's IMDSv2 (the emulator's own
handler, ``testbeds/imds.py``), GCP's, Azure's and Alibaba Cloud ECS's
(``tests/support/metadata.py``).
The fakes refuse a request without the cloud's header or token, as the real ones do;
the notice parsed is checked field by field, and the watcher's record read back from
a real rendezvous."""

from __future__ import annotations

import socket
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from syndeo.core.errors import ConfigError
from syndeo.core.nodeconfig import NodeSettings
from syndeo.node.preemption import Notice, Probe, Watcher
from syndeo.rendezvous import open_rendezvous
from testbeds import imds
from tests.support.metadata import FakeMetadata

AWS_TIME = "2026-11-24T10:02:00Z"
AWS_EPOCH = 1795514520.0  # AWS_TIME
AZURE_NOT_BEFORE = "Tue, 24 Nov 2026 10:00:30 GMT"
AZURE_EPOCH = 1795514430.0  # AZURE_NOT_BEFORE
ALIBABA_TIME = "2026-11-24T10:05:00Z"
ALIBABA_EPOCH = 1795514700.0  # ALIBABA_TIME


def _status(url: str, headers: dict[str, str] | None = None, method: str = "GET") -> int:
    req = urllib.request.Request(url, headers=headers or {}, method=method)
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return exc.code


@pytest.fixture
def ec2() -> Iterator[tuple[str, imds.Instance]]:
    """The emulator's IMDSv2 for one instance (tokens required), on 127.0.0.1."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    inst = imds.Instance(
        instance_id="i-0123456789abcdef0",
        private_ip="10.0.0.5",
        zone="us-east-1a",
        region="us-east-1",
        http_tokens="required",
        hop_limit=1,
        profile_arn=None,
        profile_id=None,
        role_name=None,
    )
    server = imds.serve(sock, inst, lambda _i: {}, lambda _i: None)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}", inst
    finally:
        server.shutdown()
        server.server_close()


def test_aws_notice_through_imdsv2(ec2: tuple[str, imds.Instance]) -> None:
    url, inst = ec2
    action = f"{url}/latest/meta-data/spot/instance-action"
    assert _status(action) == 401  # IMDSv2: no token, no answer
    probe = Probe("aws", url)
    assert probe.check() is None  # 404: no notice yet
    assert len(inst.tokens) == 1  # the client asked for a session token
    inst.spot_action = {"action": "terminate", "time": AWS_TIME}
    before = time.time()
    notice = probe.check()
    assert notice is not None
    assert (notice.cloud, notice.action, notice.deadline) == ("aws", "terminate", AWS_EPOCH)
    assert before <= notice.noticed_at <= time.time()
    assert len(inst.tokens) == 1  # the token is reused, not asked for per poll


def test_gcp_notice_needs_the_metadata_flavor_header() -> None:
    with FakeMetadata("gcp") as fake:
        preempted = f"{fake.url}/computeMetadata/v1/instance/preempted"
        assert _status(preempted) == 403
        assert _status(preempted, {"Metadata-Flavor": "Google"}) == 200
        probe = Probe("gcp", fake.url)
        assert probe.check() is None  # FALSE
        fake.preempt()
        notice = probe.check()
        assert notice is not None
        assert (notice.cloud, notice.action) == ("gcp", "preempted")
        assert notice.deadline == notice.noticed_at + 30  # GCP gives 30 s, says no time
        client = fake.requests()[-2:]
        assert all(h.get("Metadata-Flavor") == "Google" for _p, h in client)


def _event(kind: str, vms: list[str]) -> dict[str, object]:
    return {
        "EventId": "602d9444-d2cd-49c7-8624-8643e7171297",
        "EventType": kind,
        "ResourceType": "VirtualMachine",
        "Resources": vms,
        "EventStatus": "Scheduled",
        "NotBefore": AZURE_NOT_BEFORE,
        "Description": "",
        "EventSource": "Platform",
        "DurationInSeconds": -1,
    }


def test_azure_notice_is_a_preempt_event_naming_this_vm() -> None:
    with FakeMetadata("azure") as fake:
        events = f"{fake.url}/metadata/scheduledevents?api-version=2020-07-01"
        assert _status(events) == 400  # no `Metadata: true`
        assert _status(f"{fake.url}/metadata/scheduledevents", {"Metadata": "true"}) == 400
        probe = Probe("azure", fake.url)
        assert probe.check() is None  # no events
        # A reboot of this VM, and a preemption of another VM of its scale set: not ours.
        fake.preempt([_event("Reboot", ["vm-fake"]), _event("Preempt", ["vm-other"])])
        assert probe.check() is None
        fake.preempt([_event("Freeze", ["vm-fake"]), _event("Preempt", ["vm-fake"])])
        notice = probe.check()
        assert notice is not None
        assert (notice.cloud, notice.action, notice.deadline) == ("azure", "Preempt", AZURE_EPOCH)
        assert all(h.get("Metadata") == "true" for _p, h in fake.requests()[2:])


def test_alibaba_notice_is_the_termination_time_read_with_a_session_token() -> None:
    with FakeMetadata("alibaba") as fake:
        notice_url = f"{fake.url}/latest/meta-data/instance/spot/termination-time"
        assert _status(notice_url) == 401  # hardened mode: no token, no answer
        probe = Probe("alibaba", fake.url)
        assert probe.check() is None  # 404: no notice
        fake.preempt(ALIBABA_TIME)
        notice = probe.check()
        assert notice is not None
        assert (notice.cloud, notice.action, notice.deadline) == (
            "alibaba",
            "terminate",
            ALIBABA_EPOCH,
        )
        sent = [(p, {k.lower(): v for k, v in h.items()}) for p, h in fake.requests()[1:]]
        # One token (PUT, with its TTL), then every read carries it.
        assert [p for p, _h in sent].count("/latest/api/token") == 1
        assert sent[0][1]["x-aliyun-ecs-metadata-token-ttl-seconds"] == "21600"
        reads = [h for p, h in sent if p != "/latest/api/token"]
        assert len(reads) == 2
        assert all(h["x-aliyun-ecs-metadata-token"] == fake.state.token for h in reads)


def _settings(tmp_path: Path, **env: str) -> NodeSettings:
    return NodeSettings.from_env(
        {
            "SYNDEO_CLUSTER_ID": "spot-w",
            "SYNDEO_RANK": "3",
            "SYNDEO_NODES": "4",
            "SYNDEO_RENDEZVOUS": (tmp_path / "rdv").as_uri(),
            "SYNDEO_SCRATCH": "/tmp/spot-w",
            **env,
        }
    )


def test_the_watcher_drains_once_and_records_the_notice(tmp_path: Path) -> None:
    with FakeMetadata("gcp") as fake:
        s = _settings(
            tmp_path, SYNDEO_SPOT_NOTICES="gcp", SYNDEO_METADATA_URL=fake.url + "/r{rank}"
        )
        rdv = open_rendezvous(s.rendezvous, s.cluster_id)
        drained: list[Notice] = []
        logged: list[str] = []
        watcher = Watcher(s, rdv, drained.append, logged.append, poll_s=0.05).start()
        try:
            deadline = time.monotonic() + 10
            while len(fake.requests()) < 3 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert rdv.read_interrupted(3) is None and drained == []
            fake.preempt(instance="r3")
            while rdv.read_interrupted(3) is None and time.monotonic() < deadline:
                time.sleep(0.05)
        finally:
            watcher.stop()
        rec = rdv.read_interrupted(3)
        assert rec is not None
        [notice] = drained  # drained once, before the record was written
        assert (rec.rank, rec.cloud, rec.action) == (3, "gcp", "preempted")
        assert (rec.noticed_at, rec.deadline) == (notice.noticed_at, notice.deadline)
        # Watching ends with the notice: nothing more is asked of the metadata service.
        asked = len(fake.requests())
        time.sleep(0.3)
        assert len(fake.requests()) == asked
        assert {p.split("/")[1] for p, _h in fake.requests()} == {"r3"}
        assert any("spot notice from gcp" in line for line in logged)


def test_the_watcher_records_an_alibaba_notice_with_its_termination_time(
    tmp_path: Path,
) -> None:
    with FakeMetadata("alibaba") as fake:
        s = _settings(
            tmp_path, SYNDEO_SPOT_NOTICES="alibaba", SYNDEO_METADATA_URL=fake.url + "/r{rank}"
        )
        rdv = open_rendezvous(s.rendezvous, s.cluster_id)
        drained: list[Notice] = []
        watcher = Watcher(s, rdv, drained.append, lambda _line: None, poll_s=0.05).start()
        try:
            deadline = time.monotonic() + 10
            fake.preempt(ALIBABA_TIME, instance="r3")
            while rdv.read_interrupted(3) is None and time.monotonic() < deadline:
                time.sleep(0.05)
        finally:
            watcher.stop()
        rec = rdv.read_interrupted(3)
        assert rec is not None and [n.cloud for n in drained] == ["alibaba"]
        assert (rec.rank, rec.cloud, rec.action, rec.deadline) == (
            3,
            "alibaba",
            "terminate",
            ALIBABA_EPOCH,
        )
        # Every read of this node's metadata carried the token its PUT got.
        reads = [h for p, h in fake.requests() if p.startswith("/r3/latest/meta-data/")]
        assert reads and all(
            {k.lower(): v for k, v in h.items()}["x-aliyun-ecs-metadata-token"] == fake.state.token
            for h in reads
        )


def test_spot_notices_setting_is_checked(tmp_path: Path) -> None:
    assert _settings(tmp_path).spot_notices is None
    assert _settings(tmp_path, SYNDEO_SPOT_NOTICES="azure").spot_notices == "azure"
    assert _settings(tmp_path, SYNDEO_SPOT_NOTICES="alibaba").spot_notices == "alibaba"
    with pytest.raises(ConfigError, match="SYNDEO_SPOT_NOTICES"):
        _settings(tmp_path, SYNDEO_SPOT_NOTICES="oci")
    env = _settings(tmp_path, SYNDEO_SPOT_NOTICES="aws").to_env()
    assert env["SYNDEO_SPOT_NOTICES"] == "aws" and "SYNDEO_METADATA_URL" not in env
