"""What a cloud target's watcher learns of its VMs from the provider's own list
(``CloudTarget.machines_ended``): which ranks ended and why, in one request per poll.

One scenario on every cloud, each in its provider's words: rank 1's VM stopped, rank 2's
old VM terminated while its replacement runs (so rank 2 lives), rank 3 runs and is then
deleted (a spot VM taken back), and VMs of another cluster or without a rank are not the
cluster's.  EC2 is moto_server (a real emulator); Google Cloud, Azure and Alibaba Cloud
are local stand-ins answering in the shapes their references document (the references
are named in each ``list_machines``): nothing here reaches a real cloud.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar, cast
from urllib.parse import parse_qs, urlsplit

import pytest

from syndeo.launcher.config import load_config
from syndeo.launcher.spec import Launched
from syndeo.launcher.targets import cloud, get_target
from syndeo.launcher.targets.cloud import CloudTarget
from tests.support.ecs_api import KEY_ID, SECRET, FakeEcs
from tests.support.fake_api import Fake, serving
from tests.support.moto import moto_aws

CID = "c-7f3a"
SUBSCRIPTION = "00000000-0000-0000-0000-000000000001"
HEAD_ID = (
    f"/subscriptions/{SUBSCRIPTION}/resourceGroups/syndeo-{CID}-rg/providers/"
    "Microsoft.Compute/virtualMachines/syndeo-c-7f3a-0"
)


def _target(name: str) -> CloudTarget:
    cfg = load_config(None, target=name, nodes=1, rendezvous=None)
    return cast(CloudTarget, get_target(cfg))


def _launched(name: str, **part: Any) -> Launched:
    return Launched.model_validate(
        {
            "target": name,
            "cluster_id": CID,
            "rendezvous": "x://bucket/syndeo",
            "started_at": 0.0,
            "part": {"target": name, "module_dir": "-", "workspace": "-", "join_timeout": 60.0}
            | part,
        }
    )


def _ended_then_deleted(
    target: CloudTarget, launched: Launched, delete_rank_3: Any, stopped: str
) -> None:
    """The scenario's two polls: rank 1 ended; then rank 3's VM is gone from the list."""
    assert target.machines_ended(launched, [1, 2, 3]) == {1: stopped}
    delete_rank_3()
    target._listed = None  # the next poll asks again (as OBSERVE_EVERY_S later)
    assert target.machines_ended(launched, [1, 2, 3]) == {
        1: stopped,
        3: f"{target.name} no longer lists its VM (deleted)",
    }


# ------------------------------------------------------------------ AWS (moto_server)
@pytest.mark.objectstore
def test_ec2_stopped_and_terminated_instances_end_their_ranks(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import boto3

    with moto_aws(monkeypatch, tmp_path / "moto"):
        ec2 = boto3.client("ec2", region_name="us-east-1")

        def vm(rank: str, cluster: str = CID) -> str:
            tags = [{"Key": "syndeo-cluster", "Value": cluster}]
            tags += [{"Key": "syndeo-rank", "Value": rank}] if rank else []
            return str(
                ec2.run_instances(
                    ImageId="ami-12c6146b",
                    MinCount=1,
                    MaxCount=1,
                    TagSpecifications=[{"ResourceType": "instance", "Tags": tags}],
                )["Instances"][0]["InstanceId"]
            )

        ids = {rank: vm(rank) for rank in ("0", "1", "2", "3")}
        old_2, other, _ = vm("2"), vm("5", "another"), vm("")
        ec2.stop_instances(InstanceIds=[ids["1"], other])
        ec2.terminate_instances(InstanceIds=[old_2, ids["3"]])
        launched = _launched("aws", machines={"region": "us-east-1"})
        target = _target("aws")
        ended = target.machines_ended(launched, [0, 1, 2, 3, 5])
    assert sorted(ended) == [1, 3]
    assert ended[1].startswith(f"EC2 lists its instance {ids['1']} as stopped"), ended
    assert ended[3].startswith(f"EC2 lists its instance {ids['3']} as terminated"), ended


# ------------------------------------------------------------------ Google Cloud (fake)
def _instance(name: str, status: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"kind": "compute#instance", "name": name, "status": status, "labels": labels}


class _Compute(Fake):
    """Compute v1 ``instances.aggregatedList``: a page per zone, the next page's token
    in ``nextPageToken``, the label filter applied as the reference describes it."""

    zones: ClassVar[dict[str, list[dict[str, Any]]]] = {}
    asked: ClassVar[list[dict[str, list[str]]]] = []
    status: ClassVar[int] = 200

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        assert url.path == "/compute/v1/projects/proj-1/aggregated/instances", url.path
        query = parse_qs(url.query)
        self.asked.append(query)
        if self.status != 200:
            return self.send_error(self.status)
        [wanted] = query["filter"]
        zones = sorted(self.zones)
        page = int(query.get("pageToken", ["0"])[0])
        zone = zones[page]
        listed = [
            i
            for i in self.zones[zone]
            if wanted == f'labels.syndeo-cluster = "{i["labels"].get("syndeo-cluster")}"'
        ]
        body: dict[str, Any] = {"items": {f"zones/{zone}": {"instances": listed}}}
        if page + 1 < len(zones):
            body["nextPageToken"] = str(page + 1)
        self._send(200, json.dumps(body).encode())


@pytest.fixture
def compute(monkeypatch: pytest.MonkeyPatch) -> Iterator[type[_Compute]]:
    import google.auth
    from google.auth.credentials import AnonymousCredentials

    ours = {"syndeo-cluster": CID}
    handler = type(
        "Handler",
        (_Compute,),
        {
            "asked": [],
            "status": 200,
            "zones": {
                "us-central1-a": [
                    _instance("n0", "RUNNING", ours | {"syndeo-rank": "0"}),
                    _instance("n1", "TERMINATED", ours | {"syndeo-rank": "1"}),
                    _instance("x5", "STOPPED", {"syndeo-cluster": "another", "syndeo-rank": "5"}),
                ],
                "us-central1-b": [
                    _instance("n2-old", "STOPPING", ours | {"syndeo-rank": "2"}),
                    _instance("n2", "STAGING", ours | {"syndeo-rank": "2"}),
                    _instance("n3", "RUNNING", ours | {"syndeo-rank": "3"}),
                    _instance("nx", "STOPPED", ours),
                ],
            },
        },
    )
    anonymous = AnonymousCredentials()  # type: ignore[no-untyped-call]
    monkeypatch.setattr(google.auth, "default", lambda **_: (anonymous, "proj-1"))
    with serving(handler) as url:
        monkeypatch.setenv("SYNDEO_GCP_COMPUTE_URL", f"{url}/compute/v1")
        yield handler


def test_compute_engine_states_end_ranks_across_zones_and_pages(compute: type[_Compute]) -> None:
    launched = _launched("gcp", machines={"project": "proj-1"})

    def delete_rank_3() -> None:
        compute.zones["us-central1-b"] = [
            i for i in compute.zones["us-central1-b"] if i["name"] != "n3"
        ]

    stopped = "Compute Engine lists its VM n1 as TERMINATED"
    _ended_then_deleted(_target("gcp"), launched, delete_rank_3, stopped)
    # One aggregated list per poll (two pages each), filtered by the cluster's label.
    assert len(compute.asked) == 4
    assert {q["filter"][0] for q in compute.asked} == {f'labels.syndeo-cluster = "{CID}"'}
    assert all(q["returnPartialSuccess"] == ["true"] for q in compute.asked)


def test_the_provider_is_asked_at_most_every_observe_interval(compute: type[_Compute]) -> None:
    """The watcher asks at each status read; the provider at most every 10 s."""
    target, launched = _target("gcp"), _launched("gcp", machines={"project": "proj-1"})
    for _ in range(5):
        target.machines_ended(launched, [1])
    assert len(compute.asked) == 2  # one poll: its two pages
    assert cloud.OBSERVE_EVERY_S == 10.0


def test_a_refused_list_tells_nothing_and_the_next_poll_asks_again(
    compute: type[_Compute],
) -> None:
    """No right to list (403): nothing is taken for ended; the launcher's clocks still run."""
    target, launched = _target("gcp"), _launched("gcp", machines={"project": "proj-1"})
    compute.status = 403
    assert target.machines_ended(launched, [1, 2, 3]) == {}
    compute.status = 200
    assert target.machines_ended(launched, [1]) == {
        1: "Compute Engine lists its VM n1 as TERMINATED"
    }


def test_a_cluster_without_its_project_recorded_is_not_asked(compute: type[_Compute]) -> None:
    assert _target("gcp").machines_ended(_launched("gcp"), [1]) == {}
    assert compute.asked == []


# ------------------------------------------------------------------ Azure (stand-in az)
# `az vm list --resource-group RG --show-details -o json`: the group's VMs as ARM objects
# with the details (powerState) -d adds; one line of arguments logged per call.
_FAKE_AZ = """
import json, os, sys
a = sys.argv[1:]
path = os.environ["FAKE_AZ_STATE"]
open(path + ".log", "a").write(" ".join(a) + "\\n")
state = json.load(open(path))
group = a[a.index("--resource-group") + 1]
if a[:2] != ["vm", "list"] or "--show-details" not in a or group not in state:
    sys.exit("ERROR: (ResourceGroupNotFound) Resource group could not be found.")
print(json.dumps(state[group]))
"""


def _vm(name: str, power: str, tags: dict[str, str], provisioning: str = "Succeeded") -> Any:
    return {"name": name, "powerState": power, "provisioningState": provisioning, "tags": tags}


def test_azure_vm_states_end_ranks(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "az").write_text(f"#!{sys.executable}\n{_FAKE_AZ}")
    (bin_dir / "az").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    state = tmp_path / "az.json"
    monkeypatch.setenv("FAKE_AZ_STATE", str(state))
    ours = {"syndeo-cluster": CID}
    vms = [
        _vm("n0", "VM running", ours | {"syndeo-rank": "0"}),
        _vm("n1", "VM deallocated", ours | {"syndeo-rank": "1"}),
        _vm("n2-old", "VM stopped", ours | {"syndeo-rank": "2"}),
        _vm("n2", "VM starting", ours | {"syndeo-rank": "2"}),
        _vm("n3", "VM running", ours | {"syndeo-rank": "3"}),
        _vm("n4", "", ours | {"syndeo-rank": "4"}, provisioning="Failed"),
        _vm("x5", "VM stopped", {"syndeo-cluster": "another", "syndeo-rank": "5"}),
    ]
    state.write_text(json.dumps({f"syndeo-{CID}-rg": vms}))
    launched = _launched("azure", outputs={"node_ids": [HEAD_ID]})
    target = _target("azure")
    assert target.machines_ended(launched, [4, 5]) == {
        4: "Azure lists its VM n4 as failed to provision"
    }
    target._listed = None

    def delete_rank_3() -> None:
        state.write_text(json.dumps({f"syndeo-{CID}-rg": [v for v in vms if v["name"] != "n3"]}))

    _ended_then_deleted(target, launched, delete_rank_3, "Azure lists its VM n1 as deallocated")
    calls = (tmp_path / "az.json.log").read_text().splitlines()
    assert calls[0] == (
        f"vm list --subscription {SUBSCRIPTION} --resource-group syndeo-{CID}-rg "
        "--show-details --output json"
    )
    assert len(calls) == 3


def test_azure_without_the_az_cli_tells_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    launched = _launched("azure", outputs={"node_ids": [HEAD_ID]})
    assert _target("azure").machines_ended(launched, [1]) == {}


# ------------------------------------------------------------------ Alibaba (fake ECS)
def _ecs(iid: str, status: str, tags: dict[str, str], recycling: bool = False) -> Any:
    locks = [{"LockReason": "Recycling"}] if recycling else []
    return {
        "InstanceId": iid,
        "Status": status,
        "OperationLocks": {"LockReason": locks},
        "Tags": {"Tag": [{"TagKey": k, "TagValue": v} for k, v in tags.items()]},
    }


def test_ecs_instance_states_end_ranks_page_by_page(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [k for k in os.environ if k.startswith(("ALIBABA_", "ALICLOUD_"))]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("ALIBABA_CLOUD_ACCESS_KEY_ID", KEY_ID)
    monkeypatch.setenv("ALIBABA_CLOUD_ACCESS_KEY_SECRET", SECRET)
    ours = {"syndeo-cluster": CID}
    with FakeEcs() as ecs:
        monkeypatch.setenv("SYNDEO_ALIBABA_ECS_URL", ecs.url)
        region = "cn-hangzhou"
        # More than a page (100) of the cluster's instances: the ranks asked about last.
        many = [_ecs(f"i-{r}", "Running", ours | {"syndeo-rank": str(r)}) for r in range(10, 110)]
        found = [
            *many,
            _ecs("i-1", "Stopped", ours | {"syndeo-rank": "1"}),
            _ecs("i-2old", "Stopping", ours | {"syndeo-rank": "2"}),
            _ecs("i-2", "Starting", ours | {"syndeo-rank": "2"}),
            _ecs("i-3", "Running", ours | {"syndeo-rank": "3"}),
            _ecs("i-4", "Running", ours | {"syndeo-rank": "4"}, recycling=True),
            _ecs("i-5", "Stopped", {"syndeo-cluster": "another", "syndeo-rank": "5"}),
        ]
        ecs.state.instances = [(region, i) for i in found]
        ecs.state.instances.append(
            ("eu-central-1", _ecs("i-6", "Stopped", ours | {"syndeo-rank": "6"}))
        )
        launched = _launched("alibaba", machines={"region": region})
        target = _target("alibaba")
        assert target.machines_ended(launched, [4, 6]) == {
            4: "ECS lists its instance i-4 as Recycling (a spot instance being taken back)"
        }
        target._listed = None

        def delete_rank_3() -> None:
            ecs.state.instances = [
                (r, i) for r, i in ecs.state.instances if i["InstanceId"] != "i-3"
            ]

        _ended_then_deleted(
            target, launched, delete_rank_3, "ECS lists its instance i-1 as Stopped"
        )
        assert ecs.state.actions == ["DescribeInstances"] * 6  # two pages a poll
