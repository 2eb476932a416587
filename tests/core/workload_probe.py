"""A user's Ray program, as a test workload: plain ray.init(), no syndeo imports.

Usage: python workload_probe.py [EXIT_CODE] [SLEEP_S]
"""

import json
import os
import sys
import time

import ray

exit_code = int(sys.argv[1]) if len(sys.argv) > 1 else 0
sleep_s = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0

ray.init()
alive = [n for n in ray.nodes() if n["Alive"]]


@ray.remote(num_cpus=1, scheduling_strategy="SPREAD")
def where() -> str:
    time.sleep(0.1)
    return ray.get_runtime_context().get_node_id()


task_nodes = set(ray.get([where.remote() for _ in range(3 * len(alive))]))
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
