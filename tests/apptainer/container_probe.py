"""Workload for the containerised-cluster test: reports, from the driver and from
tasks pinned to every node (several each), who and where it runs (uid, inside a
container?, the node's address)."""

import json
import os
import sys
import time

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

ray.init()
alive = [n for n in ray.nodes() if n["Alive"]]


def here() -> dict[str, object]:
    return {
        "uid": os.getuid(),
        "in_container": os.path.isdir("/.singularity.d"),
        "host_env_leak": "SYNDEO_TEST_HOST_ONLY" in os.environ,
        "python": sys.executable,
    }


@ray.remote(num_cpus=1)
def where() -> dict[str, object]:
    time.sleep(0.2)
    return {"node": ray.get_runtime_context().get_node_id(), "ip": ray.util.get_node_ip_address(),
            **here()}  # fmt: skip


# Pinned, not spread: every node must run tasks (a node that cannot fails the run).
pinned = [
    where.options(
        scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=n["NodeID"], soft=False)
    ).remote()
    for n in alive
    for _ in range(2)
]
tasks = ray.get(pinned)
assert [t["node"] for t in tasks] == [n["NodeID"] for n in alive for _ in range(2)]
out = {
    "nodes": len(alive),
    "node_ips": sorted(n["NodeManagerAddress"] for n in alive),
    "task_nodes": len({t["node"] for t in tasks}),
    "task_ips": sorted({str(t["ip"]) for t in tasks}),
    "driver": here(),
    "tasks": [{k: v for k, v in t.items() if k not in ("node", "ip")} for t in tasks],
}
tmp = os.environ["SYNDEO_RESULT_PATH"] + ".tmp"
with open(tmp, "w") as fh:
    json.dump(out, fh)
os.replace(tmp, os.environ["SYNDEO_RESULT_PATH"])
