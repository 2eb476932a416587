"""A local ``up`` cluster that follows demand when a node dies before it joins: the
node's process is killed as soon as the watcher has started it.  The watcher sees the
process gone (pid and start time), says so in watch.log, backs the group off and
starts another node, which joins: the waiting placement group is placed."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.support.demand import SPREAD, kill_tree
from tests.support.helpers import assert_nothing_left, syndeo

CONFIG = """\
cpus_per_node = 1
[[groups]]
name = "worker"
max_nodes = 1
"""
FAILED = "group worker: rank 1 ended before it joined: its process"
NEXT = "group worker: next start in"


def _wait_for(
    what: str, check: object, timeout_s: float, every_s: float = 1.0, log: Path | None = None
) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():  # type: ignore[operator]
        said = log.read_text()[-3000:] if log is not None else ""
        assert time.monotonic() < deadline, f"not within {timeout_s:.0f} s: {what}\n{said}"
        time.sleep(every_s)


@pytest.mark.cluster
def test_a_node_killed_before_it_joins_is_seen_and_started_again(
    syndeo_home: Path, tmp_path: Path
) -> None:
    cid = "tnojoin"
    work = tmp_path / "work"
    work.mkdir()
    (work / "spread.py").write_text(SPREAD)
    cfg = tmp_path / "config.toml"
    cfg.write_text(CONFIG)
    up = syndeo("up", "--config", str(cfg), "--cluster-id", cid, cwd=work)
    assert up.returncode == 0, up.stderr[-3000:]
    here = syndeo_home / "clusters" / cid
    log = here / "watch.log"
    try:
        job = syndeo("submit", "--cluster-id", cid, "--", "python", "spread.py", cwd=work)
        assert job.returncode == 0, job.stderr[-3000:]

        def rank1() -> tuple[int, float] | None:
            data = json.loads((here / "launched.json").read_text())["part"]
            if len(data["pids"]) < 2:
                return None
            return int(data["pids"][1]), float(data["create_times"][1])

        _wait_for("rank 1 started", rank1, 120, every_s=0.1)
        started = rank1()
        assert started is not None
        kill_tree(*started)

        # The watcher writes the loss, then the backoff, as two lines: wait for both.
        def backed_off() -> bool:
            text = log.read_text()
            return FAILED in text and NEXT in text.split(FAILED, 1)[1]

        _wait_for("the dead node seen and the group backed off", backed_off, 60, log=log)
        ended = syndeo(
            *("logs", "--job", job.stdout.split()[0], "--cluster-id", cid, "--follow"),
            cwd=work,
            timeout=300,
        )
        print(log.read_text()[-3000:])
        assert ended.returncode == 0 and "placed" in ended.stdout, ended.stdout[-2000:]
        assert "group worker: started ranks 2-2" in log.read_text()
    finally:
        if (here / "launched.json").exists():
            syndeo("down", "--cluster-id", cid, cwd=work)
    assert_nothing_left(cid)
