"""Workload for the containerised-cluster test: reports, from the driver and from
tasks pinned to every node (several each), who and where it runs (uid, inside a
container?, the node's address)."""

import json
import os
import sys
import time

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

# What a task can reach (tests/support/task_reach.py, copied beside this file), defined
# in this script's own namespace so that Ray ships the functions to the workers by value.
with open("task_reach.py") as fh:
    exec(compile(fh.read(), "task_reach.py", "exec"))
# The test names what no task may reach (reach.json beside this file).
with open("reach.json") as fh:
    REACH = json.load(fh)

ray.init()
alive = [n for n in ray.nodes() if n["Alive"]]


def node_environ() -> str:
    """What this process can read of its node's /proc/<pid>/environ, where the node's
    launch key is: "denied", "readable" (with "+key" if the key is there) or "no node"."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                argv = fh.read().rstrip(b"\0").split(b"\0")
        except OSError:
            continue
        # `syndeo node` (the image's console script) or `python -m syndeo node`.
        if argv[-1:] != [b"node"] or not any(a.endswith(b"syndeo") for a in argv[:-1]):
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as fh:
                data = fh.read()
        except PermissionError:
            return "denied"
        return "readable" + ("+key" if b"SYNDEO_LAUNCH_KEY=" in data else "")
    return "no node"


def here() -> dict[str, object]:
    return {
        "uid": os.getuid(),
        "in_container": os.path.isdir("/.singularity.d"),
        "host_env_leak": "SYNDEO_TEST_HOST_ONLY" in os.environ,
        "launch_key_leak": "SYNDEO_LAUNCH_KEY" in os.environ,
        "node_environ": node_environ(),
        "secrets_seen": secrets_seen(REACH["names"], REACH["values"]),  # noqa: F821
        "access": access(REACH["paths"]),  # noqa: F821
        "python": sys.executable,
    }


@ray.remote(num_cpus=1)
def where() -> dict[str, object]:
    time.sleep(0.2)
    return {
        "node": ray.get_runtime_context().get_node_id(),
        "ip": ray.util.get_node_ip_address(),
        **here(),
    }


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
