"""A user's Ray program, as a test workload: plain ray.init(), no syndeo imports.

Usage: python workload_probe.py [EXIT_CODE] [SLEEP_S] [READY_FILE] [GO_FILE]

READY_FILE is created once the pinned tasks have run on every node (before the sleep):
what a test waits for before it takes a node away.  With GO_FILE the sleep ends as soon
as that file exists (SLEEP_S is then only a bound): a test that ends the workload on
an event rather than after a guessed time.
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
go = sys.argv[4] if len(sys.argv) > 4 else None

ray.init()
alive = [n for n in ray.nodes() if n["Alive"]]


# Credentials of a rendezvous store and the launch key (it signs head records and opens
# the TLS bundle), which the node keeps to itself: any task could read them.
SECRETS = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AZURE_STORAGE_CONNECTION_STRING",
    "AZURE_STORAGE_KEY",
    "AZURE_STORAGE_SAS_TOKEN",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "SYNDEO_LAUNCH_KEY",
)


def secrets_here() -> list[str]:
    return sorted(k for k in SECRETS if k in os.environ)


@ray.remote(num_cpus=1)
def where() -> tuple[str, list[str]]:
    return ray.get_runtime_context().get_node_id(), secrets_here()


# One task pinned to every node: each node really runs work, not just registers.
pinned = [
    where.options(
        scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=n["NodeID"], soft=False)
    ).remote()
    for n in alive
]
answers = ray.get(pinned)
task_nodes = {node for node, _ in answers}
seen = sorted({name for _, names in answers for name in names} | set(secrets_here()))
if ready:
    with open(ready + ".tmp", "w") as fh:
        fh.write(f"{len(task_nodes)}\n")
    os.replace(ready + ".tmp", ready)
if go is None:
    time.sleep(sleep_s)
else:
    until = time.monotonic() + sleep_s
    while time.monotonic() < until and not os.path.exists(go):
        time.sleep(0.2)
out = {
    "nodes": len(alive),
    "node_ips": sorted(n["NodeManagerAddress"] for n in alive),
    "task_nodes": len(task_nodes),
    "address": os.environ["RAY_ADDRESS"],
    "secrets_seen": seen,  # in the driver's or a task's environment
}
print("PROBE", json.dumps(out), flush=True)
tmp = os.environ["SYNDEO_RESULT_PATH"] + ".tmp"
with open(tmp, "w") as fh:
    json.dump(out, fh)
os.replace(tmp, os.environ["SYNDEO_RESULT_PATH"])
sys.exit(exit_code)
