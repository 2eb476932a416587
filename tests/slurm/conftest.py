"""The real local Slurm cluster (3 nodes, each its own netns/IP), up once per module.

Jobs are submitted by the unprivileged user ``syndeo-ci`` (created by
``scripts/setup.d/slurm.sh``), the way an HPC user runs syndeo on a login node.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from testbeds import netns, slurmcluster
from testbeds.machine import SLURM_TESTBED_LOCK, machine_lock
from testbeds.users import CI_PYTHON, CI_USER, UserRun, give_to_ci_user

HERE = Path(__file__).resolve().parent
WORKLOAD = HERE / "workload.py"
# Job scratch dirs (/tmp/sy-<job>-<rank>) that existed before this module's cluster
# came up are someone else's (another checkout, an earlier session): never ours to
# delete or to blame on a test.
FOREIGN_SCRATCH: set[Path] = set()


def node_scratch() -> list[Path]:
    """Scratch dirs left by jobs of this module's cluster."""
    return [p for p in Path("/tmp").glob("sy-*") if p not in FOREIGN_SCRATCH]


@contextlib.contextmanager
def local_slurm(gpu_nodes: int = 0, mem_per_cpu_mb: int = 0) -> Iterator[slurmcluster.LocalCluster]:
    """The local cluster (3 CPU nodes, and ``gpu_nodes`` in partition ``gpu``; memory
    tracked with ``mem_per_cpu_mb`` per CPU where non-zero), up for a test module and
    down afterwards, leaving nothing."""
    assert os.geteuid() == 0, "the Slurm tests need root (they start a local Slurm cluster)"
    assert CI_PYTHON.exists(), f"{CI_PYTHON} missing: run scripts/setup.d/slurm.sh"
    # The cluster owns machine-wide names (/etc/slurm, its bridge and namespaces):
    # one test session at a time, whichever checkout it runs from.
    with machine_lock(SLURM_TESTBED_LOCK, "local Slurm test cluster"):
        # A cluster already up was started by a user (`invoke slurm.up`): use it, but
        # leave it as found.
        ours = not slurmcluster.is_up()
        FOREIGN_SCRATCH.clear()
        FOREIGN_SCRATCH.update(Path("/tmp").glob("sy-*"))
        cluster = slurmcluster.up(
            nodes=3, cpus_per_node=4, gpu_nodes=gpu_nodes, mem_per_cpu_mb=mem_per_cpu_mb
        )
        old = os.environ.get("SLURM_CONF")
        os.environ["SLURM_CONF"] = str(cluster.conf)
        try:
            yield cluster
        finally:
            if ours:
                slurmcluster.down()
            if old is None:
                os.environ.pop("SLURM_CONF", None)
            else:
                os.environ["SLURM_CONF"] = old
    if ours:
        # Nothing of the cluster may survive down().
        assert not netns.list_netns(slurmcluster.NETNS_PREFIX)
        assert not Path(f"/sys/class/net/{slurmcluster.BRIDGE}").exists()
        assert not cluster.base.exists()


@pytest.fixture(scope="module")
def slurm_cluster() -> Iterator[slurmcluster.LocalCluster]:
    with local_slurm() as cluster:
        yield cluster


@pytest.fixture
def user_run(slurm_cluster: slurmcluster.LocalCluster) -> Iterator[UserRun]:
    # A crashed node's scratch (a failure test, or an earlier interrupted session) must
    # not be blamed on this test: clear it before and after.
    _clear_node_scratch()
    root = Path(f"/home/{CI_USER}/t-{uuid.uuid4().hex[:8]}")
    root.mkdir(mode=0o700)
    give_to_ci_user(root)
    run = UserRun(root)
    yield run
    run.remove()
    _clear_node_scratch()


def _clear_node_scratch() -> None:
    for leftover in node_scratch():
        shutil.rmtree(leftover, ignore_errors=True)


def user_procs_on_nodes(cluster: slurmcluster.LocalCluster) -> list[str]:
    """Command lines of the CI user's processes in any node namespace."""
    uid = pwd.getpwnam(CI_USER).pw_uid
    out = []
    for node in cluster.nodes:
        for pid in netns.netns_pids(node.netns):
            try:
                if os.stat(f"/proc/{pid}").st_uid != uid:
                    continue
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
            except OSError:
                continue
            out.append(f"{node.name}:{pid}:{cmd.decode(errors='replace')[:120]}")
    return out
