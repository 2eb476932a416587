"""Issue 22 item 4: what a local cluster listens on.

A laptop cluster (the local target: every node on its own 127.x address) should not
be reachable from the network it sits on.  Ray leaves no choice for its gRPC servers
(GCS, raylets, core workers, the agents' gRPC: on the wildcard, token-authenticated;
see UNAVOIDABLE_WILDCARD and docs/security.md); everything else must stay on
loopback, and nothing may answer ``GET /metrics`` (Prometheus, no token) on any of
the machine's addresses.  Checked on the sockets of exactly this cluster's processes
(by PID), with a worker process on each node (an actor), since core workers open
gRPC servers of their own.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.helpers import assert_nothing_left, reap, syndeo
from tests.support.listeners import (
    avoidable_wildcards,
    cluster_processes,
    external_ips,
    listeners,
    serves_metrics,
)

# One detached actor per node, so that each node has a core worker listening.
ACTORS = """
import ray
ray.init()
@ray.remote(num_cpus=0)
class Hold:
    def ping(self):
        return ray.get_runtime_context().get_node_id()
hs = [Hold.options(name=f"hold{r}", lifetime="detached",
                   label_selector={"syndeo-rank": str(r)}).remote() for r in range(2)]
print("NODES", len(set(ray.get([h.ping.remote() for h in hs]))))
"""


@pytest.mark.cluster
def test_local_cluster_listens_beyond_loopback_only_where_ray_insists_and_exports_no_metrics(
    syndeo_home: Path, tmp_path: Path
) -> None:
    cid = "lp-local"
    up = syndeo("up", "--nodes", "2", "--cluster-id", cid, cwd=tmp_path, timeout=400)
    try:
        assert up.returncode == 0, up.stderr[-3000:]
        export = next(ln for ln in up.stdout.splitlines() if "export RAY_ADDRESS=" in ln)
        env = dict(kv.split("=", 1) for kv in export.split("export ", 1)[1].split())
        run = subprocess.run(
            [sys.executable, "-c", ACTORS],
            env={"PATH": "/usr/bin:/bin", **env},
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert "NODES 2" in run.stdout, run.stderr[-3000:]

        procs = cluster_processes(cid)
        found = listeners(procs)
        roles = {x.role for x in found}
        # The check sees what it must: the head's GCS, both raylets, their agents, and
        # the actors' core workers.
        assert {
            "gcs_server",
            "raylet",
            "ray::DashboardAgent",
            "ray::RuntimeEnvAgent",
            "core worker",
        } <= roles, sorted(str(x) for x in found)
        extra = avoidable_wildcards(found)
        assert extra == [], "wildcard listeners Ray lets us avoid: " + "; ".join(extra)
        # The rest is on loopback: the agents' HTTP, the runtime-env agents, the Ray
        # client server, the dashboard.
        exposed = [str(x) for x in found if not x.wildcard and not x.loopback]
        assert exposed == [], f"listening beyond loopback: {exposed}"

        # Nothing of it answers GET /metrics on the machine's other addresses (nor on
        # loopback: the exporters are off, not only hidden).
        ips = external_ips()
        served = [
            f"{ip}:{x.port} ({x.name})"
            for x in found
            for ip in [*ips, x.ip]
            if serves_metrics(ip, x.port)
        ]
        assert served == [], f"unauthenticated Prometheus endpoints: {served}"
    finally:
        down = syndeo("down", "--cluster-id", cid, cwd=tmp_path)
        reap(cid)
    assert down.returncode == 0, down.stderr[-2000:]
    assert_nothing_left(cid)
