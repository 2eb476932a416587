"""A lost worker comes back: a real 3-node local deploy running the benchmark, one
worker's whole process tree SIGKILLed mid-run; the launcher starts a replacement for
that rank, it joins the running head, and the benchmark's count stays exact."""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path

import psutil
import pytest

from tests.support.helpers import (
    assert_nothing_left,
    one_line_error,
    processes_of,
    reap,
    start_syndeo,
    syndeo,
)

CONFIG = """\
target = "local"
nodes = 3
cpus_per_node = 1
join_timeout_s = 240
[bench]
samples_per_cpu = 40000
repeats = 3
[recovery]
replace_lost = true
max_replacements = 1
"""


def _status(home: Path, cid: str) -> dict[str, object]:
    for path in home.rglob(f"{cid}/a0/status.json"):
        with contextlib.suppress(OSError, ValueError):
            data: dict[str, object] = json.loads(path.read_text())
            return data
    return {}


def _kill_rank(cid: str, rank: int) -> int:
    """SIGKILL every process of one node (its syndeo node, Ray, Ray's workers)."""
    victims = [p for p in processes_of(cid) if p.environ().get("SYNDEO_RANK") == str(rank)]
    for p in victims:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.kill()
    return len(victims)


@pytest.mark.slow
def test_a_killed_worker_is_replaced_and_the_count_stays_exact(
    tmp_path: Path, syndeo_home: Path
) -> None:
    cid = "recover-local"
    cfg = tmp_path / "syndeo.toml"
    cfg.write_text(CONFIG)
    proc = start_syndeo("deploy", "--config", str(cfg), "--cluster-id", cid, cwd=tmp_path)
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            st = _status(syndeo_home, cid)
            progress = st.get("progress") or {}
            if st.get("phase") == "running" and isinstance(progress, dict) and progress:
                break  # the benchmark is sampling on every node
            assert proc.poll() is None, proc.communicate()[1][-3000:]
            time.sleep(0.5)
        else:
            raise AssertionError("the benchmark never started running")
        assert _kill_rank(cid, 2) >= 2  # the node and at least its Ray
        _out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err[-3000:]
        assert "rank 2 lost; started a replacement" in err
        result = json.loads((tmp_path / "results" / cid / "result.json").read_text())
        [env] = result["results"]
        assert env["samples_counted"] == env["samples_requested"] == 40000 * 3  # per repeat
        summary = json.loads((tmp_path / "results" / cid / "deploy.json").read_text())
        assert summary["lost_ranks"] == [2]
        [event] = summary["recovery"]
        assert event["rank"] == 2 and event["replaced"].startswith("rank 2 (pid ")
        assert event["lost_s"] <= event["replaced_s"] <= event["joined_s"]
        print("lost -> replacement joined, s:", event["replacement_joined_after_s"])
        print("repeats, steps/s:", [r["steps_per_s"] for r in env["syndeo"]["repeats"]])
        assert_nothing_left(cid)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        reap(cid)


def test_recovery_settings_are_checked_before_anything_starts(
    tmp_path: Path, syndeo_home: Path
) -> None:
    cfg = tmp_path / "bad.toml"
    cfg.write_text("[recovery]\nreplace_lost = true\nmax_replacements = -1\n")
    assert "max_replacements" in one_line_error(
        syndeo("deploy", "--config", str(cfg), cwd=tmp_path)
    )
    cfg.write_text('target = "slurm"\n[recovery]\nreplace_lost = true\n')
    err = one_line_error(syndeo("deploy", "--config", str(cfg), cwd=tmp_path))
    assert "the slurm target cannot replace a lost node" in err
