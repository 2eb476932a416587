"""Node groups and the GPU rule on real local Ray clusters (one cluster, several checks)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.helpers import assert_nothing_left, read_json, syndeo

PROBE = Path(__file__).resolve().parents[1] / "groups_probe.py"
CONFIG = """
join_timeout_s = 240
[[groups]]
name = "cpu"
cpus_per_node = 2
[[groups]]
name = "gpu"
nodes = 2
gpus_per_node = 1
"""


@pytest.mark.cluster
def test_groups_labels_and_distinct_gpus(syndeo_home: Path, tmp_path: Path) -> None:
    cid = "tgroups"
    cfg = tmp_path / "groups.toml"
    cfg.write_text(CONFIG)
    proc = syndeo(
        "deploy",
        "--config",
        str(cfg),
        "--cluster-id",
        cid,
        "--results-dir",
        str(tmp_path / "res"),
        "--run",
        f"python {PROBE} 1",
        cwd=tmp_path,
        timeout=400,
        # The "machine's GPUs" this launcher may hand out (there is no real GPU here):
        # Ray takes a node's GPU ids from the CUDA_VISIBLE_DEVICES it starts with.
        env={"CUDA_VISIBLE_DEVICES": "4,7"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = read_json(tmp_path / "res" / cid / "result.json")
    assert out["groups"] == {"head": [0], "cpu": [1], "gpu": [2, 3]}
    assert out["gpu_per_group"] == {"head": 0, "cpu": 0, "gpu": 2}
    # Two one-GPU tasks at once: one per GPU node, each seeing only its own device.
    seen = sorted((t["rank"], t["cuda"], tuple(t["gpu_ids"])) for t in out["gpu_tasks"])
    assert seen == [("2", "4", ("4",)), ("3", "7", ("7",))]
    # Ray's own API places work by group / rank label.
    assert {g: t["group"] for g, t in out["by_label"].items()} == {
        "head": "head",
        "cpu": "cpu",
        "gpu": "gpu",
    }
    assert out["by_rank"]["1"]["rank"] == "1"
    # The status line counted every group.
    assert "head 1/1, cpu 1/1, gpu 2/2" in proc.stderr
    summary = read_json(tmp_path / "res" / cid / "deploy.json")
    assert summary["nodes"] == 4
    assert_nothing_left(cid)


def _probe(up_out: str, *ranks: str) -> dict[str, Any]:
    """The probe as a Ray driver on the head's "host" (127.0.0.10), as a user would run it."""
    env = {**os.environ, **dict(re.findall(r"(RAY_\w+)=(\S+)", up_out))}
    env["PROBE_NODE_IP"] = "127.0.0.10"
    proc = subprocess.run(
        [sys.executable, str(PROBE), *ranks],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("GROUPS-PROBE ")]
    assert lines, f"probe failed (rc {proc.returncode}): {proc.stderr[-3000:]}"
    out: dict[str, Any] = json.loads(lines[-1].removeprefix("GROUPS-PROBE "))
    return out


@pytest.mark.cluster
def test_grow_and_shrink_an_up_cluster(syndeo_home: Path, tmp_path: Path) -> None:
    cid = "tgrow"
    cfg = tmp_path / "groups.toml"
    cfg.write_text('join_timeout_s = 240\n[[groups]]\nname = "cpu"\n')
    up = syndeo("up", "--config", str(cfg), "--cluster-id", cid, cwd=tmp_path, timeout=300)
    try:
        assert up.returncode == 0, up.stderr[-3000:]
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
        assert "group cpu has 2 node(s)" in grow.stderr
        out = _probe(up.stdout, "2")
        assert out["groups"] == {"head": [0], "cpu": [1, 2]}
        assert (out["by_rank"]["2"]["group"], out["by_rank"]["2"]["rank"]) == ("cpu", "2")
        bad = syndeo("grow", "--cluster-id", cid, "--group", "gpu", cwd=tmp_path)
        assert bad.returncode == 2
        assert bad.stderr.strip() == (
            "syndeo: error: unknown group 'gpu'; the cluster's groups are: head, cpu"
        )
        shrink = syndeo("shrink", "--cluster-id", cid, "--group", "cpu", cwd=tmp_path)
        assert shrink.returncode == 0 and "stopped rank 2 of group cpu" in shrink.stderr
        # The head notices (Ray marks the node dead) and the cluster serves on.
        status = syndeo_home / "rendezvous" / cid / "a0" / "status.json"
        deadline = time.monotonic() + 90
        while json.loads(status.read_text())["groups"] != {"head": [1, 1], "cpu": [1, 1]}:
            assert time.monotonic() < deadline, status.read_text()
            time.sleep(0.5)
        out = _probe(up.stdout)
        assert out["groups"] == {"head": [0], "cpu": [1]}
        log = (syndeo_home / "clusters" / cid / "node-0.log").read_text()
        assert "lost node(s) of rank 2 (cpu)" in log
    finally:
        down = syndeo("down", "--cluster-id", cid, cwd=tmp_path)
    assert down.returncode == 0, down.stderr[-2000:]
    assert_nothing_left(cid)
