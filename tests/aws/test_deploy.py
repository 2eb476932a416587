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
from tests.aws.leaks import assert_nothing_left
from tests.support.programs import check_packed_run, write_project

pytestmark = [pytest.mark.aws, pytest.mark.slow]

SAMPLES = 100  # per CPU: a few seconds of benchmark on this machine


def _one_run(results: Path) -> Path:
    [run] = [p for p in results.iterdir() if p.is_dir()]
    return run


def test_deploy_runs_whole(aws_user: AwsUser) -> None:
    """The quick start of docs/targets/aws.md (Try the AWS target without an account),
    with Ray's TLS: the bucket is created by the apply, so the sealed CA reaches it only
    after the apply, while the nodes wait for it.  (A zone
    out of capacity is tried on `up`, in tests/aws/test_lifecycle.py.)"""
    cfg = aws_user.root / "tls.toml"
    cfg.write_text("tls = true\n")
    give_to_ci_user(cfg)
    t0 = time.monotonic()
    res = aws_user.invoke(
        "deploy",
        *aws_user.machine(
            "--nodes",
            "3",
            "--cpus-per-node",
            "1",
            "--join-timeout",
            "240",
            "--samples-per-cpu",
            str(SAMPLES),
            "--repeats",
            "1",
            "--results-dir",
            str(aws_user.results),
            "--config",
            str(cfg),
        ),
    )
    wall = time.monotonic() - t0
    assert res.returncode == 0, failed(res)
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
        "aws",
        3,
        "c7i.xlarge",
    )
    assert machines["instance_seconds"] > 0
    assert summary["image"] == {"id": aws_user.state.image_id, "digest": sif_manifest["sha256"]}
    assert summary["result"] == str(run / "result.json")

    doc = json.loads((run / "timeline.json").read_text())
    assert timeline.problems(doc, 3) == []

    assert_nothing_left(aws_user.state)

    # compare reads the run like a real one, but it measured this machine, not a
    # c7i.large: flagged in the table, and never a basis for a plan.
    res = aws_user.invoke(
        "compare", "--results", str(aws_user.results), "--out", str(aws_user.root / "cmp")
    )
    assert res.returncode == 0, failed(res)
    assert "EMULATED" in res.stdout
    res = aws_user.invoke(
        "compare",
        "--plan",
        "--steps",
        "1e9",
        "--env",
        "CartPole-v1",
        "--results",
        str(aws_user.results),
        "--out",
        str(aws_user.root / "plan"),
    )
    assert res.returncode != 0 and "no measurement of CartPole-v1" in res.stderr, res.stderr
    t = summary["timings_s"]
    print(
        f"\naws emulated deploy: apply {t['launch_s']:.1f} s, apply start -> all joined "
        f"{t['launch_to_joined_s']:.1f} s, workload done {t['workload_done_s']:.1f} s after "
        f"apply, teardown (destroy) {t['teardown_done_s'] - t['launch_s'] - t['head_exit_s']:.1f}"
        f" s, whole deploy {wall:.1f} s"
    )


# What a task on EC2 may do: find its own address by its hostname (the VPC's DNS
# answers for every instance's ip-A-B-C-D name), and the driver a peer's by its name.
RESOLVES = """
import socket

@ray.remote(num_cpus=1, scheduling_strategy="SPREAD")
def resolve():
    import socket, time
    time.sleep(1)
    name = socket.gethostname()
    return name, socket.gethostbyname(name), ray.util.get_node_ip_address()

for name, ip, node_ip in ray.get([resolve.remote() for _ in range(4)]):
    print("RESOLVES", name, ip, node_ip, socket.gethostbyname(name + ".ec2.internal"))
"""


def _check_resolved(stdout: str) -> None:
    found = [ln.split()[1:] for ln in stdout.splitlines() if ln.startswith("RESOLVES")]
    assert len(found) == 4, stdout[-3000:]
    for name, ip, node_ip, by_driver in found:
        assert ip == node_ip == by_driver and name == "ip-" + ip.replace(".", "-"), found
    assert len({name for name, *_ in found}) == 2  # both VMs


def test_your_program_and_its_files_run_on_the_vms(aws_user: AwsUser) -> None:
    """docs/getting-started.md, Your own program, on the emulated AWS: the work dir packed
    into the bucket the apply created (stored only once it exists: the head waits for
    it), run in the head's unpacked copy, its module imported by tasks on both VMs; and
    each VM's hostname resolves, as on EC2, from a task and from the driver."""
    proj = write_project(aws_user.root / "proj")
    with (proj / "prog.py").open("a") as prog:
        prog.write(RESOLVES)
    give_to_ci_user(proj)
    res = aws_user.invoke(
        "deploy",
        *aws_user.machine(
            "--nodes",
            "2",
            "--cpus-per-node",
            "1",
            "--join-timeout",
            "240",
            "--workdir",
            str(proj),
            "--run",
            "python prog.py",
            "--results-dir",
            str(aws_user.root / "results-prog"),
        ),
    )
    assert res.returncode == 0, failed(res)
    assert "packed for the head" in res.stdout + res.stderr
    check_packed_run(res.stdout, proj, nodes=2)
    _check_resolved(res.stdout)
    assert_nothing_left(aws_user.state)
