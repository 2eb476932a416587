"""A node that joins an ``up`` cluster while a job with packages runs (``grow``, as the
autoscaler or a replacement would) installs the job's wheels from the rendezvous before
its Ray starts, so the job's tasks import them there too: no task lands on it first.

A real local cluster (head + one node of group ``cpu``, then a second one), driven only
through the ``syndeo`` CLI; the package is a wheel made here, found through pip's own
links directory on the launcher."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.helpers import assert_nothing_left, reap, syndeo
from tests.support.wheels import wheel

PROGRAM = """\
import time, ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy as On

@ray.remote(num_cpus=0.1)
def probe():
    import latepkg
    return ray.get_runtime_context().get_node_id(), latepkg.__file__

ray.init()
print("WAITING", flush=True)
deadline = time.time() + 240
while len([n for n in ray.nodes() if n["Alive"]]) < 3 and time.time() < deadline:
    time.sleep(1)
ids = [n["NodeID"] for n in ray.nodes() if n["Alive"]]
found = ray.get([probe.options(scheduling_strategy=On(i, soft=False)).remote() for i in ids])
print("NODES", len({node for node, _ in found}), flush=True)
for _, path in found:
    print("TASK", path, flush=True)
"""


@pytest.mark.slow
def test_a_node_that_joins_later_has_the_running_jobs_packages(
    tmp_path: Path, syndeo_home: Path
) -> None:
    cid = "jobs-late"
    links = tmp_path / "links"
    links.mkdir()
    name, data = wheel("latepkg")
    (links / name).write_bytes(data)
    work = tmp_path / "work"
    work.mkdir()
    (work / "prog.py").write_text(PROGRAM)
    (work / "requirements.txt").write_text("latepkg\n")
    cfg = tmp_path / "syndeo.toml"
    cfg.write_text('join_timeout_s = 240\n[[groups]]\nname = "cpu"\n')
    env = {"PIP_FIND_LINKS": str(links)}
    try:
        up = syndeo("up", "--config", str(cfg), "--cluster-id", cid, cwd=tmp_path, timeout=300)
        assert up.returncode == 0, up.stderr[-3000:]
        sub = syndeo(
            "submit",
            "--cluster-id",
            cid,
            "--workdir",
            str(work),
            "--",
            "python",
            "prog.py",
            cwd=tmp_path,
            env=env,
            timeout=300,
        )
        assert sub.returncode == 0, sub.stderr[-3000:]
        job_id = sub.stdout.split()[0]
        waiting = syndeo_home / "rendezvous" / cid / "a0" / "jobs" / job_id / "state.json"
        head_log = syndeo_home / "clusters" / cid / "node-0.log"
        _wait_for(lambda: f"job {job_id} started" in head_log.read_text(), waiting)
        grow = syndeo(
            "grow",
            "--cluster-id",
            cid,
            "--group",
            "cpu",
            "--nodes",
            "1",
            "--wait-s",
            "180",
            cwd=tmp_path,
            timeout=300,
        )
        assert grow.returncode == 0, grow.stderr[-3000:]
        logs = syndeo(
            "logs", "--cluster-id", cid, "--job", job_id, "--follow", cwd=tmp_path, timeout=300
        )
        assert logs.returncode == 0, logs.stdout[-2000:] + logs.stderr[-2000:]
        assert "NODES 3" in logs.stdout, logs.stdout
        paths = re.findall(r"^TASK (\S+)$", logs.stdout, re.M)
        assert len(paths) == 3 and all("/pylibs/" in p for p in paths), logs.stdout
        late = (syndeo_home / "clusters" / cid / "node-2.log").read_text()
        installed, joined = late.find("installed in"), late.find("joined head")
        assert 0 <= installed < joined, late[-3000:]  # before its Ray joined
        down = syndeo("down", "--cluster-id", cid, cwd=tmp_path)
        assert down.returncode == 0, down.stderr
        assert_nothing_left(cid)
    finally:
        syndeo("down", "--cluster-id", cid, cwd=tmp_path)
        reap(cid)


def _wait_for(done: Callable[[], bool], about: Path, timeout_s: float = 180.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, about.read_text() if about.exists() else about
        time.sleep(0.5)
