"""Ray's TLS as an option, on real local clusters.

``up --tls``: a client with the variables ``up`` prints connects and runs tasks on both
nodes; the same client without them cannot (Ray's own bounded connect).  ``deploy
--tls``: the workload and every task run with Ray's TLS on and deploy.json says so.
Either way no certificate or key is left after teardown (the launcher's cluster dir,
every node's scratch dir), and neither the launch key nor the CA's key is in
deploy.json, a log or a dry run.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from syndeo.core import tls
from syndeo.launcher import spec as spec_module
from syndeo.launcher.config import load_config
from syndeo.launcher.deploy import deploy
from syndeo.launcher.spec import ClusterSpec
from syndeo.launcher.targets.base import short_scratch
from tests.support.helpers import assert_nothing_left, reap, syndeo

KEY = "d4" * 32
TLS_VARS = ("RAY_USE_TLS", "RAY_TLS_SERVER_CERT", "RAY_TLS_SERVER_KEY", "RAY_TLS_CA_CERT")
CLIENT_FILES = ("ca.pem", "client.pem", "client.key")
HEX64 = re.compile(r"(?<![0-9a-f])[0-9a-f]{64}(?![0-9a-f])")

# A client of the cluster: plain ray.init(), a task pinned to each node.
CLIENT = """
import os, ray
ray.init()
@ray.remote(num_cpus=0)
def where():
    return ray.get_runtime_context().get_node_id(), os.environ.get("RAY_USE_TLS")
print("RAN", ray.get([where.options(label_selector={"syndeo-rank": str(r)}).remote()
                      for r in range(2)]))
"""


def _scratch_tls(cluster_id: str, rendezvous: Path, nodes: int) -> list[Path]:
    """Every TLS file in the cluster's node scratch dirs (the local target's layout)."""
    uri = rendezvous.resolve().as_uri()
    spec = ClusterSpec.from_config(load_config(target="local"), uri, cluster_id)
    return sorted(p for r in range(nodes) for p in short_scratch(spec, r).glob("tls-*"))


def _client(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    # Ray's own bound on reaching the GCS (default: a minute of retries): a client the
    # cluster refuses gives up after it, with Ray's error.
    bounded = {"RAY_gcs_rpc_server_reconnect_timeout_s": "5"}
    return subprocess.run(
        [sys.executable, "-c", CLIENT],
        env={"PATH": "/usr/bin:/bin", **bounded, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.cluster
def test_up_tls_takes_a_client_with_the_printed_variables_and_refuses_one_without(
    syndeo_home: Path, tmp_path: Path
) -> None:
    cid = "tls-up"
    up = syndeo("up", "--tls", "--nodes", "2", "--cluster-id", cid, cwd=tmp_path, timeout=400)
    try:
        assert up.returncode == 0, up.stderr[-3000:]
        export = next(ln for ln in up.stdout.splitlines() if "export RAY_ADDRESS=" in ln)
        env = dict(kv.split("=", 1) for kv in export.split("export ", 1)[1].split())
        assert set(TLS_VARS) <= set(env) and env["RAY_USE_TLS"] == "1"
        files = [Path(env[k]) for k in TLS_VARS[1:]]
        assert sorted(p.name for p in files) == sorted(CLIENT_FILES)
        assert {p.parent for p in files} == {syndeo_home / "clusters" / cid}
        assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in files)
        # Each node has its own key and certificate while it runs.
        assert len(_scratch_tls(cid, syndeo_home / "rendezvous", 2)) == 6

        ok = _client(env)
        assert ok.returncode == 0, ok.stderr[-3000:]
        ran = next(ln for ln in ok.stdout.splitlines() if ln.startswith("RAN"))
        assert ran.count("'1')") == 2, ran  # a task on each node, each with TLS on

        plain = {k: v for k, v in env.items() if k not in TLS_VARS}
        refused = _client(plain)
        assert refused.returncode != 0 and "RAN" not in refused.stdout, refused.stdout
        assert "Failed to connect to GCS" in refused.stderr, refused.stderr[-3000:]
    finally:
        down = syndeo("down", "--cluster-id", cid, cwd=tmp_path, timeout=300)
        reap(cid)
    assert down.returncode == 0, down.stderr
    assert_nothing_left(cid)
    # Nothing of the TLS material outlives the cluster.
    assert not [n for n in CLIENT_FILES if (syndeo_home / "clusters" / cid / n).exists()]
    assert _scratch_tls(cid, syndeo_home / "rendezvous", 2) == []


# ---------------------------------------------------------------------- deploy --tls
# The workload: what it sees of TLS (its own variables, the tasks' on both nodes, the
# files), the launcher's client files, and what the store holds of the CA.
WORKLOAD = """
import json, os, sys, ray
TLS_VARS = ("RAY_USE_TLS", "RAY_TLS_SERVER_CERT", "RAY_TLS_SERVER_KEY", "RAY_TLS_CA_CERT")
CLIENT_FILES = ("ca.pem", "client.pem", "client.key")
cluster_dir, bundle = sys.argv[1], sys.argv[2]
env = {k: os.environ.get(k) for k in TLS_VARS}
ray.init()
@ray.remote(num_cpus=0)
def where():
    return (ray.get_runtime_context().get_node_id(), os.environ.get("RAY_USE_TLS"),
            os.environ.get("RAY_TLS_SERVER_CERT"))
tasks = ray.get([where.options(label_selector={"syndeo-rank": str(r)}).remote() for r in range(2)])
files = [p for _, _, p in tasks if p] + [v for k, v in env.items() if v and k != "RAY_USE_TLS"]
with open(bundle, "rb") as fh:
    sealed = fh.read()
out = {
    "env": env, "tasks": tasks,
    "files": {p: oct(os.stat(p).st_mode & 0o777) for p in files},
    "client": sorted(n for n in os.listdir(cluster_dir) if n in CLIENT_FILES),
    "bundle_plain": b"PRIVATE KEY" in sealed or b"BEGIN" in sealed,
}
with open(os.environ["SYNDEO_RESULT_PATH"], "w") as fh:
    json.dump(out, fh)
"""


@pytest.fixture(scope="module")
def deployed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """One ``deploy --tls`` (2 nodes) for the tests below; the launch key and the CA it
    used are recorded to look for them afterwards."""
    tmp = tmp_path_factory.mktemp("tls-deploy")
    # SYNDEO_HOME beside the work dir, never inside it (the launcher refuses that).
    home = tmp_path_factory.mktemp("tls-home") / "home"
    results, rdv = tmp / "res", tmp / "rdv"
    cid = "tls-deploy"
    made: list[tls.Authority] = []
    real = tls.new_authority

    def recording(cluster_id: str) -> tls.Authority:
        made.append(real(cluster_id))
        return made[-1]

    (tmp / "workload.py").write_text(WORKLOAD)
    bundle = rdv / cid / "tls" / "bundle"  # the file backend's key layout
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SYNDEO_HOME", str(home))
        mp.setattr(spec_module, "new_key", lambda: KEY)
        mp.setattr(tls, "new_authority", recording)
        cfg = load_config(
            target="local",
            nodes=2,
            cluster_id=cid,
            results_dir=results,
            tls=True,
            rendezvous=rdv.as_uri(),
            join_timeout_s=240,
            workdir=tmp,
            run=f"{sys.executable} workload.py {home / 'clusters' / cid} {bundle}",
        )
        try:
            outcome = deploy(cfg)
        finally:
            reap(cid)
        yield {
            "cid": cid,
            "home": home,
            "results": results,
            "rdv": rdv,
            "outcome": outcome,
            "authority": made,
            "tmp": tmp,
            "scratch": _scratch_tls(cid, rdv, 2),
        }


@pytest.mark.cluster
def test_deploy_tls_runs_the_workload_over_tls_and_deploy_json_says_so(
    deployed: dict[str, Any],
) -> None:
    outcome, cid = deployed["outcome"], deployed["cid"]
    assert outcome.exit_code == 0, outcome.message
    summary = json.loads((deployed["results"] / cid / "deploy.json").read_text())
    assert summary["tls"] is True and summary["exit_code"] == 0
    result = json.loads((deployed["results"] / cid / "result.json").read_text())
    assert result["env"]["RAY_USE_TLS"] == "1"
    assert all(result["env"][k] for k in TLS_VARS)
    nodes = {node for node, _, _ in result["tasks"]}
    assert len(nodes) == 2 and [on for _, on, _ in result["tasks"]] == ["1", "1"]
    # Each node its own files, owner-only; the launcher's client files during the run.
    assert len({str(Path(p).parent) for p in result["files"]}) == 2
    assert set(result["files"].values()) == {"0o600"}
    assert result["client"] == sorted(CLIENT_FILES)
    assert result["bundle_plain"] is False  # the store holds the CA sealed
    assert len(deployed["authority"]) == 1  # one CA for the launch
    assert_nothing_left(cid)


@pytest.mark.cluster
def test_deploy_tls_leaves_no_certificate_or_key_after_teardown(deployed: dict[str, Any]) -> None:
    result = json.loads((deployed["results"] / deployed["cid"] / "result.json").read_text())
    assert result["files"], "the nodes made no TLS files"
    assert [p for p in result["files"] if Path(p).exists()] == []
    assert deployed["scratch"] == []
    cluster = deployed["home"] / "clusters" / deployed["cid"]
    assert [n for n in CLIENT_FILES if (cluster / n).exists()] == []
    # The sealed CA went with the cluster's records.
    assert not (deployed["rdv"] / deployed["cid"]).exists()


@pytest.mark.cluster
def test_deploy_tls_leaves_neither_key_in_deploy_json_logs_or_results(
    deployed: dict[str, Any],
) -> None:
    [authority] = deployed["authority"]
    body = b"".join(ln for ln in authority.key_pem.splitlines() if b"-----" not in ln)
    # What the run wrote (the workload's own source aside: it names what it looks for).
    written = [
        p
        for top in (deployed["tmp"], deployed["home"])
        for p in top.rglob("*")
        if p.is_file() and p.name != "workload.py"
    ]
    names = {p.name for p in written}
    assert {"deploy.json", "timeline.json", "workload.log", "node-0.log"} <= names
    for path in written:
        data = path.read_bytes()
        assert KEY.encode() not in data, path
        assert body not in data and body[:40] not in data, path
        assert b"PRIVATE KEY" not in data, path


@pytest.mark.parametrize(
    "args",
    [
        ["--target", "local", "--nodes", "2"],
        ["--target", "slurm", "--nodes", "2"],
        [
            "--target",
            "aws",
            "--nodes",
            "2",
            "--instance-type",
            "c7i.2xlarge",
            "--region",
            "us-east-1",
            "--image",
            "ami-0abc",
        ],
    ],
    ids=["local", "slurm", "aws"],
)
def test_a_tls_dry_run_shows_the_switch_and_no_key(args: list[str], tmp_path: Path) -> None:
    drop = ("AWS_", "GOOGLE_", "AZURE_", "ARM_", "CLOUDSDK_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env.update(
        HOME=str(tmp_path), SYNDEO_HOME=str(tmp_path / ".syndeo"), AWS_EC2_METADATA_DISABLED="true"
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "syndeo",
            "deploy",
            "--dry-run",
            "--tls",
            "--cluster-id",
            "tls-dry",
            *args,
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout + proc.stderr
    assert "SYNDEO_TLS" in out  # the nodes are told to use TLS
    assert HEX64.findall(out) == [] and "PRIVATE KEY" not in out and "BEGIN" not in out
    # A dry run makes no CA and writes nothing.
    assert not (tmp_path / ".syndeo" / "clusters" / "tls-dry").exists()


def test_every_target_passes_the_switch_with_its_extra_variables(tmp_path: Path) -> None:
    """Local and Slurm in the node's environment, Terraform targets in ``extra_env``; never
    a node setting (the node module keeps those equal to NodeSettings' fields)."""
    from syndeo.core.nodeconfig import NodeSettings
    from syndeo.launcher.targets import get_target
    from syndeo.launcher.targets.slurm.target import SlurmTarget
    from syndeo.launcher.targets.terraform import TerraformTarget

    assert "tls" not in NodeSettings.model_fields
    local = ClusterSpec.from_config(load_config(tls=True), "file:///tmp/r", "tls-env")
    assert local.node_env(1, Path("/tmp/s"))["SYNDEO_TLS"] == "1"
    cfg = load_config(
        target="slurm", tls=True, slurm={"job_dir": str(tmp_path / "jobs"), "python": "python3"}
    )
    spec = ClusterSpec.from_config(cfg, (tmp_path / "rdv").as_uri(), "tls-slurm")
    assert SlurmTarget(cfg)._job(spec).node_env["SYNDEO_TLS"] == "1"
    aws = {"instance_type": "c7i.2xlarge", "region": "us-east-1", "image": "ami-0abc"}
    cfg = load_config(target="aws", tls=True, aws=aws)
    spec = ClusterSpec.from_config(cfg, "s3://syndeo-0123456789ab/syndeo", "tls-tf")
    target = get_target(cfg)
    assert isinstance(target, TerraformTarget)
    tfvars = target.tfvars(spec)
    assert tfvars["node"]["extra_env"]["SYNDEO_TLS"] == "1" and "tls" not in tfvars["node"]
    # The node module's extra_env validation lets it through (it refuses node settings).
    module = (
        Path(__file__).resolve().parents[2] / "terraform/modules/node/variables.tf"
    ).read_text()
    block = module.split("setintersection(keys(var.node.extra_env), concat([", 1)[1]
    refused = block.split("error_message", 1)[0]
    assert '"SYNDEO_RANK"' in refused and '"SYNDEO_TLS"' not in refused
    plain = ClusterSpec.from_config(load_config(target="aws", aws=aws), spec.rendezvous, "tls-no")
    assert "SYNDEO_TLS" not in target.tfvars(plain)["node"]["extra_env"]
