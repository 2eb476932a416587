"""Spot notices drain the node: a real 3-node local deploy whose rank-2 node watches a
fake GCP metadata server; the fake starts serving a preemption notice mid-run.  Ray
drains that node (read back from Ray's GCS), the node records the interruption in the
rendezvous, the launcher starts the rank's replacement while the old node still runs,
the old node is then taken away (as the cloud would), and the run ends with the notice
and replacement in ``deploy.json``.  The workload is a Ray program that ends once Ray
has seen rank 2's old node die and a new one alive: the run lasts as long as the events
take, not a guessed amount of work.  (That the benchmark's sample count stays exact
across a replaced node is tests/launcher/test_recovery.py's.)

Also the launcher's side alone, on status records: an interrupted rank is replaced at
once and its later loss is not replaced a second time."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from syndeo.launcher.config import RecoverySettings
from syndeo.launcher.recovery import Recovery
from syndeo.launcher.spec import Launched
from syndeo.rendezvous import InterruptRecord, StatusRecord
from tests.support.helpers import assert_nothing_left, processes_of, reap, start_syndeo
from tests.support.launched import make_launched
from tests.support.metadata import FakeMetadata

CONFIG = """\
target = "local"
nodes = 3
cpus_per_node = 1
join_timeout_s = 240
[recovery]
replace_lost = true
max_replacements = 2
"""

# The user's program: an actor on every node, as real work holds a node (Ray keeps a
# drained node up while it has some: an idle one would leave at once); READY once they
# are placed.  It ends (0) once Ray lists a dead and an alive node of rank 2 (the drained
# node taken away, its replacement joined), and fails after 600 s otherwise.
WORKLOAD = """
import sys, time
import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy as On
ray.init()
@ray.remote(num_cpus=1)
class Busy:
    def ping(self):
        return 1
held = [Busy.options(scheduling_strategy=On(n["NodeID"], soft=False)).remote()
        for n in ray.nodes() if n["Alive"]]
ray.get([b.ping.remote() for b in held])
open(sys.argv[1], "w").close()
end = time.time() + 600
while time.time() < end:
    rank2 = [n for n in ray.nodes() if n.get("Labels", {}).get("syndeo-rank") == "2"]
    if any(n["Alive"] for n in rank2) and any(not n["Alive"] for n in rank2):
        print("rank 2 replaced; its drained node is gone", flush=True)
        sys.exit(0)
    time.sleep(1)
sys.exit("rank 2 was never replaced")
"""

# Asks the head's GCS (as any Ray client would, with the cluster's token), twice a
# second until one matches or the time is up, for the alive nodes of a rank that Ray
# drains (or does not): their ids and the drain's deadline.  One process per wait:
# importing Ray again per poll would take the CPU the nodes need.
GCS_PROBE = """
import json, sys, time
from ray._raylet import GcsClient
from ray.core.generated.gcs_pb2 import GcsNodeInfo, NodeSnapshot
address, rank, draining, timeout = sys.argv[1], sys.argv[2], sys.argv[3] == "1", float(sys.argv[4])
gcs = GcsClient(address=address)
end = time.monotonic() + timeout
while True:
    deadlines = {(k if isinstance(k, str) else k.hex()): v
                 for k, v in gcs.get_draining_nodes(timeout=10).items()}
    found = []
    for info in gcs.get_all_node_info(timeout=10).values():
        state = info.state_snapshot.state == NodeSnapshot.State.DRAINING
        if (info.state == GcsNodeInfo.GcsNodeState.ALIVE and state == draining
                and dict(info.labels).get("syndeo-rank") == rank):
            nid = info.node_id.hex()
            found.append({"id": nid, "deadline_ms": deadlines.get(nid)})
    if found or time.monotonic() > end:
        print(json.dumps(found))
        break
    time.sleep(0.5)
"""


def _record(home: Path, cid: str, name: str) -> dict[str, Any]:
    for path in home.rglob(f"{cid}/a0/{name}"):
        with contextlib.suppress(OSError, ValueError):
            data: dict[str, Any] = json.loads(path.read_text())
            return data
    return {}


def _node(cid: str, rank: int) -> list[psutil.Process]:
    """The ``syndeo node`` processes of ``rank`` (an old one and its replacement)."""
    out = []
    for p in processes_of(cid):
        with contextlib.suppress(psutil.Error):
            if p.environ().get("SYNDEO_RANK") == str(rank) and "node" in p.cmdline()[-1:]:
                out.append(p)
    return out


def _gcs_wait(
    address: str, token: Path, rank: int, draining: bool, timeout_s: float
) -> list[dict[str, Any]]:
    """Ray's own view: the alive nodes of ``rank`` that Ray drains (or does not)."""
    env = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token), "PATH": "/usr/bin:/bin"}
    args = [address, str(rank), "1" if draining else "0", str(timeout_s)]
    out = subprocess.run(
        [sys.executable, "-c", GCS_PROBE, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s + 60,
    )
    assert out.returncode == 0, out.stderr[:2500]
    nodes: list[dict[str, Any]] = json.loads(out.stdout)
    assert nodes, f"no {'draining' if draining else 'undrained'} node of rank {rank} in Ray"
    return nodes


def _wait(what: str, probe: Any, timeout_s: float, proc: subprocess.Popen[str]) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        assert proc.poll() is None, f"deploy ended while waiting for {what}"
        time.sleep(0.3)
    raise AssertionError(f"no {what} within {timeout_s:.0f} s")


@pytest.mark.slow
def test_a_spot_notice_drains_the_node_and_its_replacement_starts_before_it_goes(
    tmp_path: Path, syndeo_home: Path
) -> None:
    cid = "spot-local"
    cfg = tmp_path / "syndeo.toml"
    cfg.write_text(CONFIG)
    (tmp_path / "workload.py").write_text(WORKLOAD)
    ready = tmp_path / "actors-placed"
    with FakeMetadata("gcp") as fake:
        env = {"SYNDEO_SPOT_NOTICES": "gcp", "SYNDEO_METADATA_URL": fake.url + "/r{rank}"}
        proc = start_syndeo(
            "deploy",
            "--config",
            str(cfg),
            "--cluster-id",
            cid,
            "--run",
            f"python {tmp_path / 'workload.py'} {ready}",
            cwd=tmp_path,
            env=env,
        )
        try:
            _wait("the workload's actors on every node", ready.exists, 240, proc)
            [old] = _node(cid, 2)
            head = _record(syndeo_home, cid, "head.json")
            [head_node] = _node(cid, 0)
            token = Path(head_node.environ()["SYNDEO_SCRATCH"]) / "token"
            address = f"{head['ip']}:{head['gcs_port']}"
            noticed = time.time()
            fake.preempt(instance="r2", once=True)  # rank 2's VM is being preempted

            # Ray drains exactly that node, with the notice's deadline (GCP: 30 s).
            [node] = _gcs_wait(address, token, 2, draining=True, timeout_s=60)
            for other in (0, 1):  # and only that one
                _gcs_wait(address, token, other, draining=False, timeout_s=5)
            assert noticed + 29 < node["deadline_ms"] / 1000 < time.time() + 31
            rec = _wait(
                "interrupted record",
                lambda: _record(syndeo_home, cid, "interrupted/2.json"),
                30,
                proc,
            )
            assert rec["rank"] == 2 and rec["cloud"] == "gcp" and rec["action"] == "preempted"
            assert noticed <= rec["noticed_at"] and rec["deadline"] == rec["noticed_at"] + 30

            # The launcher starts the replacement while the drained node still runs.
            new = _wait(
                "replacement for rank 2",
                lambda: [p for p in _node(cid, 2) if p.pid != old.pid],
                60,
                proc,
            )
            assert old.is_running() and old.status() != psutil.STATUS_ZOMBIE
            assert new[0].environ()["SYNDEO_SCRATCH"].endswith("/2-1")
            # Its Ray joins as a second, undrained node of rank 2.
            [joined] = _gcs_wait(address, token, 2, draining=False, timeout_s=120)
            assert joined["id"] != node["id"] and joined["deadline_ms"] is None
            # The cloud takes the VM: the old node's whole process tree goes at once.
            for p in [*old.children(recursive=True), old]:
                with contextlib.suppress(psutil.NoSuchProcess):
                    p.kill()

            out, err = proc.communicate(timeout=600)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            reap(cid)
        # The replacement never saw a notice: the fake gave the one notice to the old node.
        asked = {path.split("/", 2)[1] for path, _h in fake.requests()}
        assert asked == {"r0", "r1", "r2"}
        assert all(h.get("Metadata-Flavor") == "Google" for _p, h in fake.requests())
    assert proc.returncode == 0, err[-3000:]
    assert "rank 2 got a spot notice; started a replacement" in err
    assert "spot notice rank 2" in err  # the status line
    assert err.count("started a replacement") == 1, err[-3000:]
    assert "rank 2 replaced; its drained node is gone" in out + err, (out + err)[-3000:]
    summary = json.loads((tmp_path / "results" / cid / "deploy.json").read_text())
    [event] = summary["recovery"]
    print("spot event:", event)
    assert event["rank"] == 2 and event["interrupted"] == "gcp"
    assert event["replaced"].startswith("rank 2 (pid ")
    assert event["notice_s"] <= event["seen_s"] <= event["replaced_s"] <= event["joined_s"]
    assert event["deadline_s"] == pytest.approx(event["notice_s"] + 30, abs=0.01)
    assert_nothing_left(cid)


class _Target:
    """What Recovery asks of a target: a replacement per call, recorded."""

    def __init__(self) -> None:
        self.replaced: list[int] = []

    def replace(self, launched: Launched, spec: object, rank: int) -> str:
        self.replaced.append(rank)
        return f"rank {rank} (#{len(self.replaced)})"


class _Ui:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def info(self, msg: str) -> None:
        self.lines.append(msg)


def _st(joined: list[int], lost: list[int] = [], notes: list[InterruptRecord] = []) -> StatusRecord:  # noqa: B006
    return StatusRecord(
        phase="running",
        nodes_expected=3,
        nodes_joined=joined,
        nodes_lost=lost,
        interrupted=notes,
        updated_at=time.time(),
    )


def test_an_interrupted_rank_is_replaced_once_right_away() -> None:
    target, ui = _Target(), _Ui()
    settings = RecoverySettings(replace_lost=True, max_replacements=5)
    rec = Recovery(target, None, settings, ui)  # type: ignore[arg-type]
    launched = make_launched("local", "c", "file:///x", time.time())
    now = time.time()
    note = InterruptRecord(
        rank=2, cloud="aws", action="terminate", noticed_at=now, deadline=now + 120
    )
    rec.observe(launched, _st([0, 1, 2]))
    assert target.replaced == []
    rec.observe(launched, _st([0, 1, 2], notes=[note]))  # the notice: replaced now
    assert target.replaced == [2]
    assert launched.draining == [2]  # the target may leave the old node running
    rec.observe(launched, _st([0, 1, 2], notes=[note]))  # seen again: nothing new
    rec.observe(launched, _st([0, 1, 2], lost=[2], notes=[note]))  # the VM is gone
    assert target.replaced == [2]  # not a second time
    rec.observe(launched, _st([0, 1, 2]))  # the replacement joined
    [event] = rec.events
    assert event["interrupted"] == "aws" and event["action"] == "terminate"
    assert event["notice_s"] <= event["seen_s"] <= event["replaced_s"] <= event["lost_s"]
    assert event["lost_s"] <= event["joined_s"]
    assert event["deadline_s"] == pytest.approx(event["notice_s"] + 120, abs=0.01)
    assert "rank 2: its replacement joined" in ui.lines
    # A later notice of the same rank (its replacement's VM) is a new event.
    later = InterruptRecord(rank=2, cloud="aws", noticed_at=now + 60)
    rec.observe(launched, _st([0, 1, 2], notes=[later]))
    assert target.replaced == [2, 2] and len(rec.events) == 2
    # And a plain loss of another rank is replaced as before.
    rec.observe(launched, _st([0, 1, 2], lost=[1], notes=[later]))
    assert target.replaced == [2, 2, 1]
