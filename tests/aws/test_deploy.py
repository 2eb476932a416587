"""``invoke deploy --target aws`` whole, on the emulated AWS: real Terraform with the
real AWS provider, instances that boot the node image and run their user-data, nodes
that sign in with their instance identity, the benchmark in the container, results
collected before the destroy, and nothing left in the cloud afterwards."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from syndeo.bench.models import BenchResult
from syndeo.core import timeline
from testbeds.users import give_to_ci_user
from tests.aws.conftest import AwsUser, failed
from tests.aws.leaks import assert_nothing_left, client

pytestmark = [pytest.mark.aws, pytest.mark.slow]

SAMPLES = 100  # per CPU: a few seconds of benchmark on this machine


def _one_run(results: Path) -> Path:
    [run] = [p for p in results.iterdir() if p.is_dir()]
    return run


def test_deploy_runs_whole(aws_user: AwsUser) -> None:
    """The README's quick start, where the zone the module picks first (us-east-1a, the
    first by name offering c7i.xlarge) has no capacity, as EC2 says at times: the
    launcher destroys that attempt and starts the cluster in the next zone.  The AWS
    provider retries InsufficientInstanceCapacity itself (25 times by default, for
    minutes): the config lets it retry once.  With Ray's TLS: the bucket is created by the
    apply, so the sealed CA reaches it only after the apply, while the nodes wait for it."""
    no_capacity = aws_user.state.base / "no-capacity"
    no_capacity.write_text("us-east-1a\n")
    cfg = aws_user.root / "retries.toml"
    cfg.write_text("tls = true\n[aws]\napi_max_retries = 1\n")
    give_to_ci_user(cfg)
    t0 = time.monotonic()
    try:
        res = aws_user.invoke(
            "deploy", *aws_user.machine(
                "--nodes", "3", "--cpus-per-node", "1", "--join-timeout", "240",
                "--samples-per-cpu", str(SAMPLES), "--repeats", "1",
                "--results-dir", str(aws_user.results), "--config", str(cfg),
            ),
        )  # fmt: skip
    finally:
        no_capacity.unlink()
    wall = time.monotonic() - t0
    assert res.returncode == 0, failed(res)
    said = res.stdout + res.stderr
    assert "aws: us-east-1a: InsufficientInstanceCapacity; trying us-east-1b" in said, said
    assert "CartPole-v1" in res.stdout  # the results table
    run = _one_run(aws_user.results)
    result = BenchResult.model_validate_json((run / "result.json").read_text())
    assert not result.partial
    assert (result.manifest.target, result.manifest.cluster_nodes) == ("aws", 3)
    assert result.manifest.cluster_cpus == 3
    [env] = result.results
    assert env.env_id == "CartPole-v1" and env.samples_counted >= SAMPLES * 3
    assert len(env.syndeo.repeats) == 1 and env.syndeo.mean > 0
    # The image the nodes ran is the one the AMI carries (its tag, passed by the target).
    sif_manifest = json.loads(Path(f"{aws_user.state.sif}.manifest.json").read_text())
    assert result.manifest.image_digest == sif_manifest["sha256"]

    summary: dict[str, Any] = json.loads((run / "deploy.json").read_text())
    assert summary["exit_code"] == 0 and summary["target"] == "aws"
    assert summary["tls"] is True
    machines = summary["machines"]
    assert (machines["provider"], machines["count"], machines["instance_type"]) == (
        "aws", 3, "c7i.xlarge",
    )  # fmt: skip
    assert machines["instance_seconds"] > 0
    assert summary["image"] == {"id": aws_user.state.image_id, "digest": sif_manifest["sha256"]}
    assert summary["result"] == str(run / "result.json")

    doc = json.loads((run / "timeline.json").read_text())
    assert timeline.problems(doc, 3) == []

    assert_nothing_left(aws_user.state)
    # Every instance of the cluster ran in the zone that had capacity.
    ec2 = client(aws_user.state, "ec2")
    found = ec2.describe_instances(Filters=[{"Name": "tag:syndeo-cluster", "Values": [run.name]}])
    zones = [i["Placement"]["AvailabilityZone"] for r in found["Reservations"]
             for i in r["Instances"]]  # fmt: skip
    assert zones == ["us-east-1b"] * 3, zones

    # compare reads the run like a real one, but it measured this machine, not a
    # c7i.large: flagged in the table, and never a basis for a plan.
    res = aws_user.invoke("compare", "--results", str(aws_user.results),
                          "--out", str(aws_user.root / "cmp"))  # fmt: skip
    assert res.returncode == 0, failed(res)
    assert "EMULATED" in res.stdout
    res = aws_user.invoke("compare", "--plan", "--steps", "1e9", "--env", "CartPole-v1",
                          "--results", str(aws_user.results),
                          "--out", str(aws_user.root / "plan"))  # fmt: skip
    assert res.returncode != 0 and "no measurement of CartPole-v1" in res.stderr, res.stderr
    t = summary["timings_s"]
    print(
        f"\naws emulated deploy: apply {t['launch_s']:.1f} s, apply start -> all joined "
        f"{t['launch_to_joined_s']:.1f} s, workload done {t['workload_done_s']:.1f} s after "
        f"apply, teardown (destroy) {t['teardown_done_s'] - t['launch_s'] - t['head_exit_s']:.1f}"
        f" s, whole deploy {wall:.1f} s"
    )
