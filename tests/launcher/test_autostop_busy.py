"""Autostop never takes a busy cluster down: a local ``up`` cluster with a driver whose
placement group cannot be placed (STRICT_SPREAD over more nodes than ``max_nodes``)
stays up past autostop, and stops once the driver has gone.  One real cluster, driven
through the ``syndeo`` CLI and a plain ``ray.init()`` with the exports ``up`` prints."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.helpers import assert_nothing_left, syndeo

AUTOSTOP_S = 20
# Past autostop by this much, the cluster must still be there (the watcher reads the
# status every 5 s while idle, the head measures every second).
MARGIN_S = 20
# Three one-CPU bundles on three distinct nodes, on a cluster of at most two: the group
# can never be placed, and no node Ray's autoscaler could add would help.
DRIVER = """\
import sys
import ray
from ray.util.placement_group import placement_group

ray.init()
pg = placement_group([{"CPU": 1}] * 3, strategy="STRICT_SPREAD")
print("waiting for the placement group", flush=True)
sys.stdin.read()  # until the test lets it go
"""


def _exports(up_stdout: str) -> dict[str, str]:
    line = next(ln for ln in up_stdout.splitlines() if "export RAY_ADDRESS=" in ln)
    return dict(re.findall(r"(\w+)=(\S+)", line.split("export", 1)[1]))


GCS_PROBE = """
import json, os, time
from ray._raylet import GcsClient
from ray.autoscaler.v2.sdk import get_cluster_resource_state
from syndeo.node import autoscale

gcs = GcsClient(address=os.environ["RAY_ADDRESS"])
deadline = time.monotonic() + 30
while not autoscale.busy_reason(get_cluster_resource_state(gcs)):
    assert time.monotonic() < deadline, "Ray never listed the placement group as waiting"
    time.sleep(1)
state = get_cluster_resource_state(gcs)
print(json.dumps([autoscale.busy_reason(state), autoscale.live_drivers(gcs)]))
"""


@pytest.mark.cluster
@pytest.mark.slow
def test_a_waiting_placement_group_and_its_driver_hold_off_autostop(
    syndeo_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cid = "tbusy"
    up = syndeo(
        "up",
        *("--cluster-id", cid, "--max-nodes", "2", "--autostop", f"{AUTOSTOP_S}s"),
        cwd=tmp_path,
    )
    assert up.returncode == 0, up.stderr[-3000:]
    exports = _exports(up.stdout)
    (tmp_path / "driver.py").write_text(DRIVER)
    driver = subprocess.Popen(
        [sys.executable, "driver.py"],
        cwd=tmp_path,
        env={**os.environ, **exports},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        _held_then_stopped(syndeo_home, cid, driver, exports, monkeypatch)
    finally:  # whatever failed, nothing of the cluster outlives the test
        if driver.poll() is None:
            driver.kill()
        driver.wait()
        if (syndeo_home / "clusters" / cid / "launched.json").exists():
            syndeo("down", "--cluster-id", cid, cwd=tmp_path)
    assert_nothing_left(cid)


def _held_then_stopped(
    syndeo_home: Path,
    cid: str,
    driver: subprocess.Popen[str],
    exports: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert driver.stdout is not None
    assert "waiting for the placement group" in driver.stdout.readline()
    # What the head reads, read here too (a GCS client, not a driver): the group waits
    # and one driver is connected.  In a process of its own: Ray loads its auth token
    # once per process, and this worker may have met another cluster's before.
    probe = subprocess.run(
        [sys.executable, "-c", GCS_PROBE],
        env={**os.environ, **exports},
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    assert probe.returncode == 0, probe.stderr[-3000:]
    assert json.loads(probe.stdout.strip().splitlines()[-1]) == [
        "placement groups wait for nodes",
        1,
    ]
    held_from = time.monotonic()
    log = syndeo_home / "clusters" / cid / "watch.log"
    launched = syndeo_home / "clusters" / cid / "launched.json"
    while time.monotonic() - held_from < AUTOSTOP_S + MARGIN_S:
        assert launched.exists() and "autostop" not in log.read_text(), log.read_text()
        time.sleep(2)
    # The driver leaves (its placement group goes with it): nothing waits now, and
    # autostop takes the cluster down.
    assert driver.stdin is not None
    driver.stdin.close()
    assert driver.wait(timeout=60) == 0
    left_at = time.monotonic()
    deadline = left_at + AUTOSTOP_S + 90
    while "is down (autostop)" not in log.read_text():
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(1)
    assert not launched.exists()
    # Idle counts from when the driver left, not from the nodes' last task.
    after_s = time.monotonic() - left_at
    print(f"autostop {after_s:.0f} s after the driver left")
    assert after_s >= AUTOSTOP_S - 2, after_s


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (
            ("--autostop", "1m", "--autostop-wait-for", "ssh"),
            "autostop_wait_for: Input should be 'drivers', 'jobs' or 'none'",
        ),
        (("--autostop-wait-for", "jobs"), "autostop_wait_for says what holds off autostop"),
    ],
)
def test_a_bad_autostop_wait_for_is_one_line(
    args: tuple[str, ...], said: str, syndeo_home: Path, tmp_path: Path
) -> None:
    got = syndeo("check", "--target", "local", *args, cwd=tmp_path)
    assert got.returncode != 0 and "Traceback" not in got.stderr, got.stderr
    lines = [ln for ln in got.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and said in lines[0], got.stderr
