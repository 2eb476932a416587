"""``invoke bench-bringup``: a cluster's bring-up and teardown against one bare head.

Reference (A): one ``ray start --head --include-dashboard=false`` -- exactly the
command a syndeo head runs, with none of syndeo around it -- timed from its start
to Ray's "Ray runtime started".  Cluster (B): ``deploy`` of N nodes on the target
with a no-op workload; from the nodes' timelines (:mod:`syndeo.core.timeline`):

* ``launch_to_joined_s``: launch (local) or the first node process (Slurm: the
  job has started) to the head seeing every node joined;
* ``done_to_return_s``: the head recording the workload done to ``deploy``
  returning with everything torn down.

Runs are interleaved A B B A A B B A ... so that drift in the host's load hits both
alike, and the ratios are of medians from the same session.  Speed goals live here,
as numbers in JSON, never as thresholds in tests.
"""

from __future__ import annotations

import json
import os
import platform
import secrets
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from syndeo.core.errors import ConfigError, SyndeoError
from syndeo.core.nodeconfig import NodeSettings
from syndeo.core.securedir import write_private
from syndeo.core.timeline import HEAD_PHASES, WORKER_PHASES, problems
from syndeo.launcher.config import load_config
from syndeo.launcher.deploy import deploy, plan
from syndeo.launcher.ui import Ui
from syndeo.node.raynode import RayProcess

GOALS = {
    "launch_to_joined_ratio": 1.2,
    "slurm_launch_to_joined_ratio": 1.3,
    "done_to_return_s": 2.0,
}
REFERENCE_TIMEOUT_S = 120.0


class CpuMeter:
    """The host's busy CPU-seconds over time (all processes, from /proc/stat), sampled
    every 0.1 s in a thread: on a 2-core host a cluster of 3 Ray nodes is bound by CPU
    work, and this says how much work each phase took.  On a loaded host it includes
    the other load; compare runs of one session."""

    def __init__(self) -> None:
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @staticmethod
    def busy_s() -> float:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
        return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append((time.time(), self.busy_s()))
            self._stop.wait(0.1)

    def __enter__(self) -> CpuMeter:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.samples.append((time.time(), self.busy_s()))

    def between(self, t0: float, t1: float) -> float | None:
        """Busy CPU-seconds from ``t0`` to ``t1`` (wall clock), interpolated."""
        if not self.samples or t0 < self.samples[0][0] - 0.2 or t1 > self.samples[-1][0] + 0.2:
            return None
        return round(self._at(t1) - self._at(t0), 2)

    def _at(self, t: float) -> float:
        prev = self.samples[0]
        for cur in self.samples[1:]:
            if cur[0] >= t:
                span = cur[0] - prev[0]
                frac = (t - prev[0]) / span if span > 0 else 1.0
                return prev[1] + frac * (cur[1] - prev[1])
            prev = cur
        return prev[1]


def abba(runs: int) -> list[str]:
    """``runs`` of each kind, interleaved A B B A A B B A ..."""
    order: list[str] = []
    for i in range(runs):
        order += ["reference", "cluster"] if i % 2 == 0 else ["cluster", "reference"]
    return order


def reference_run(cpus: int = 1) -> dict[str, Any]:
    """One bare ``ray start --head`` (our head's own flags), started and stopped."""
    base = Path(tempfile.mkdtemp(prefix="sy-ref-", dir="/tmp"))
    try:
        settings = NodeSettings(
            cluster_id=f"ref-{secrets.token_hex(3)}",
            rank=0,
            nodes=1,
            rendezvous=base.as_uri(),
            scratch=base,
            cpus=cpus,
        )
        token = base / "token"
        write_private(token, secrets.token_urlsafe(32).encode())
        ray = RayProcess(settings, token, head_address=None)
        with CpuMeter() as cpu:
            ray.start()
            try:
                ray.wait_started(REFERENCE_TIMEOUT_S)
                ready = time.time()
            finally:
                ray.stop()
        phases = {k: round(v - ray.started_at, 3) for k, v in ray.phases().items()}
        # Ray's own stamp of "Ray runtime started" (when a plain `ray start` returns),
        # not when our polling of its log noticed it (up to 0.25 s later).
        seconds = phases.get("ray_started", round(ready - ray.started_at, 3))
        return {
            "kind": "reference",
            "seconds": seconds,
            "phases": phases,
            "host_cpu_busy_s": cpu.between(ray.started_at, ready),
        }
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _relative(marks: dict[str, float], t0: float) -> dict[str, float]:
    return {k: round(v - t0, 3) for k, v in sorted(marks.items(), key=lambda kv: kv[1])}


class _Quiet(Ui):
    """The runs' own output (node logs relayed by the launcher) goes to stderr:
    stdout is the benchmark's summary."""

    def echo(self, line: str) -> None:
        print(line, file=sys.stderr, flush=True)


def cluster_run(config: Path | None, options: dict[str, Any], results: Path) -> dict[str, Any]:
    """One ``deploy`` with a no-op workload; its timeline, relative to its start."""
    cfg = load_config(config, **options, run="true", results_dir=results)
    with CpuMeter() as cpu:
        outcome = deploy(cfg, _Quiet(quiet=True))
        returned = time.time()
    if outcome.exit_code != 0:
        raise SyndeoError(f"bring-up run {outcome.cluster_id} failed: {outcome.message}")
    data = json.loads((results / outcome.cluster_id / "timeline.json").read_text())
    nodes = {int(r): m for r, m in data["nodes"].items()}
    launcher = data["launcher"]
    head = nodes.get(0, {})
    missing = [r for r in range(cfg.nodes) if r not in nodes]
    if missing or "all_joined" not in head:
        raise SyndeoError(f"bring-up run {outcome.cluster_id}: no timeline from ranks {missing}")
    # Locally the launch is the start; on Slurm the job's start is its first node.
    start = launcher["launch_start"]
    if cfg.target != "local":
        start = min(m.get("process_start", start) for m in nodes.values())
    done = launcher.get("head_done", returned)
    rel_nodes = {r: _relative(m, start) for r, m in sorted(nodes.items())}
    rel_launcher = _relative(launcher, start)
    return {
        "kind": "cluster",
        "cluster_id": outcome.cluster_id,
        "launch_to_joined_s": round(head["all_joined"] - start, 3),
        "host_cpu_busy_s": cpu.between(start, head["all_joined"]),
        "done_to_return_s": round(returned - done, 3),
        "launcher": rel_launcher,
        "nodes": rel_nodes,
        "timeline_problems": problems({"launcher": rel_launcher, "nodes": rel_nodes}, cfg.nodes),
    }


def summarize(runs: list[dict[str, Any]], target: str) -> dict[str, Any]:
    ref = [r["seconds"] for r in runs if r["kind"] == "reference"]
    joined = [r["launch_to_joined_s"] for r in runs if r["kind"] == "cluster"]
    teardown = [r["done_to_return_s"] for r in runs if r["kind"] == "cluster"]
    med = statistics.median
    goal = GOALS["launch_to_joined_ratio" if target == "local" else "slurm_launch_to_joined_ratio"]
    ratio = med(joined) / med(ref)

    def cpu(kind: str) -> float | None:
        got = [r["host_cpu_busy_s"] for r in runs if r["kind"] == kind and r.get("host_cpu_busy_s")]
        return round(med(got), 2) if got else None

    return {
        "reference_median_s": round(med(ref), 3),
        "launch_to_joined_median_s": round(med(joined), 3),
        "ratio": round(ratio, 3),
        "ratio_goal": goal,
        "ratio_met": ratio <= goal,
        "done_to_return_median_s": round(med(teardown), 3),
        "done_to_return_goal_s": GOALS["done_to_return_s"],
        "done_to_return_met": med(teardown) <= GOALS["done_to_return_s"],
        "host_cpu_busy_median_s": {"reference": cpu("reference"), "cluster": cpu("cluster")},
    }


def run(
    target: str = "local",
    nodes: int = 3,
    runs: int = 5,
    container: Path | None = None,
    config: Path | None = None,
    out: Path | None = None,
    ui: Ui | None = None,
    **options: Any,
) -> dict[str, Any]:
    """The whole comparison; writes and returns the JSON document."""
    if runs < 1:
        raise ConfigError("--runs must be >= 1")
    if target not in ("local", "slurm"):
        raise ConfigError(f"bench-bringup runs on --target local or slurm, not {target}")
    ui = ui or Ui()
    options = {**options, "target": target, "nodes": nodes, "container": container}
    # Bad input fails here, before anything starts: what a dry run of the cluster checks.
    plan(load_config(config, **options, run="true"))
    out = out or Path("results") / f"bringup-{time.strftime('%Y%m%dT%H%M%S')}.json"
    scratch = Path(
        tempfile.mkdtemp(prefix="bringup-", dir=out.parent if out.parent.exists() else None)
    )
    results: list[dict[str, Any]] = []
    try:
        for i, kind in enumerate(abba(runs), 1):
            if kind == "reference":
                results.append(reference_run())
                ui.info(f"[{i}/{2 * runs}] bare ray start --head: {results[-1]['seconds']:.2f} s")
            else:
                results.append(cluster_run(config, options, scratch))
                joined, down = results[-1]["launch_to_joined_s"], results[-1]["done_to_return_s"]
                ui.info(
                    f"[{i}/{2 * runs}] {target} {nodes} nodes: all joined {joined:.2f} s, "
                    f"done -> returned {down:.2f} s"
                )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    doc = {
        "benchmark": "bringup",
        "target": target,
        "nodes": nodes,
        "container": str(container) if container else None,
        "runs_per_kind": runs,
        "host": {
            "cpus": os.cpu_count(),
            "load_avg_at_end": os.getloadavg(),
            "node": platform.node(),
        },
        "phases_expected": {"head": list(HEAD_PHASES), "worker": list(WORKER_PHASES)},
        "summary": summarize(results, target),
        "runs": results,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=2))
    return doc
