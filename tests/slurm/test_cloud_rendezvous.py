"""A Slurm job whose nodes run in the container and meet in an S3 bucket.

The S3 wire-protocol server (moto) listens on the test cluster's bridge, where the
nodes' network namespaces reach it; its endpoint and credentials exist only in the
submitting user's environment.  They reach the containers (``--cleanenv``) through
the one node environment every launcher uses, by reference: never in the script.
"""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

import pytest

from testbeds import slurmcluster
from testbeds.objectstores import list_keys, make_bucket, running
from testbeds.users import UserRun
from tests.slurm.conftest import WORKLOAD
from tests.support.slurm import NODE_IPS, assert_clean, collected_result, job_config

pytestmark = [pytest.mark.slurm, pytest.mark.slow, pytest.mark.apptainer, pytest.mark.objectstore]


def test_container_nodes_meet_in_s3_with_credentials_only_in_the_environment(
    slurm_cluster: slurmcluster.LocalCluster, user_run: UserRun, sif: Path, tmp_path: Path
) -> None:
    local = user_run.root / "workload.py"
    shutil.copy(WORKLOAD, local)  # the work dir is bound into the container
    local.chmod(0o644)
    with running("s3", tmp_path / "logs", host=slurm_cluster.controller_ip) as s3:
        make_bucket(s3, "slurm-rdv")
        body = f'container = "{sif}"\nrendezvous = "s3://slurm-rdv/jobs"\n' + job_config(
            workload="workload.py"
        )
        secret = f"s3cr3t-{uuid.uuid4().hex}"  # moto takes any; recognisable if leaked
        # moto answers STS at the same address: the nodes get a federation token for
        # the cluster's prefix, never the launcher's key (syndeo/launcher/nodecreds/).
        env = {
            **user_run.env,
            **s3.env,
            "AWS_SECRET_ACCESS_KEY": secret,
            "AWS_ENDPOINT_URL_STS": s3.endpoint,
        }
        proc = user_run.start(body, env)
        outcome = user_run.finish(proc)
        assert outcome["exit_code"] == 0, outcome
        said = outcome["_stdout"] + outcome["_stderr"]
        assert "slurm: node credentials: scoped to the cluster's prefix until" in said
        result = collected_result(outcome)
        assert result["ray_nodes"] == 3
        assert set(result["node_ips"]) == NODE_IPS  # type: ignore[arg-type]
        assert list_keys(s3, "slurm-rdv") == []  # the cluster's records are cleaned up
    script = next((user_run.home / "slurm" / "jobs").glob("*/job.sbatch")).read_text()
    # Named on the node's pipe (never in the container's environment), by reference.
    launch = next(line for line in script.splitlines() if "apptainer exec" in line)
    names = launch.split(" syndeo-env ", 1)[1].split(" -- ", 1)[0].split()
    assert "AWS_SECRET_ACCESS_KEY" in names
    assert "APPTAINERENV_AWS_SECRET_ACCESS_KEY" not in script
    assert secret not in script and s3.endpoint not in script  # by reference only
    assert_clean(slurm_cluster)
