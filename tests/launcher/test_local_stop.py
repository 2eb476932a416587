"""The local target's ``stop`` as ``down`` runs it: a target of its own, built from the
saved state, that holds none of the nodes' ``Popen`` objects."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import psutil

from syndeo.launcher.config import load_config
from syndeo.launcher.spec import Launched
from syndeo.launcher.targets import get_target


def test_down_in_the_script_that_ran_up_reaps_the_nodes_it_stops(tmp_path: Path) -> None:
    """The Python API's ``up`` then ``down`` in one script: the nodes are this process's
    children, still running when ``stop`` sends its TERM; each ends as a zombie of this
    process, which ``stop`` reaps (else every cluster would leave its nodes behind as
    zombies in the user's process until it exits)."""
    nodes = [subprocess.Popen(["sleep", "60"]) for _ in range(2)]
    pids = [n.pid for n in nodes]
    try:
        launched = Launched.model_validate(
            {
                "target": "local",
                "cluster_id": "reap",
                "rendezvous": f"file://{tmp_path}",
                "started_at": time.time(),
                "part": {
                    "target": "local",
                    "pids": pids,
                    "create_times": [psutil.Process(p).create_time() for p in pids],
                },
            }
        )
        get_target(load_config(None, target="local", nodes=2)).stop(launched)
        mine = {p.pid: p.status() for p in psutil.Process().children()}
        assert {pid: mine[pid] for pid in pids if pid in mine} == {}
    finally:
        for n in nodes:
            n.kill()
            n.wait()
