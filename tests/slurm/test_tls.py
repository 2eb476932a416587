"""Ray's TLS on the real Slurm bed, where it is on by default: nodes in network
namespaces of their own talk over the bed's bridge, a network other users share.

The default deploy runs with TLS on every node (each makes its certificate before Ray
starts; the workload and a task on the other node see ``RAY_USE_TLS=1``); ``--no-tls``
runs without and the launcher says so in one line.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

from testbeds import slurmcluster
from testbeds.users import UserRun, give_to_ci_user
from tests.support.slurm import NODE_IPS, assert_clean, user_syndeo

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

NOTICE = (
    "syndeo: Ray's TLS is off: the cluster's token crosses the network between nodes in "
    "clear (--no-tls, or tls = false in the config)"
)
# The driver on the head and a task on the other node: their TLS switch and address.
WORKLOAD = """
import json, os, ray
ray.init()

@ray.remote(num_cpus=0)
def far():
    return os.environ.get("RAY_USE_TLS"), ray.util.get_node_ip_address()

other = far.options(label_selector={"syndeo-rank": "1"})
out = {"head": os.environ.get("RAY_USE_TLS"), "far": ray.get(other.remote())}
out["head_ip"] = ray.util.get_node_ip_address()
with open(os.environ["SYNDEO_RESULT_PATH"], "w") as fh:
    json.dump(out, fh)
"""
CONFIG = (
    'target = "slurm"\nnodes = 2\ncpus_per_node = 1\njoin_timeout_s = 180\n'
    'run = "python tls_probe.py"\n[slurm]\npartition = "debug"\ntime = "00:10:00"\n'
)


def _probe(user_run: UserRun) -> None:
    path = user_run.root / "tls_probe.py"
    path.write_text(WORKLOAD)
    give_to_ci_user(path)


def _results(user_run: UserRun, cid: str) -> list[dict[str, Any]]:
    """deploy.json, the probe's result.json and timeline.json of the run ``cid``."""
    where = user_run.results / cid
    return [json.loads((where / f"{f}.json").read_text()) for f in ("deploy", "result", "timeline")]


def test_a_default_slurm_deploy_runs_with_tls_on_every_node(
    slurm_cluster: slurmcluster.LocalCluster, user_run: UserRun
) -> None:
    _probe(user_run)
    outcome = user_run.deploy(CONFIG)
    assert outcome["exit_code"] == 0, outcome["_stderr"][-3000:]
    assert "Ray's TLS is off" not in outcome["_stderr"]
    summary, result, timeline = _results(user_run, outcome["cluster_id"])
    assert summary["tls"] is True
    # Two nodes on two bed nodes (their own IPs), both with Ray's TLS on.
    assert result["head"] == "1" and result["far"][0] == "1"
    assert {result["head_ip"], result["far"][1]} <= NODE_IPS
    assert result["head_ip"] != result["far"][1]
    nodes = timeline["nodes"].values()
    assert len(nodes) == 2 and all("tls_ready" in marks for marks in nodes), timeline
    assert_clean(slurm_cluster)


def test_no_tls_on_slurm_is_said_in_one_line(
    slurm_cluster: slurmcluster.LocalCluster, user_run: UserRun
) -> None:
    _probe(user_run)
    cfg = user_run.config(CONFIG)
    cid = "slurm-notls0001"
    proc: subprocess.CompletedProcess[str] = user_syndeo(
        user_run, "deploy", "--config", str(cfg), "--cluster-id", cid, "--no-tls"
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stderr.splitlines().count(NOTICE) == 1, proc.stderr
    summary, result, timeline = _results(user_run, cid)
    assert summary["tls"] is False
    assert result["head"] is None and result["far"][0] is None
    assert not any("tls_ready" in marks for marks in timeline["nodes"].values())
    assert_clean(slurm_cluster)
