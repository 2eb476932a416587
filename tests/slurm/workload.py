"""Test workload for Slurm jobs: where did Ray put things, and did every task finish?

Runs ``--tasks`` one-CPU tasks of ``--seconds`` each, spread over the nodes, with
retries (a lost node's unfinished tasks are redone elsewhere), then writes the
node IPs Ray saw and the hosts the tasks ran on to ``$SYNDEO_RESULT_PATH``.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import time
from pathlib import Path

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy


@ray.remote(num_cpus=1, max_retries=5)
def work(i: int, seconds: float) -> tuple[int, str]:
    time.sleep(seconds)
    return i, socket.gethostname()


def _reach(nodes: list[dict[str, object]]) -> list[object]:
    """With reach.json beside this file (the test's list of secrets and paths no task may
    reach): what a task on each node could reach (tests/support/task_reach.py, copied
    beside it too, defined here so that Ray ships it to the workers by value)."""
    if not os.path.exists("reach.json"):
        return []
    scope: dict[str, object] = {}
    with open("task_reach.py") as fh:
        exec(compile(fh.read(), "task_reach.py", "exec"), scope)
    with open("reach.json") as fh:
        spec = json.load(fh)
    seen, access = scope["secrets_seen"], scope["access"]

    @ray.remote(num_cpus=1)
    def probe() -> dict[str, object]:
        return {"secrets": seen(spec["names"], spec["values"]), "access": access(spec["paths"])}  # type: ignore[operator]

    pinned = [
        probe.options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)
        ).remote()
        for n in nodes
    ]
    return list(ray.get(pinned))


def _write(path: str, data: dict[str, object]) -> None:
    tmp = Path(path + ".tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=6)
    ap.add_argument("--seconds", type=float, default=0.2)
    args = ap.parse_args()
    ray.init()
    nodes = [n for n in ray.nodes() if n["Alive"]]
    # One probe pinned to each node: proves every node runs work, and names its host.
    probes = [
        work.options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)
        ).remote(-1, 0.0)
        for n in nodes
    ]
    probe_hosts = sorted(host for _i, host in ray.get(probes))
    refs = [
        work.options(scheduling_strategy="SPREAD").remote(i, args.seconds)
        for i in range(args.tasks)
    ]
    done: dict[int, str] = {}
    pending = list(refs)
    while pending:
        ready, pending = ray.wait(pending, num_returns=1)
        for i, host in ray.get(ready):
            done[i] = host
        if os.environ.get("SYNDEO_PROGRESS_FILE"):
            _write(os.environ["SYNDEO_PROGRESS_FILE"], {"tasks_done": len(done)})
    _write(
        os.environ["SYNDEO_RESULT_PATH"],
        {
            "ray_nodes": len(nodes),
            "node_ips": sorted(n["NodeManagerAddress"] for n in nodes),
            "tasks_done": len(done),
            "task_hosts": sorted(set(done.values())),
            "probe_hosts": probe_hosts,
            "reach": _reach(nodes),
        },
    )


if __name__ == "__main__":
    main()
