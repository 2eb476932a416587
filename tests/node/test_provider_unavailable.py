"""A group the watcher cannot start nodes of is planned around (syndeo/node/autoscale_provider.py).

A real Ray head started as the node runtime starts it (so with the head's scorer in its
environment), two groups that could each take the waiting work: ``small`` (1 CPU), which
Ray's own scorer prefers for a one-CPU bundle, and ``big`` (2 CPUs).  No watcher runs, so
nothing asked for comes.  A driver's placement group of one {"CPU": 1} bundle: Ray asks
for a ``small`` node.  Then the watcher's signed word that ``small`` cannot start nodes
(for 10 minutes) reaches the head as the node runtime takes it: while a ``small`` node
is still on its way, Ray waits for it; once none is, the ``small`` request drops and Ray
asks for a ``big`` node instead.  (Before, the request for ``small`` stayed
while the watcher backed off, and nothing else was ever asked for.)
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from syndeo.core import launchkey
from syndeo.core.nodeconfig import NodeSettings
from syndeo.node import autoscale, autoscale_provider
from syndeo.node.raynode import RayProcess
from syndeo.node.workload import Monitor
from syndeo.rendezvous import open_rendezvous
from syndeo.rendezvous.base import GroupUnavailable, Unavailable
from tests.support import rayhead
from tests.support.rayhead import autoscaling_head, until

DRIVER = """\
import sys, time, ray
from ray.util.placement_group import placement_group
ray.init(address=sys.argv[1])
pg = placement_group([{"CPU": 1}])
print("made", flush=True)
time.sleep(600)
"""


@pytest.fixture
def head(tmp_path: Path) -> Iterator[RayProcess]:
    with autoscaling_head("provunavail", "small:0:1:1:0:,big:0:1:2:0:", tmp_path / "rdv") as ray:
        yield ray


@pytest.mark.cluster
def test_a_group_that_cannot_start_nodes_is_planned_around(head: RayProcess) -> None:
    assert head.env[autoscale.SCORER_ENV] == autoscale.SCORER
    address = head.wait_head_address(120)

    def want() -> dict[str, int]:
        return rayhead.want(head)

    driver = subprocess.Popen(
        [sys.executable, "-c", DRIVER, address],
        env=head.env,  # the head's token
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert driver.stdout is not None
        assert driver.stdout.readline().strip() == "made"
        until("a small node asked for", lambda: want().get("small") == 1, 120)
        assert want().get("big", 0) == 0
        time.sleep(3)  # several autoscaler updates: Ray keeps to its choice
        assert want() == {"small": 1, "big": 0}
        why = "rank 1 given up after in the queue for 600 s (Resources)"

        def unavailable(on_way: int) -> str:
            record = Unavailable(
                cluster_id=head.settings.cluster_id,
                attempt=0,
                seq=1,
                groups={"small": GroupUnavailable(for_s=600, why=why, on_way=on_way)},
            )
            return autoscale.take_unavailable(head.settings, record, time.time())

        # Its one node still on its way (another failed): Ray keeps waiting for it.
        unavailable(on_way=1)
        time.sleep(3)
        assert want() == {"small": 1, "big": 0}
        assert unavailable(on_way=0) == f"group small cannot start nodes for 600 s ({why})"
        until("a big node asked for instead", lambda: want() == {"small": 0, "big": 1}, 60)
        time.sleep(3)
        assert want() == {"small": 0, "big": 1}
    finally:
        driver.kill()
        driver.wait(10)


def test_the_scorer_is_ray_s_own_less_the_groups_that_cannot_start() -> None:
    from ray.autoscaler._private.constants import AUTOSCALER_UTILIZATION_SCORER_KEY
    from ray.autoscaler._private.loader import load_function_or_class
    from ray.autoscaler._private.node_provider_availability_tracker import (
        NodeAvailabilitySummary,
    )
    from ray.autoscaler._private.resource_demand_scheduler import _default_utilization_scorer

    assert autoscale.SCORER_ENV == AUTOSCALER_UTILIZATION_SCORER_KEY
    scorer = load_function_or_class(autoscale.SCORER)
    assert scorer is autoscale_provider.utilization_scorer
    node: dict[str, Any] = {"CPU": 2}
    want: list[dict[str, Any]] = [{"CPU": 1}]
    none = NodeAvailabilitySummary(node_availabilities={})
    ray_s = _default_utilization_scorer(node, want, "big", node_availability_summary=none)
    assert ray_s is not None
    assert scorer(node, want, "big", node_availability_summary=none) == ray_s
    autoscale_provider.UNAVAILABLE["big"] = autoscale.Off("start refused", 0)
    try:
        assert scorer(node, want, "big", node_availability_summary=none) is None
        assert scorer(node, want, "small", node_availability_summary=none) == ray_s
    finally:
        autoscale_provider.UNAVAILABLE.clear()


@pytest.mark.parametrize(
    "planted",
    [
        b"",
        b"[]",
        b'{"small": "bad"}',
        b'{"small": {"until": "soon", "why": "x"}}',
        b'{"small": {"until": null}}',
        b"[" * 100_000,
    ],
)
def test_a_planted_file_makes_no_group_unavailable(tmp_path: Path, planted: bytes) -> None:
    # The head's scratch is writable by every task: anything but what the head writes
    # is nothing.
    path = tmp_path / "unavailable.json"
    path.write_bytes(planted)
    assert autoscale.read_unavailable(path, time.time()) == {}


@pytest.fixture
def scratch() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="syunav-"))  # short: NodeSettings checks it
    yield path
    shutil.rmtree(path)


def test_the_head_takes_the_watcher_s_signed_word_once_and_only_if_signed(
    tmp_path: Path, scratch: Path
) -> None:
    key = launchkey.new_key()
    (scratch / "autoscale").mkdir()
    s = NodeSettings(
        cluster_id="unavail",
        rank=0,
        nodes=1,
        cpus=1,
        rendezvous=(tmp_path / "rdv").as_uri(),
        scratch=scratch,
        workdir=tmp_path / "work",
        launch_key=key,
        autoscale="small:0:1:1:0:,big:0:1:2:0:",
    )
    rdv = open_rendezvous(s.rendezvous, s.cluster_id, 0)
    monitor = Monitor(s, rdv, "", tmp_path / "token", None)  # type: ignore[arg-type]
    path = autoscale.unavailable_path(scratch)
    # Planted with a high number and another key: not taken, and it hides nothing the
    # watcher says next (the watcher's write removes every other record).
    planted = {"small": GroupUnavailable(for_s=60, why="refused")}
    rdv.put_unavailable(planted, 10**15, launchkey.new_key())
    monitor.follow_unavailable(rdv.control())
    assert not path.exists()
    rdv.put_unavailable({"small": GroupUnavailable(for_s=60, why="refused")}, 6, key)
    before = time.time()
    monitor.follow_unavailable(rdv.control())
    assert autoscale.read_unavailable(path, before) == {"small": autoscale.Off("refused", 0)}
    assert autoscale.read_unavailable(path, before + 61) == {}  # for 60 s of the head's clock
    path.unlink()
    monitor.follow_unavailable(rdv.control())
    assert not path.exists()  # read once per number
    rdv.put_unavailable({"big": GroupUnavailable(for_s=None, why="bad account")}, 7, key)
    monitor.follow_unavailable(rdv.control())
    assert autoscale.read_unavailable(path, time.time() + 10**9) == {
        "big": autoscale.Off("bad account", 0)
    }
