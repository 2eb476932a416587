"""The fault case of ``python -m benchmarks.autoscale`` on the emulated AWS
(``--fault SECONDS --target aws``, root): no zone of the region has capacity
(RunInstances answered ``InsufficientInstanceCapacity``, as EC2 does) while a job's
placement group waits for a node of a group that follows demand.  For SECONDS, what
the launcher's side (its watcher, Terraform) asks of the cloud API -- every EC2, IAM
and STS request the emulator answered with the user's key (testbeds/awsemu.py logs
them, leaving out its own), by action and by client (Terraform's AWS provider, boto3
in the watcher) -- and what the watcher said.  The nodes' own requests (instance
credentials) are counted apart: they are the rendezvous', not the autoscaler's.

The bed is the tests' (``.testbed/aws``): used if it runs, else started and stopped.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from pathlib import Path
from typing import Any

from benchmarks.cli import syndeo as _syndeo

CONFIG = """\
target = "aws"
cpus_per_node = 1
join_timeout_s = 240
[aws]
instance_type = "c7i.xlarge"
region = "{region}"
image = "{image}"
[[groups]]
name = "auto"
max_nodes = 1
"""
# A job whose placement group waits for a node that cannot start (cancelled with the
# cluster).
WAIT_JOB = """\
import ray
from ray.util.placement_group import placement_group
ray.init()
pg = placement_group([{"CPU": 1}] * 2, strategy="STRICT_SPREAD")
ray.get(pg.ready(), timeout=3600)
"""
ZONES = " ".join(f"us-east-1{z}" for z in "abcdef")  # every zone of the bed's region
REFUSED = "could not follow demand"


def fault(seconds: float) -> dict[str, Any]:
    from testbeds import awsemu
    from testbeds.image import test_image
    from testbeds.users import CI_PYTHON, CI_USER, UserRun, as_user, give_to_ci_user

    base = awsemu.default_base()
    state = awsemu.running(base)
    ours = state is None
    if state is None:
        state = awsemu.up(base, Path(test_image().sif))
    user = UserRun(Path(f"/home/{CI_USER}/bcloud-{os.getpid()}"))
    cid = f"bcloud-{os.getpid()}"
    try:
        user.root.mkdir(mode=0o700)
        give_to_ci_user(user.root)
        env = {**state.env(), **user.env}
        (work := user.root / "work").mkdir()
        (work / "scale.toml").write_text(CONFIG.format(region=state.region, image=state.image_id))
        (work / "wait.py").write_text(WAIT_JOB)
        for path in (work, *work.iterdir()):
            give_to_ci_user(path)

        def run(*args: str) -> tuple[float, str]:
            argv = as_user([str(CI_PYTHON), "-m", "syndeo", *args], env)
            return _syndeo(*args, cwd=work, argv=argv)

        run("up", "--config", "scale.toml", "--cluster-id", cid)
        log = user.home / "clusters" / cid / "watch.log"
        no_capacity = state.base / "no-capacity"
        try:
            no_capacity.write_text(ZONES + "\n")
            start = time.time()
            run("submit", "--cluster-id", cid, "--", "python", "wait.py")
            time.sleep(seconds)
            end = time.time()
            said = log.read_text()
        finally:
            no_capacity.unlink(missing_ok=True)
            run("down", "--cluster-id", cid)
        return result(awsemu.api_calls(base), state.access_key_id, start, end, said)
    finally:
        user.remove()
        if ours:
            awsemu.down(base)


def result(
    calls: list[dict[str, Any]], user_key: str, start: float, end: float, said: str
) -> dict[str, Any]:
    """The JSON of the case from the emulator's request log and the watcher's log."""
    window = [c for c in calls if start <= c["at"] <= end]
    launcher = [c for c in window if c["key"] == user_key]
    by_action = Counter(f"{c['service']}:{c['action']}" for c in launcher)
    by_client = Counter(c.get("client", "") for c in launcher)  # Terraform or the watcher
    minutes = (end - start) / 60
    runs = by_action.get("ec2:RunInstances", 0)
    return {
        "case": "fault",
        "target": "aws",
        "fault": "no capacity in any zone while a placement group waits for a second node",
        "fault_s": round(end - start, 1),
        "cloud_api": {
            "launcher_calls": len(launcher),
            "launcher_per_min": round(len(launcher) / minutes, 2),
            "run_instances": runs,
            "run_instances_per_min": round(runs / minutes, 2),
            "by_action": dict(sorted(by_action.items())),
            "by_client": dict(sorted(by_client.items())),
            "nodes_calls": len(window) - len(launcher),
            "counted": "EC2, IAM and STS requests (S3 is not in the emulator's log)",
        },
        "refusals_logged": said.count(REFUSED),
    }
