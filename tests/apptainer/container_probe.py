"""Workload for the containerised-cluster test: reports, from the driver and from
tasks spread over every node, who and where it runs (uid, inside a container?)."""

import json
import os
import sys
import time

import ray

ray.init()
alive = [n for n in ray.nodes() if n["Alive"]]


def here() -> dict[str, object]:
    return {
        "uid": os.getuid(),
        "in_container": os.path.isdir("/.singularity.d"),
        "host_env_leak": "SYNDEO_TEST_HOST_ONLY" in os.environ,
        "python": sys.executable,
    }


@ray.remote(num_cpus=1, scheduling_strategy="SPREAD")
def where() -> dict[str, object]:
    time.sleep(0.2)
    return {"node": ray.get_runtime_context().get_node_id(), **here()}


tasks = ray.get([where.remote() for _ in range(4 * len(alive))])
out = {
    "nodes": len(alive),
    "node_ips": sorted(n["NodeManagerAddress"] for n in alive),
    "task_nodes": len({t["node"] for t in tasks}),
    "driver": here(),
    "tasks": [{k: v for k, v in t.items() if k != "node"} for t in tasks],
}
tmp = os.environ["SYNDEO_RESULT_PATH"] + ".tmp"
with open(tmp, "w") as fh:
    json.dump(out, fh)
os.replace(tmp, os.environ["SYNDEO_RESULT_PATH"])
