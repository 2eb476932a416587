"""`syndeo deploy --target local --container <sif>`: three containerised nodes form a
Ray cluster as the unprivileged test user, run a workload, tear down completely."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import psutil
import pytest

from syndeo.image.manifest import ImageManifest, manifest_path
from testbeds.launch import deploy_as, launcher_python
from tests.support.helpers import assert_nothing_left
from tests.support.task_reach import reach_spec

pytestmark = [pytest.mark.apptainer, pytest.mark.slow]
PROBE = Path(__file__).with_name("container_probe.py")
REACH = Path(__file__).parents[1] / "support" / "task_reach.py"


def test_three_containerised_nodes_form_a_cluster(
    built_image: ImageManifest, sif: Path, shared_dir: Path, run_user: str | None, run_uid: int
) -> None:
    # The program's own directory, beside (never around) the launcher's state.
    work, home = shared_dir / "proj", shared_dir / "home"
    work.mkdir()
    # The image under a path of this test's own, so that the check for processes left
    # behind (at the end) sees only this test's, not those of other tests running the
    # same image meanwhile.
    sif = own_link(sif, shared_dir / "image")
    cid = "ctr3"
    # What no task may reach: the launcher's state (launch keys) and code, another
    # cluster's records in the same rendezvous, the launcher's log dir of this cluster.
    other = home / "rendezvous" / "other-cluster"
    other.mkdir(parents=True)
    (other / "head.json").write_text("{}")
    import syndeo

    forbidden = [
        str(home / "clusters"),
        str(home / "clusters" / cid),
        str(other),
        str(Path(syndeo.__file__).parent),
        str(Path(launcher_python(run_user)).parent),
    ]
    (work / "reach.json").write_text(json.dumps(reach_spec(forbidden)))
    shutil.copy2(PROBE, work / PROBE.name)
    shutil.copy2(REACH, work / REACH.name)
    for path in [home, *home.rglob("*"), work, *work.iterdir()]:
        os.chown(path, run_uid, -1)
    started = time.time()
    proc = deploy_as(
        run_user,
        [
            "--target",
            "local",
            "--nodes",
            "3",
            "--cluster-id",
            cid,
            "--container",
            str(sif),
            "--run",
            f"python {PROBE.name}",
            "--results-dir",
            str(work / "res"),
            "--join-timeout",
            "300",
        ],
        cwd=work,
        home=home,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads((work / "res" / cid / "result.json").read_text())
    assert result["nodes"] == 3
    assert result["node_ips"] == ["127.0.0.10", "127.0.0.11", "127.0.0.12"]
    # Tasks ran, in a container, on each of the three nodes (each its own address).
    assert result["task_nodes"] == 3
    assert result["task_ips"] == result["node_ips"]
    assert len(result["tasks"]) == 6
    for seen in [result["driver"], *result["tasks"]]:
        assert seen["uid"] == run_uid != 0
        assert seen["in_container"] is True
        assert seen["host_env_leak"] is False
        # The node's secrets: neither inherited nor readable through /proc (the node's
        # process is not dumpable), though tasks run as the node's user.
        assert seen["launch_key_leak"] is False
        assert seen["node_environ"] == "denied", seen
        # Nor from any other process it can see, in either form (NAME=value, or the
        # JSON in which Apptainer's init shim keeps the container's environment).
        assert seen["secrets_seen"] == [], seen
        assert seen["access"] == dict.fromkeys(forbidden, "absent"), seen
        assert str(seen["python"]).startswith("/opt/syndeo/")
    summary = json.loads((work / "res" / cid / "deploy.json").read_text())
    assert summary["exit_code"] == 0
    assert summary["image"]["digest"] == f"sha256:{built_image.sha256}"
    assert_nothing_left(cid)
    # Nor any apptainer / squashfuse process this test started for the image.
    left = []
    for p in psutil.process_iter(["cmdline", "create_time"]):
        cmd = " ".join(p.info["cmdline"] or [])
        if p.info["create_time"] >= started - 1 and str(sif) in cmd:
            left.append(f"{p.pid} {cmd[:80]}")
    assert not left, left


def own_link(sif: Path, where: Path) -> Path:
    """``sif`` and its manifest linked (or, across file systems, copied) into ``where``."""
    where.mkdir()
    for path in (sif, manifest_path(sif)):
        try:
            os.link(path, where / path.name)
        except OSError:
            shutil.copy2(path, where / path.name)
    return where / sif.name
