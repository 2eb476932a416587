"""``invoke bench-bringup`` end to end on the local target: the JSON it writes.

No timing thresholds (speed goals are the benchmark's output, not a test's): the
document must hold every run, interleaved A B B A, each cluster run with every
node's phases complete and in order, and ratios computed from those runs.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.bringup import abba
from tests.support.helpers import ROOT, assert_nothing_left

INVOKE = [str(Path(sys.executable).with_name("invoke")), "-r", str(ROOT)]


def test_runs_interleave_abba() -> None:
    assert abba(2) == ["reference", "cluster", "cluster", "reference"]
    assert abba(3)[4:] == ["reference", "cluster"]


@pytest.mark.cluster
def test_bench_bringup_writes_complete_ordered_timelines_and_ratios(
    syndeo_home: Path, tmp_path: Path
) -> None:
    out = tmp_path / "bringup.json"
    proc = subprocess.run(
        [
            *INVOKE,
            "bench-bringup",
            "--target",
            "local",
            "--nodes",
            "3",
            "--runs",
            "1",
            "--out",
            str(out),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(out.read_text())
    assert [r["kind"] for r in doc["runs"]] == ["reference", "cluster"]
    refs = [r for r in doc["runs"] if r["kind"] == "reference"]
    clusters = [r for r in doc["runs"] if r["kind"] == "cluster"]
    for ref in refs:
        # The bare head's own phases, read from Ray's logs, in Ray's order.
        ph = ref["phases"]
        assert ph["ray_gcs_listening"] <= ph["ray_raylet_process"] <= ph["ray_raylet_started"]
        assert 0 < ph["ray_started"] <= ref["seconds"]
    for run in clusters:
        assert run["timeline_problems"] == [], run
        assert sorted(run["nodes"]) == ["0", "1", "2"]
        head = run["nodes"]["0"]
        assert run["launch_to_joined_s"] == head["all_joined"]
        assert run["done_to_return_s"] > 0
    s = doc["summary"]
    ref_med = statistics.median(r["seconds"] for r in refs)
    joined_med = statistics.median(r["launch_to_joined_s"] for r in clusters)
    assert s["reference_median_s"] == round(ref_med, 3)
    assert s["ratio"] == round(joined_med / ref_med, 3)
    assert s["ratio_met"] == (joined_med / ref_med <= s["ratio_goal"])
    assert json.loads(proc.stdout) == s  # what it prints is the summary
    for run in clusters:  # deploy's own teardown: nothing of any run is left
        assert_nothing_left(run["cluster_id"])


def test_bad_input_is_refused_before_any_run(syndeo_home: Path, tmp_path: Path) -> None:
    """A missing image, a bad size, a cloud target: one line, before the first reference run."""
    for args, says in [
        (["--container", str(tmp_path / "nope.sif")], "container image not found"),
        (["--nodes", "0"], "nodes:"),
        (["--runs", "0"], "--runs must be >= 1"),
        (["--target", "aws"], "local or slurm"),
    ]:
        out = tmp_path / "b.json"
        proc = subprocess.run(
            [*INVOKE, "bench-bringup", *args, "--out", str(out)],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )
        assert proc.returncode != 0, args
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and says in lines[0], (args, proc.stderr)
        assert "bare ray start" not in proc.stdout + proc.stderr  # nothing ran
        assert not out.exists()
