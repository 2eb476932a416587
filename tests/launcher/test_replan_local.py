"""A local ``up`` cluster with two groups that could each take the waiting work, one of
which cannot start nodes: every node of ``small`` (the one Ray's scorer prefers for a
one-CPU bundle) is killed as soon as the watcher starts it, as a crash at start would.
The watcher sees it end before it joins and backs ``small`` off; it tells the head so
(a signed record under ``ctl/``), and Ray's autoscaler asks for a ``big`` node instead,
which joins: the waiting placement group is placed.  Before, Ray kept asking for
``small`` only, and the work waited for as long as its nodes kept failing."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from pathlib import Path

import pytest

from tests.support.demand import SPREAD, kill_tree
from tests.support.helpers import assert_nothing_left, syndeo

CONFIG = """\
cpus_per_node = 1
[[groups]]
name = "small"
max_nodes = 1
[[groups]]
name = "big"
cpus_per_node = 2
max_nodes = 1
"""


def _kill_small_nodes(launched: Path, stop: threading.Event, killed: list[int]) -> None:
    """Kill each node of group ``small`` (and its children) the moment it is listed."""
    while not stop.wait(0.1):
        with contextlib.suppress(OSError, ValueError, KeyError, IndexError):
            part = json.loads(launched.read_text())["part"]
            for node in part["grown"]:
                rank = node["rank"]
                if node["group"] != "small" or rank in killed or rank >= len(part["pids"]):
                    continue
                kill_tree(part["pids"][rank], part["create_times"][rank])
                killed.append(rank)


@pytest.mark.cluster
def test_work_goes_to_another_group_while_one_cannot_start_nodes(
    syndeo_home: Path, tmp_path: Path
) -> None:
    cid = "treplan"
    work = tmp_path / "work"
    work.mkdir()
    (work / "spread.py").write_text(SPREAD)
    cfg = tmp_path / "config.toml"
    cfg.write_text(CONFIG)
    up = syndeo("up", "--config", str(cfg), "--cluster-id", cid, cwd=work)
    assert up.returncode == 0, up.stderr[-3000:]
    here = syndeo_home / "clusters" / cid
    log = here / "watch.log"
    stop, killed = threading.Event(), list[int]()
    killer = threading.Thread(target=_kill_small_nodes, args=(here / "launched.json", stop, killed))
    killer.start()
    try:
        job = syndeo("submit", "--cluster-id", cid, "--", "python", "spread.py", cwd=work)
        assert job.returncode == 0, job.stderr[-3000:]
        started = time.monotonic()
        ended = syndeo(
            *("logs", "--job", job.stdout.split()[0], "--cluster-id", cid, "--follow"),
            cwd=work,
            timeout=300,
        )
        said = log.read_text()
        print(said[-3000:])
        assert ended.returncode == 0 and "placed" in ended.stdout, ended.stdout[-2000:]
        assert killed, "no node of group small was started"
        assert f"group small: rank {killed[0]} ended before it joined" in said
        assert "group small: the head's autoscaler plans without it for" in said
        assert "group big: started" in said
        print(f"placed {time.monotonic() - started:.0f} s after submit; small ranks {killed}")
    finally:
        stop.set()
        killer.join()
        if (here / "launched.json").exists():
            syndeo("down", "--cluster-id", cid, cwd=work)
    assert_nothing_left(cid)
