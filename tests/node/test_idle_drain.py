"""A node Ray's v1 autoscaler lets go as idle is drained the way a busy node refuses
(syndeo/node/autoscale_provider.py, ``guard_v1_drain``): a task that landed on it after
the autoscaler read its load keeps running, the node stays and is not released; an idle
node goes, and is released.

Real Ray nodes started as the node runtime starts them: a head (no CPU of its own) and
two one-CPU workers of the group ``worker``.  A driver runs a task pinned to rank 1.
Then the provider does what v1's update does with nodes it found idle from a stale load
report -- its drain, then ``terminate_nodes`` and the scale request -- for both workers.
The stand-in for v1's autoscaler carries only the state its drain reads, so the same
step runs Ray's own drain where the guard is not in place (there the busy node's raylet
is shut down at once and the task dies with it).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from syndeo.core import launchkey
from syndeo.core.nodeconfig import NodeSettings
from syndeo.node.autoscale import idle_drain_path, read_want, want_path
from syndeo.node.raynode import RayProcess

pytestmark = pytest.mark.cluster

CLUSTER = "idledrain"
DRIVER = """\
import sys, ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
ray.init(address=sys.argv[1])

@ray.remote(num_cpus=1, max_retries=0)
def work():
    print("started", flush=True)
    import time
    time.sleep(12)
    return "done"

ref = work.options(scheduling_strategy=NodeAffinitySchedulingStrategy(sys.argv[2], soft=False))
print(ray.get(ref.remote()), flush=True)
"""


def _settings(tmp_path: Path, rank: int, key: str) -> NodeSettings:
    scratch = Path(tempfile.mkdtemp(prefix=f"syidle{rank}-"))  # short: Ray's sockets
    return NodeSettings(
        cluster_id=CLUSTER,
        rank=rank,
        nodes=1,
        cpus=0 if rank == 0 else 1,
        group=None if rank == 0 else "worker",
        rendezvous=(tmp_path / "rdv").as_uri(),
        scratch=scratch,
        workdir=tmp_path / "work",
        launch_key=key,
        autoscale="worker:0:2:1:0:" if rank == 0 else None,
        idle_timeout_s=600,  # the head's own monitor lets nothing go meanwhile
    )


@pytest.fixture
def nodes(tmp_path: Path) -> Iterator[list[RayProcess]]:
    key = launchkey.new_key()
    started: list[RayProcess] = []
    try:
        for rank in range(3):
            s = _settings(tmp_path, rank, key)
            token = s.scratch / "token"
            token.write_text("idle-drain-test-token")
            token.chmod(0o600)
            head = started[0].wait_head_address(120) if started else None
            started.append(RayProcess(s, token, head))
            started[-1].start()
        yield started
    finally:
        for ray in reversed(started):
            ray.stop()
            shutil.rmtree(ray.settings.scratch, ignore_errors=True)


# What Ray's monitor does, in a process of its own with the head's token (Ray reads its
# auth settings once per process): the provider of the head's cluster, asking into a
# file of its own; then v1's step for the nodes it found idle, once told to.
STEP = """\
import json, sys, time
from types import SimpleNamespace
from ray.autoscaler._private.autoscaler import StandardAutoscaler
from syndeo.node.autoscale_provider import SyndeoProvider
from syndeo.node.leaving import released_by_ray

provider = SyndeoProvider(json.loads(sys.argv[1]), "idledrain")
deadline = time.monotonic() + 120
while len(provider.non_terminated_nodes({})) < 3:
    assert time.monotonic() < deadline, "the workers never joined"
    time.sleep(0.5)
ranks = {rank: nid for nid, (rank, _) in provider._alive().items()}
print(json.dumps(ranks), flush=True)
sys.stdin.readline()
ids = [ranks[1], ranks[2]]
provider.non_terminated_nodes({})  # the update's view, read first
stand_in = SimpleNamespace(  # what v1's drain reads of its autoscaler
    provider=provider,
    load_metrics=SimpleNamespace(node_id_by_ip={n: bytes.fromhex(n) for n in ids}),
    gcs_client=provider._gcs,
    prom_metrics=SimpleNamespace(drain_node_exceptions=SimpleNamespace(inc=lambda: None)),
)
StandardAutoscaler.drain_nodes_via_gcs(stand_in, ids)
provider.terminate_nodes(ids)
provider.post_process()
print("stepped", flush=True)
sys.stdin.readline()
deadline = time.monotonic() + 30  # an idle drain ends its node within a few seconds
while True:
    info = {k.hex(): v for k, v in provider._gcs.get_all_node_info(timeout=10).items()}
    if released_by_ray(info[ids[1]]) or time.monotonic() > deadline:
        break
    time.sleep(0.5)
print(json.dumps({n: released_by_ray(info[n]) for n in ids}), flush=True)
print(json.dumps(sorted(provider._alive())), flush=True)
"""


def _step(head: RayProcess, tmp_path: Path) -> subprocess.Popen[str]:
    config = json.loads((want_path(head.settings.scratch).parent / "config.json").read_text())
    mine = tmp_path / "s"
    want_path(mine).parent.mkdir(parents=True)
    provider = config["provider"] | {"syndeo_want": str(want_path(mine))}
    return subprocess.Popen(
        [sys.executable, "-c", STEP, json.dumps(provider)],
        env=head.env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _line(proc: subprocess.Popen[str]) -> str:
    assert proc.stdout is not None
    got = proc.stdout.readline()
    assert got, f"exited {proc.wait(10)} before saying a line"
    return got.strip()


def _tell(proc: subprocess.Popen[str]) -> None:
    assert proc.stdin is not None
    proc.stdin.write("go\n")
    proc.stdin.flush()


def test_a_busy_node_refuses_its_idle_release_and_an_idle_one_goes(
    nodes: list[RayProcess], tmp_path: Path
) -> None:
    head = nodes[0]
    address = head.wait_head_address(120)
    step = _step(head, tmp_path)
    driver: subprocess.Popen[str] | None = None
    try:
        ranks = json.loads(_line(step))
        driver = subprocess.Popen(
            [sys.executable, "-c", DRIVER, address, ranks["1"]],
            env=head.env,  # the head's token
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        assert driver.stdout is not None
        # The task's own print, forwarded by Ray with its prefix.
        assert any(line.rstrip().endswith("started") for line in driver.stdout), "never ran"
        _tell(step)
        assert _line(step) == "stepped"
        said = driver.stdout.read()
        driver.wait(60)
        assert "done" in said.splitlines(), said[-2000:]  # the task finished on rank 1
        _tell(step)
        released = json.loads(_line(step))
        assert released == {ranks["1"]: False, ranks["2"]: True}
        assert ranks["1"] in json.loads(_line(step))  # rank 1 still alive
    finally:
        for proc in (driver, step):
            if proc is not None:
                proc.kill()
                proc.wait(10)
    want = read_want(want_path(tmp_path / "s"))
    assert want is not None and want["release"] == [2]
    assert json.loads(idle_drain_path(tmp_path / "s").read_text()) == [2]
