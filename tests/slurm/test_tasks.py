"""`invoke slurm.up | status | down`: the local cluster's whole life through the front end.

Under the machine-wide test-bed lock (another checkout's session may use the
cluster's names); a 1-node cluster keeps it short.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from testbeds import netns, slurmcluster
from testbeds.machine import ROOT, SLURM_TESTBED_LOCK, machine_lock

pytestmark = [pytest.mark.slurm, pytest.mark.slow]
INVOKE = [str(Path(sys.executable).with_name("invoke")), "-r", str(ROOT)]


def _invoke(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*INVOKE, *args], capture_output=True, text=True, timeout=300)


def test_invoke_slurm_up_status_down() -> None:
    assert os.geteuid() == 0, "the local Slurm cluster needs root"
    with machine_lock(SLURM_TESTBED_LOCK, "local Slurm test cluster"):
        if slurmcluster.is_up():
            pytest.fail("a local Slurm cluster is already up (`invoke slurm.down` it first)")
        try:
            up = _invoke("slurm.up", "--nodes", "1", "--cpus-per-node", "1")
            assert up.returncode == 0, up.stderr[-2000:]
            assert "local Slurm cluster up" in up.stdout
            status = _invoke("slurm.status")
            assert status.returncode == 0, status.stderr[-2000:]
            cluster = slurmcluster.load()
            assert cluster is not None and cluster.nodes[0].name in status.stdout
        finally:
            down = _invoke("slurm.down")
        assert down.returncode == 0, down.stderr[-2000:]
        assert "local Slurm cluster down" in down.stdout
        assert not slurmcluster.is_up()
        assert not netns.list_netns(slurmcluster.NETNS_PREFIX)
        assert not Path(f"/sys/class/net/{slurmcluster.BRIDGE}").exists()
