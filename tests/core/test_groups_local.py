"""Node groups and the GPU rule on real local Ray clusters (one cluster, several checks)."""

from __future__ import annotations

from pathlib import Path

from tests.core.helpers import assert_nothing_left, read_json, syndeo

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


def test_groups_labels_and_distinct_gpus(syndeo_home: Path, tmp_path: Path) -> None:
    cid = "tgroups"
    cfg = tmp_path / "groups.toml"
    cfg.write_text(CONFIG)
    proc = syndeo(
        "deploy", "--config", str(cfg), "--cluster-id", cid, "--results-dir",
        str(tmp_path / "res"), "--run", f"python {PROBE} 1",
        cwd=tmp_path, timeout=400,
        # The "machine's GPUs" this launcher may hand out (there is no real GPU here):
        # Ray takes a node's GPU ids from the CUDA_VISIBLE_DEVICES it starts with.
        env={"CUDA_VISIBLE_DEVICES": "4,7"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = read_json(tmp_path / "res" / cid / "result.json")
    assert out["groups"] == {"head": [0], "cpu": [1], "gpu": [2, 3]}
    assert out["gpu_per_group"] == {"head": 0, "cpu": 0, "gpu": 2}
    # Two one-GPU tasks at once: one per GPU node, each seeing only its own device.
    seen = sorted((t["rank"], t["cuda"], tuple(t["gpu_ids"])) for t in out["gpu_tasks"])
    assert seen == [("2", "4", ("4",)), ("3", "7", ("7",))]
    # Ray's own API places work by group / rank label.
    assert {g: t["group"] for g, t in out["by_label"].items()} == {
        "head": "head", "cpu": "cpu", "gpu": "gpu",
    }  # fmt: skip
    assert out["by_rank"]["1"]["rank"] == "1"
    # The status line counted every group.
    assert "head 1/1, cpu 1/1, gpu 2/2" in proc.stderr
    summary = read_json(tmp_path / "res" / cid / "deploy.json")
    assert summary["nodes"] == 4
    assert_nothing_left(cid)
