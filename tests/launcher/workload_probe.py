"""A user's Ray program, as a test workload: plain ray.init(), no syndeo imports.

Usage: python workload_probe.py [EXIT_CODE] [SLEEP_S] [READY_FILE]

READY_FILE is created once the pinned tasks have run on every node (before the sleep):
what a test waits for before it takes a node away.
"""

import json
import os
import sys
import time

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

exit_code = int(sys.argv[1]) if len(sys.argv) > 1 else 0
sleep_s = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0
ready = sys.argv[3] if len(sys.argv) > 3 else None

ray.init()
alive = [n for n in ray.nodes() if n["Alive"]]


@ray.remote(num_cpus=1)
def where() -> str:
    return ray.get_runtime_context().get_node_id()


# One task pinned to every node: each node really runs work, not just registers.
pinned = [
    where.options(
        scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=n["NodeID"], soft=False)
    ).remote()
    for n in alive
]
task_nodes = set(ray.get(pinned))
if ready:
    with open(ready + ".tmp", "w") as fh:
        fh.write(f"{len(task_nodes)}\n")
    os.replace(ready + ".tmp", ready)
time.sleep(sleep_s)
out = {
    "nodes": len(alive),
    "node_ips": sorted(n["NodeManagerAddress"] for n in alive),
    "task_nodes": len(task_nodes),
    "address": os.environ["RAY_ADDRESS"],
}
print("PROBE", json.dumps(out), flush=True)
tmp = os.environ["SYNDEO_RESULT_PATH"] + ".tmp"
with open(tmp, "w") as fh:
    json.dump(out, fh)
os.replace(tmp, os.environ["SYNDEO_RESULT_PATH"])
sys.exit(exit_code)
