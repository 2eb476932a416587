"""The bring-up timeline: what a node records, and the check every collected one passes.

Real clusters' timelines are checked in test_local_cluster.py (3 nodes) and by
``invoke bench-bringup`` (tests/bench/test_bringup.py); here the check itself, on
hand-made documents, so that a broken check cannot pass those silently.
"""

from __future__ import annotations

import time
from pathlib import Path

from syndeo.core.timeline import HEAD_PHASES, WORKER_PHASES, Timeline, first_stamp, problems


def _doc() -> dict[str, object]:
    t = 1000.0
    head = {p: t + i for i, p in enumerate(HEAD_PHASES)}
    # A worker sees the head once published, then goes through its own phases.
    worker = {p: head["published"] + 0.1 * i for i, p in enumerate(WORKER_PHASES)}
    worker["process_start"], worker["main"], worker["rendezvous_ok"] = t, t + 0.5, t + 0.6
    return {"launcher": {"launch_start": t - 0.01}, "nodes": {"0": head, "1": worker}}


def test_a_complete_ordered_timeline_has_no_problems() -> None:
    doc = _doc()
    assert problems(doc, nodes=2) == []
    # A run that ends right after the join may stop a worker before `ray start`
    # reported it started: not a problem; the head missing a phase is.
    nodes = doc["nodes"]
    assert isinstance(nodes, dict)
    del nodes["1"]["registered"], nodes["1"]["ray_started"]
    assert problems(doc, nodes=2) == []
    del nodes["0"]["ray_started"]
    assert problems(doc, nodes=2) == ["rank 0: no ray_started"]


def test_ray_reporting_started_before_the_raylet_logs_its_registration_is_no_problem() -> None:
    # Seen in CI: `ray start` said "Ray runtime started" 16 ms before the raylet wrote
    # "Raylet of id": both follow the raylet's registration, in either order.
    doc = _doc()
    nodes = doc["nodes"]
    assert isinstance(nodes, dict)
    for rank in ("0", "1"):
        nodes[rank]["ray_raylet_started"] = nodes[rank]["ray_started"] + 0.016
    assert problems(doc, nodes=2) == []
    nodes["1"]["ray_raylet_started"] = nodes["1"]["ray_raylet_process"] - 1
    assert problems(doc, nodes=2) == [
        f"rank 1: ray_raylet_started ({nodes['1']['ray_raylet_started']:.3f}) "
        f"before ray_raylet_process ({nodes['1']['ray_raylet_process']:.3f})"
    ]


def test_missing_nodes_missing_phases_and_disorder_are_each_named() -> None:
    doc = _doc()
    nodes = doc["nodes"]
    assert isinstance(nodes, dict)
    del nodes["0"]["driver_connected"]
    nodes["1"]["registered"] = nodes["1"]["ray_start"] - 1  # before its own Ray started
    nodes["1"]["head_seen"] = nodes["0"]["gcs_reachable"] - 5  # before the head published
    found = problems(doc, nodes=3)
    assert "rank 2: no timeline" in found
    assert "rank 0: no driver_connected" in found
    assert any(p.startswith("rank 1: registered") for p in found), found
    assert "rank 1: saw the head before it was published" in found


def test_first_mark_wins_and_marks_come_out_in_time_order() -> None:
    tl = Timeline()
    tl.mark("b", 20.0)
    tl.mark("a", 10.0)
    tl.mark("a", 30.0)  # a retry does not move it
    marks = tl.as_dict()
    assert marks["a"] == 10.0
    # process_start is read from the kernel: this process started before now.
    assert marks["process_start"] <= time.time()
    assert list(marks) == sorted(marks, key=marks.__getitem__)


def test_ray_log_stamps_are_read_from_both_of_rays_log_formats(tmp_path: Path) -> None:
    cpp = tmp_path / "raylet.out"
    cpp.write_text(
        "[2026-11-22 23:57:15,235 I 8056 8056] (raylet) main.cc:283: Setting cluster ID\n"
        "[2026-11-22 23:57:18,144 I 8056 8056] (raylet) node_manager.cc:355: Raylet of id x "
        "started\n"
    )
    py = tmp_path / "ray.log"
    py.write_text("2026-11-22 23:57:18,337\tSUCC scripts.py:1085 -- Ray runtime started.\n")
    start, started = first_stamp(cpp), first_stamp(cpp, "Raylet of id")
    assert start is not None and started is not None
    assert round(started - start, 3) == 2.909
    ray_started = first_stamp(py, "Ray runtime started")
    assert ray_started is not None and round(ray_started - started, 3) == 0.193
    assert first_stamp(py, "not there") is None
    assert first_stamp(tmp_path / "missing.log") is None


def test_dashboard_only_when_asked_and_only_on_the_head() -> None:
    """Ray's dashboard (nine processes, seconds of CPU) is off unless asked for."""
    from syndeo.core.nodeconfig import NodeSettings
    from syndeo.launcher.config import load_config
    from syndeo.launcher.spec import ClusterSpec
    from syndeo.node.raynode import RayProcess

    def head_args(**options: object) -> list[str]:
        spec = ClusterSpec.from_config(load_config(**options), "file:///tmp/r", "dash")
        env = spec.node_env(0, Path("/tmp/x"))
        # Workers: never (the setting reaches every node; only the head's Ray reads it).
        worker = NodeSettings.from_env(spec.node_env(1, Path("/tmp/y")))
        assert not any("dashboard=" in a for a in RayProcess(worker, Path("/t"), "h:1")._args())
        return RayProcess(NodeSettings.from_env(env), Path("/tmp/x/t"), None)._args()

    off = head_args(nodes=2)
    assert "--include-dashboard=false" in off
    on = head_args(nodes=2, dashboard=True)
    assert "--include-dashboard=true" in on
    # Either way it listens on loopback only.
    assert "--dashboard-host=127.0.0.1" in off and "--dashboard-host=127.0.0.1" in on


def test_a_record_read_while_the_head_waits_for_the_stores_answer_is_in_order() -> None:
    """ "published" is marked when the store has answered: a worker may read the record
    between the write and that answer (seen in CI on the emulated AWS), never before the
    write began (just after gcs_reachable)."""
    doc = _doc()
    nodes = doc["nodes"]
    assert isinstance(nodes, dict)
    head = nodes["0"]
    nodes["1"]["head_seen"] = (head["gcs_reachable"] + head["published"]) / 2
    assert problems(doc, nodes=2) == []
