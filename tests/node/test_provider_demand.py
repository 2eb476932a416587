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

import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from syndeo.core import launchkey
from syndeo.core.nodeconfig import NodeSettings
from syndeo.node.autoscale import want_path
from syndeo.node.raynode import RayProcess

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
    scratch = Path(tempfile.mkdtemp(prefix="syprov-"))  # short: Ray's socket paths
    settings = NodeSettings(
        cluster_id="provdemand",
        rank=0,
        nodes=1,
        cpus=0,  # work waits for a group's node
        rendezvous=(tmp_path / "rdv").as_uri(),
        scratch=scratch,
        workdir=tmp_path / "work",
        launch_key=launchkey.new_key(),
        autoscale="cpu:0:1:1:0:,gpu:0:1:1:1:",
        idle_timeout_s=600,
    )
    token = scratch / "token"
    token.write_text("provider-demand-test-token")
    token.chmod(0o600)
    ray = RayProcess(settings, token, None)
    try:
        ray.start()
        yield ray
    finally:
        ray.stop()
        shutil.rmtree(scratch, ignore_errors=True)


def _until(what: str, probe: Callable[[], object], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not probe():
        assert time.monotonic() < deadline, f"not within {timeout_s:.0f} s: {what}"
        time.sleep(0.5)


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
    wanted = want_path(head.settings.scratch)

    def want() -> dict[str, int]:
        try:
            return dict(json.loads(wanted.read_text())["want"])
        except (OSError, ValueError, KeyError):
            return {}

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
        _until("a node of each group asked for", lambda: want() == {"cpu": 1, "gpu": 1}, 120)
        go.touch()
        _said(driver, "removed")
        _until("the cpu request dropped", lambda: want().get("cpu") == 0, 60)
        assert want() == {"cpu": 0, "gpu": 1}
        time.sleep(5)  # several autoscaler updates later, still so
        assert want() == {"cpu": 0, "gpu": 1}
    finally:
        driver.kill()
        driver.wait(10)
