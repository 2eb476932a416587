"""Where Ray places work on a cluster of node groups: a plain Ray program (no syndeo).

Run as a workload (RAY_ADDRESS set by the head) or as a driver against an `up`
cluster.  Prints one JSON line (and writes it to SYNDEO_RESULT_PATH when set):
each group's nodes, where `num_gpus=1` tasks and `label_selector` tasks ran, and
the GPU ids / CUDA_VISIBLE_DEVICES those tasks saw.

Usage: python groups_probe.py [RANK ...]   (also run one task on each named rank)
"""

import json
import os
import socket
import sys
import time

import ray

# A driver in a network namespace without a default route must name its address.
ip = os.environ.get("PROBE_NODE_IP")
ray.init(**({"_node_ip_address": ip} if ip else {}))
nodes = [n for n in ray.nodes() if n["Alive"]]
labels = {n["NodeID"]: n.get("Labels") or {} for n in nodes}


def here() -> dict:
    ctx = ray.get_runtime_context()
    lab = labels[ctx.get_node_id()]
    return {
        "group": lab.get("syndeo-group"),
        "rank": lab.get("syndeo-rank"),
        "gpu_ids": [str(g) for g in ray.get_gpu_ids()],
        "cuda": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "host": socket.gethostname(),
    }


where = ray.remote(num_cpus=0)(here)


@ray.remote(num_cpus=0)
class Barrier:
    """Lets tasks wait until all of them run: then they hold their GPUs at once."""

    def __init__(self) -> None:
        self.arrived = 0

    def arrive(self) -> int:
        self.arrived += 1
        return self.arrived

    def count(self) -> int:
        return self.arrived


@ray.remote(num_cpus=0)
def where_together(barrier, parties: int) -> dict:
    # Each task keeps its GPU until every one has started: with one GPU per node they
    # must run on different nodes (a fast first task can no longer free its GPU for the
    # second on a loaded machine).
    ray.get(barrier.arrive.remote())
    deadline = time.monotonic() + 120
    while ray.get(barrier.count.remote()) < parties and time.monotonic() < deadline:
        time.sleep(0.05)
    return here()


def per_group(resource: str, group: str) -> float:
    return sum(
        n["Resources"].get(resource, 0)
        for n in nodes
        if (n.get("Labels") or {}).get("syndeo-group") == group
    )


gpus = int(sum(n["Resources"].get("GPU", 0) for n in nodes))
barrier = Barrier.remote()
groups = sorted({lab.get("syndeo-group", "") for lab in labels.values()})
out = {
    "groups": {
        g: sorted(
            int(lab["syndeo-rank"]) for lab in labels.values() if lab.get("syndeo-group") == g
        )
        for g in groups
    },
    "cpu_per_group": {g: per_group("CPU", g) for g in groups},
    "gpu_per_group": {g: per_group("GPU", g) for g in groups},
    # As many one-GPU tasks as the cluster has GPUs, all at once.
    "gpu_tasks": ray.get(
        [where_together.options(num_gpus=1).remote(barrier, gpus) for _ in range(gpus)]
    ),
    "by_label": {
        g: ray.get(where.options(label_selector={"syndeo-group": g}).remote()) for g in groups
    },
    "by_rank": {
        r: ray.get(where.options(label_selector={"syndeo-rank": r}).remote()) for r in sys.argv[1:]
    },
}
line = json.dumps(out, sort_keys=True)
print("GROUPS-PROBE " + line, flush=True)
if os.environ.get("SYNDEO_RESULT_PATH"):
    with open(os.environ["SYNDEO_RESULT_PATH"], "w") as fh:
        fh.write(line)
