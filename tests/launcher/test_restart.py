"""A lost head restarts the cluster: a real 2-node local deploy running the benchmark,
the head's whole process tree SIGKILLed mid-run.  With ``[recovery] max_restarts = 1``
the launcher starts the cluster again as attempt 1, which runs the benchmark to its
exact count; without it the run ends with one clear line, as before."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.support.helpers import (
    assert_nothing_left,
    kill_rank,
    one_line_error,
    reap,
    start_syndeo,
    syndeo,
    wait_benchmark_running,
)

CONFIG = """\
target = "local"
nodes = 2
cpus_per_node = 1
join_timeout_s = 240
[bench]
samples_per_cpu = 400000
repeats = 1
"""


@pytest.mark.slow
def test_a_killed_head_restarts_the_cluster_as_the_next_attempt(
    tmp_path: Path, syndeo_home: Path
) -> None:
    cid = "restart-local"
    cfg = tmp_path / "syndeo.toml"
    cfg.write_text(CONFIG + "[recovery]\nmax_restarts = 1\n")
    proc = start_syndeo("deploy", "--config", str(cfg), "--cluster-id", cid, cwd=tmp_path)
    try:
        wait_benchmark_running(proc, syndeo_home, cid)
        assert kill_rank(cid, 0) >= 2  # the node and at least its Ray
        _out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err[-3000:]
        said = " ".join(err.split())  # (the terminal's line breaks aside)
        assert "restarting the cluster as attempt 1" in said
        assert "finished on attempt 1" in said
        result = json.loads((tmp_path / "results" / cid / "result.json").read_text())
        [env] = result["results"]
        assert env["samples_counted"] == env["samples_requested"] == 400000 * 2  # per repeat
        summary = json.loads((tmp_path / "results" / cid / "deploy.json").read_text())
        assert summary["exit_code"] == 0 and summary["attempt"] == 1
        [restart] = summary["restarts"]
        assert restart["attempt"] == 0 and restart["head_exit"] != 0
        assert restart["head_lost_s"] <= restart["restarted_s"] <= restart["joined_s"]
        print("head lost -> attempt 1 all joined, s:", restart["joined_s"] - restart["head_lost_s"])
        assert_nothing_left(cid)
        # Every attempt's records are gone with the run (the id is free again).
        assert not list(syndeo_home.rglob(f"rendezvous/{cid}/a*"))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        reap(cid)


@pytest.mark.slow
def test_without_max_restarts_a_lost_head_ends_the_run_in_one_line(
    tmp_path: Path, syndeo_home: Path
) -> None:
    cid = "nohead-local"
    cfg = tmp_path / "syndeo.toml"
    cfg.write_text(CONFIG)
    proc = start_syndeo("deploy", "--config", str(cfg), "--cluster-id", cid, cwd=tmp_path)
    try:
        wait_benchmark_running(proc, syndeo_home, cid)
        assert kill_rank(cid, 0) >= 2
        out, err = proc.communicate(timeout=300)
        line = one_line_error(subprocess.CompletedProcess([], proc.returncode, out, err))
        assert "the head ended before its workload finished" in line
        assert "restarting" not in err
        summary = json.loads((tmp_path / "results" / cid / "deploy.json").read_text())
        assert summary["attempt"] == 0 and "restarts" not in summary
        assert_nothing_left(cid)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        reap(cid)


@pytest.mark.parametrize("value", ["-1", "101"])
def test_max_restarts_is_checked_in_one_line(tmp_path: Path, syndeo_home: Path, value: str) -> None:
    cfg = tmp_path / "bad.toml"
    cfg.write_text(f"[recovery]\nmax_restarts = {value}\n")
    line = one_line_error(syndeo("deploy", "--config", str(cfg), cwd=tmp_path))
    assert "recovery.max_restarts: Input should be" in line
    assert not (tmp_path / "results").exists()
