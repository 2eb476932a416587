"""The head's provider (syndeo/node/autoscale_provider.py) drops a group's request when no
waiting work would fit one of its nodes, and keeps the request of a group that some
waiting work still fits.

A real Ray head started as the node runtime starts it, with ``--autoscaling-config``:
Ray's own monitor runs the provider, with two groups, ``cpu`` (1 CPU) and ``gpu``
(1 CPU, 1 GPU), and a head with no CPU of its own.  No watcher runs, so nothing the
autoscaler asks for ever comes and the request stays in the provider's file.  A driver
makes two placement groups, one bundle each ({"CPU": 1} and {"CPU": 1, "GPU": 1}): Ray
asks for a node of each group.  The CPU one removed, what still waits fits a ``gpu``
node only: the ``cpu`` request drops to 0 and the ``gpu`` one stays.  (Before, any
waiting work kept every group's request.)
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from syndeo.node.raynode import RayProcess
from tests.support import rayhead
from tests.support.rayhead import autoscaling_head, until

pytestmark = pytest.mark.cluster

DRIVER = """\
import pathlib, sys, time, ray
from ray.util.placement_group import placement_group, remove_placement_group
ray.init(address=sys.argv[1])
cpu = placement_group([{"CPU": 1}])
gpu = placement_group([{"CPU": 1, "GPU": 1}])
print("made", flush=True)
go = pathlib.Path(sys.argv[2])
while not go.exists():
    time.sleep(0.2)
remove_placement_group(cpu)
print("removed", flush=True)
time.sleep(600)
"""


@pytest.fixture
def head(tmp_path: Path) -> Iterator[RayProcess]:
    with autoscaling_head("provdemand", "cpu:0:1:1:0:,gpu:0:1:1:1:", tmp_path / "rdv") as ray:
        yield ray


def _said(driver: subprocess.Popen[str], line: str) -> None:
    """Read the driver's output up to ``line`` (Ray's autoscaler events come between)."""
    assert driver.stdout is not None
    for got in driver.stdout:
        if got.strip() == line:
            return
    raise AssertionError(f"the driver ended before it said {line!r}")


def test_a_group_no_waiting_work_fits_is_dropped_another_kept(
    head: RayProcess, tmp_path: Path
) -> None:
    address = head.wait_head_address(120)

    def want() -> dict[str, int]:
        return rayhead.want(head)

    go = tmp_path / "remove-the-cpu-group"
    driver = subprocess.Popen(
        [sys.executable, "-c", DRIVER, address, str(go)],
        env=head.env,  # the head's token
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert driver.stdout is not None
        _said(driver, "made")
        until("a node of each group asked for", lambda: want() == {"cpu": 1, "gpu": 1}, 120)
        go.touch()
        _said(driver, "removed")
        until("the cpu request dropped", lambda: want().get("cpu") == 0, 60)
        assert want() == {"cpu": 0, "gpu": 1}
        time.sleep(5)  # several autoscaler updates later, still so
        assert want() == {"cpu": 0, "gpu": 1}
    finally:
        driver.kill()
        driver.wait(10)
