"""The Python API as a user calls it: ``syndeo.up`` a 2-node local cluster, submit a
program of the user's own work dir (a module of it, a package from its requirements.txt),
its result, logs and files, a job that fails, the cluster attached from a second process,
``down``.  Real Ray, real nodes; the package (shellingham) is in neither this venv nor
the image's lock."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

import syndeo
from syndeo.core.errors import SyndeoError, WorkloadError
from syndeo.launcher.state import load_launched, save_launched
from tests.support.helpers import ROOT, assert_nothing_left, one_line_error, reap
from tests.support.helpers import syndeo as syndeo_cli
from tests.support.launched import make_launched

PROGRAM = """\
import importlib, os, ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy as On

import helper

@ray.remote(num_cpus=0.1)
def probe():
    return ray.get_runtime_context().get_node_id(), importlib.import_module("shellingham").__file__

ray.init()
print("HELPER", helper.greeting(), flush=True)
ids = [n["NodeID"] for n in ray.nodes() if n["Alive"]]
found = ray.get([probe.options(scheduling_strategy=On(i, soft=False)).remote() for i in ids])
print("NODES", len({node for node, _ in found}), flush=True)
print("PACKAGE", *sorted({path for _, path in found}), flush=True)
os.makedirs("outputs", exist_ok=True)
with open("outputs/answer.txt", "w") as f:
    f.write("42\\n")
"""

SECOND = """\
import json, sys
import syndeo
with syndeo.Cluster.attach(sys.argv[1]) as cluster:  # leaving it leaves the cluster up
    job = cluster.job(sys.argv[2])
    status = cluster.status()
print(json.dumps({"state": job.state.value, "logs": job.logs(), "nodes": status.state}))
"""


def _project(root: Path) -> Path:
    root.mkdir()
    (root / "prog.py").write_text(PROGRAM)
    (root / "helper.py").write_text("def greeting():\n    return 'hello from helper'\n")
    (root / "requirements.txt").write_text("shellingham\n")
    return root


def _attached_elsewhere(cid: str, job_id: str, cwd: Path) -> dict[str, str]:
    """What a second process sees of the cluster, through the API alone."""
    done = subprocess.run(
        [sys.executable, "-c", SECOND, cid, job_id],
        cwd=cwd,
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found: dict[str, str] = json.loads(done.stdout)
    return found


def _runs_the_users_program(cluster: syndeo.Cluster, work: Path, tmp_path: Path) -> str:
    job = cluster.submit("python prog.py", workdir=work, requirements=work / "requirements.txt")
    assert isinstance(job.state, syndeo.JobState)
    done = job.result(timeout=300)
    assert done.state is syndeo.JobState.SUCCEEDED and done.exit_code == 0
    assert "HELPER hello from helper" in done.output
    assert "NODES 2" in done.output, done.output
    package = next(ln for ln in done.output.splitlines() if ln.startswith("PACKAGE"))
    assert "/shellingham/" in package, done.output
    assert job.logs() == done.output
    files = job.fetch(tmp_path / "fetched")
    assert [f.read_text() for f in files if f.name == "answer.txt"] == ["42\n"]
    return job.id


@pytest.mark.cluster
@pytest.mark.slow
def test_the_api_runs_a_users_program_on_two_nodes(
    tmp_path: Path, syndeo_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cid = "api-two"
    work = _project(tmp_path / "proj")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ImportError):
        __import__("shellingham")  # not in this venv: the job gets it from its wheels
    try:
        with syndeo.up(target="local", nodes=2, cluster_id=cid, join_timeout_s=240) as cluster:
            assert cluster.id == cid and cluster.info is not None and cluster.owned
            job_id = _runs_the_users_program(cluster, work, tmp_path)

            failing = cluster.submit(["python", "-c", "import sys; sys.exit(3)"], workdir=work)
            with pytest.raises(WorkloadError) as failed:
                failing.result(timeout=300)
            assert failed.value.exit_code == 3
            assert str(failed.value).startswith(f"job {failing.id} failed (exit 3): ")
            assert failing.state is syndeo.JobState.FAILED

            nodes = load_launched(cid).local.pids  # this process's children
            seen = _attached_elsewhere(cid, job_id, tmp_path)
            assert seen["state"] == "succeeded" and "NODES 2" in seen["logs"]
            assert [j.id for j, _ in cluster.jobs()] == [job_id, failing.id]
        # Leaving the block stopped it: nothing of it runs, and it is no longer known.
        assert_nothing_left(cid)
        # Its nodes were this process's children: `down` saw them end (it did not sit
        # out its timeout on zombies) and reaped them.
        mine = {p.pid: p.status() for p in psutil.Process().children()}
        assert {pid: mine[pid] for pid in nodes if pid in mine} == {}
        with pytest.raises(SyndeoError):
            syndeo.Cluster.attach(cid)
    finally:
        reap(cid)


def test_a_users_mistake_is_the_command_lines_line(tmp_path: Path, syndeo_home: Path) -> None:
    with pytest.raises(SyndeoError) as raised:
        syndeo.Cluster.attach("no-such-cluster")
    shown = one_line_error(syndeo_cli("down", "--cluster-id", "no-such-cluster", cwd=tmp_path))
    assert shown == f"syndeo: error: {raised.value}"
    with pytest.raises(SyndeoError) as raised:
        syndeo.plan(target="local", nodes=0)
    shown = one_line_error(
        syndeo_cli("deploy", "--target", "local", "--nodes", "0", "--dry-run", cwd=tmp_path)
    )
    assert shown == f"syndeo: error: {raised.value}"


def test_leaving_a_with_block_leaves_an_attached_cluster_up(
    tmp_path: Path, syndeo_home: Path
) -> None:
    """A cluster reached with ``attach`` belongs to whoever started it: a ``with`` block
    that only scopes its use must not take it down.  Its state is saved as ``up`` saves
    it, with a process standing in for its head node (what ``down`` would stop)."""
    cid = "attached-only"
    head = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        part = {"pids": [head.pid], "create_times": [psutil.Process(head.pid).create_time()]}
        save_launched(make_launched("local", cid, f"file://{tmp_path / 'rdv'}", part=part))
        with syndeo.Cluster.attach(cid) as cluster:
            assert cluster.id == cid
        assert head.poll() is None, "leaving the block stopped the attached cluster's node"
        assert syndeo.Cluster.attach(cid).id == cid  # and its state is still there
    finally:
        head.kill()
        head.wait()


def test_import_syndeo_loads_neither_ray_nor_a_cloud_sdk_nor_the_launcher() -> None:
    probe = (
        "import sys, syndeo; syndeo.up; syndeo.Cluster; syndeo.JobState; "
        "heavy = ('ray', 'boto3', 'google', 'azure', 'gymnasium', 'invoke'); "
        "print(sorted({m.split('.')[0] for m in sys.modules} & set(heavy)), "
        "'syndeo.launcher.deploy' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["[]", "False"], out.stdout + out.stderr
