"""The real local Slurm cluster (3 nodes, each its own netns/IP), up once per module.

Jobs are submitted by the unprivileged user ``syndeo-ci`` (created by
``scripts/setup.d/slurm.sh``), the way an HPC user runs syndeo on a login node.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from syndeo.slurm import localcluster
from syndeo.testbed import netns

CI_USER = "syndeo-ci"
HERE = Path(__file__).resolve().parent
# The CI user's interpreter for this checkout (scripts/setup.d/slurm.sh makes it).
CI_PYTHON = HERE.parents[1] / ".venv" / "ci-user" / "bin" / "python"
WORKLOAD = HERE / "workload.py"
DEPLOY = HERE / "deploy_as_user.py"


def as_user(argv: list[str], env: dict[str, str] | None = None, **kw: Any) -> list[str]:
    """argv that runs ``argv`` as the CI user with a clean, explicit environment."""
    pw = pwd.getpwnam(CI_USER)
    base = {"HOME": pw.pw_dir, "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
    pairs = [f"{k}={v}" for k, v in {**base, **(env or {})}.items()]
    return ["runuser", "-u", CI_USER, "--", "env", "-i", *pairs, *argv]


@dataclass
class UserRun:
    """A deploy run by the CI user: its config dir, SYNDEO_HOME and results dir."""

    root: Path

    @property
    def env(self) -> dict[str, str]:
        return {"SYNDEO_HOME": str(self.root / "home")}

    @property
    def results(self) -> Path:
        return self.root / "results"

    def config(self, body: str) -> Path:
        path = self.root / "config.toml"
        path.write_text(f'results_dir = "{self.results}"\nworkdir = "{self.root}"\n' + body)
        _chown(path)
        return path

    def start(self, body: str) -> subprocess.Popen[str]:
        cfg = self.config(body)
        return subprocess.Popen(
            as_user([str(CI_PYTHON), str(DEPLOY), str(cfg)], self.env),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=self.root,
        )  # fmt: skip

    @staticmethod
    def finish(proc: subprocess.Popen[str], timeout: float = 420) -> dict[str, Any]:
        out, err = proc.communicate(timeout=timeout)
        lines = [ln for ln in out.splitlines() if ln.startswith("{")]
        assert lines, f"deploy printed no outcome (rc {proc.returncode}): {err[-3000:]}"
        outcome: dict[str, Any] = json.loads(lines[-1])
        outcome["_stderr"] = err
        outcome["_stdout"] = out
        outcome["_rc"] = proc.returncode
        return outcome

    def deploy(self, body: str) -> dict[str, Any]:
        return self.finish(self.start(body))


def _chown(path: Path) -> None:
    pw = pwd.getpwnam(CI_USER)
    os.chown(path, pw.pw_uid, pw.pw_gid)


@pytest.fixture(scope="module")
def slurm_cluster() -> Iterator[localcluster.LocalCluster]:
    assert os.geteuid() == 0, "the Slurm tests need root (they start a local Slurm cluster)"
    assert CI_PYTHON.exists(), f"{CI_PYTHON} missing: run scripts/setup.d/slurm.sh"
    cluster = localcluster.up(nodes=3, cpus_per_node=4)
    old = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(cluster.conf)
    try:
        yield cluster
    finally:
        localcluster.down()
        if old is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = old
    # Nothing of the cluster may survive down().
    assert not netns.list_netns(localcluster.NETNS_PREFIX)
    assert not Path(f"/sys/class/net/{localcluster.BRIDGE}").exists()
    assert not cluster.base.exists()


@pytest.fixture
def user_run(slurm_cluster: localcluster.LocalCluster) -> Iterator[UserRun]:
    # A crashed node's scratch (a failure test, or an earlier interrupted session) must
    # not be blamed on this test: clear it before and after.
    _clear_node_scratch()
    root = Path(f"/home/{CI_USER}/t-{uuid.uuid4().hex[:8]}")
    root.mkdir(mode=0o700)
    _chown(root)
    yield UserRun(root)
    shutil.rmtree(root, ignore_errors=True)
    _clear_node_scratch()


def _clear_node_scratch() -> None:
    for leftover in Path("/tmp").glob("sy-*"):
        shutil.rmtree(leftover, ignore_errors=True)


def user_procs_on_nodes(cluster: localcluster.LocalCluster) -> list[str]:
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
