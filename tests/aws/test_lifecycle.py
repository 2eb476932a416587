"""The paths users take with a cluster on AWS, each run whole through ``invoke`` on the
emulated AWS: a long-lived cluster grown, shrunk and taken down from new shells; a
launcher killed outright; machines lost under a running cluster; two clusters in one
bucket that must not reach each other's records."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from syndeo.rendezvous import Rendezvous, StatusRecord, open_rendezvous
from testbeds import awsemu
from testbeds.users import CI_PYTHON, give_to_ci_user
from tests.aws.clusters import cluster_config, running_instances, taken_down
from tests.aws.conftest import BASE, AwsUser, failed
from tests.aws.leaks import assert_nothing_left, everything

pytestmark = [pytest.mark.aws, pytest.mark.slow]

LOST_WAIT_S = 120.0  # a lost rank must be in the status by then (goal: 30 s, measured)


@contextlib.contextmanager
def _deploying(user: AwsUser, cid: str, *args: str) -> Iterator[subprocess.Popen[str]]:
    """A deploy running in its own session; if the test ends first, Ctrl-C reaches it
    (it destroys what it made) and `down` removes whatever is still recorded."""
    with taken_down(user, cid):
        proc = user.start("deploy", "--cluster-id", cid, *args)
        try:
            yield proc
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGINT)
                try:
                    proc.communicate(timeout=240)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.communicate()


def _zones(state: awsemu.State, cid: str) -> list[str]:
    """Availability zones of cluster ``cid``'s running instances."""
    ec2 = boto3.client("ec2", endpoint_url=state.endpoint, region_name=state.region)
    return [
        i["Placement"]["AvailabilityZone"]
        for r in ec2.describe_instances(
            Filters=[
                {"Name": "tag:syndeo-cluster", "Values": [cid]},
                {"Name": "instance-state-name", "Values": ["running"]},
            ]
        )["Reservations"]
        for i in r["Instances"]
    ]


def _wait_status(
    rdv: Rendezvous, ok: Any, what: str, timeout: float = 300, proc: Any = None
) -> StatusRecord:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        st = rdv.read_status()
        if st is not None and ok(st):
            return st
        if proc is not None and proc.poll() is not None:
            out, err = proc.communicate()
            said = [ln for ln in (out + err).splitlines() if not ln.startswith("terraform:")]
            raise AssertionError(
                f"launcher ended ({proc.returncode}) before {what}: " + "\n".join(said)[-4000:]
            )
        time.sleep(0.5)
    raise AssertionError(f"no {what} within {timeout:.0f} s: last status {rdv.read_status()}")


def _applied(user: AwsUser, cid: str, proc: subprocess.Popen[str]) -> None:
    """Wait for the launcher's first apply to finish.  The emulated machines boot the
    moment EC2 creates them, so their nodes may join (and the workload run) while
    Terraform still waits for the instances' state: an instance terminated then fails
    that apply, a case apart from a machine lost under a running cluster."""
    log = user.home / "clusters" / cid / "terraform" / "terraform.log"
    deadline = time.monotonic() + 240
    while "Apply complete!" not in (log.read_text(errors="replace") if log.exists() else ""):
        if proc.poll() is not None:
            _out, err = proc.communicate()
            raise AssertionError(f"launcher ended ({proc.returncode}) before its apply: {err}")
        assert time.monotonic() < deadline, "the first apply did not finish in 240 s"
        time.sleep(0.5)


def _on_machine(state: awsemu.State, instance_id: str, code: str) -> dict[str, Any]:
    """Run Python on an emulated machine as its node user, with only what a VM has:
    the endpoint (the cloud's own, on EC2) and the instance's metadata service."""
    m = awsemu.machine(instance_id)
    assert m is not None, f"{instance_id} has no machine"
    env = f"AWS_ENDPOINT_URL={state.endpoint} AWS_REGION={state.region}"
    res = m.shell(f"env {env} {CI_PYTHON} -c {shlex.quote(code)}", timeout=60)
    assert res.returncode == 0, res.stderr
    out: dict[str, Any] = json.loads(res.stdout.strip().splitlines()[-1])
    return out


PROBE = """
import boto3, json, sys
s3 = boto3.client("s3")
out = {}
for name, key in (("own", sys.argv[1]), ("other", sys.argv[2])):
    for op in ("put", "get"):
        try:
            if op == "put":
                s3.put_object(Bucket=BUCKET, Key=key, Body=b"x")
            else:
                s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()
            out[f"{op} {name}"] = "ok"
        except Exception as exc:
            err = getattr(exc, "response", {}).get("Error", {})
            out[f"{op} {name}"] = err.get("Code", str(exc))
print(json.dumps(out))
"""


def test_up_grow_shrink_and_down_from_new_shells(
    aws_user: AwsUser, admin: awsemu.State, shared_bucket: str
) -> None:
    # The AWS provider retries InsufficientInstanceCapacity itself (25 times by default,
    # for minutes): the config lets it retry three times (once was too few for the
    # emulator's odd dropped connection: the apply failed on a DescribeVpcAttribute).
    cfg = cluster_config(
        aws_user,
        shared_bucket,
        '[[groups]]\nname = "cpu"\nnodes = 1\n',
        aws="api_max_retries = 3\n",
    )
    cid = f"aws-up-{uuid.uuid4().hex[:6]}"
    with taken_down(aws_user, cid):
        _up_grow_shrink_down(aws_user, admin, shared_bucket, cfg, cid)


def _up_grow_shrink_down(
    aws_user: AwsUser, admin: awsemu.State, shared_bucket: str, cfg: str, cid: str
) -> None:
    # With Ray's TLS: the CA sealed into the existing bucket before the apply, a grown
    # node's certificate made from it later, a job run over TLS.  The zone the module
    # picks first (us-east-1a, the first by name offering c7i.xlarge) has no capacity,
    # as EC2 says at times: the launcher destroys that attempt (not the bucket it did
    # not create) and starts the cluster in the next zone.
    no_capacity = aws_user.state.base / "no-capacity"
    no_capacity.write_text("us-east-1a\n")
    try:
        res = aws_user.invoke("up", "--config", cfg, "--cluster-id", cid, "--tls")
    finally:
        no_capacity.unlink()
    assert res.returncode == 0, failed(res)
    said = res.stdout + res.stderr
    assert "aws: us-east-1a: InsufficientInstanceCapacity; trying us-east-1b" in said, said
    assert "RAY_ADDRESS" in res.stdout and "RAY_USE_TLS=1" in res.stdout
    rdv = open_rendezvous(f"s3://{shared_bucket}/team", cid)
    assert rdv.read_status() is not None and rdv.read_status().phase == "serving"  # type: ignore[union-attr]

    # Another cluster's records in the same bucket: a node of this one, signed in
    # with its instance identity, can neither read nor write them.
    other = f"team/aws-other-{uuid.uuid4().hex[:6]}/status.json"
    boto3.client("s3").put_object(Bucket=shared_bucket, Key=other, Body=b"{}")
    ranks = running_instances(admin, cid)
    assert sorted(ranks) == [0, 1]
    code = (
        PROBE.replace("BUCKET", repr(shared_bucket))
        .replace("sys.argv[1]", repr(f"team/{cid}/probe"))
        .replace("sys.argv[2]", repr(other))
    )
    seen = _on_machine(admin, ranks[1], code)
    assert seen == {
        "put own": "ok",
        "get own": "ok",
        "put other": "AccessDenied",
        "get other": "AccessDenied",
    }, seen

    # Grow from a new shell: a third VM of group cpu joins the running head.
    res = aws_user.invoke("grow", "--cluster-id", cid, "--group", "cpu", "--wait-s", "240")
    assert res.returncode == 0, failed(res)
    assert sorted(running_instances(admin, cid)) == [0, 1, 2]
    # Every instance, the grown one too, runs in the zone that had capacity.
    assert set(_zones(admin, cid)) == {"us-east-1b"}, _zones(admin, cid)
    _wait_status(rdv, lambda st: len(st.nodes_joined) == 3, "3 nodes joined", timeout=60)
    # A job through the rendezvous: the head has no public address and no open port.
    job_dir = aws_user.root / "job"
    job_dir.mkdir()
    (job_dir / "printer.py").write_text(
        "import os, ray\nray.init()\nprint('cluster cpus', int(ray.cluster_resources()['CPU']))\n"
        "print('tls', os.environ.get('RAY_USE_TLS'))\n"
    )
    give_to_ci_user(job_dir)
    give_to_ci_user(job_dir / "printer.py")
    res = aws_user.invoke(
        "submit",
        "--cluster-id",
        cid,
        "--workdir",
        str(job_dir),
        "--follow",
        "--",
        "python",
        "printer.py",
    )
    assert res.returncode == 0, failed(res)
    assert "cluster cpus 3" in res.stdout and "succeeded" in res.stderr
    assert "tls 1" in res.stdout
    kept = {r: ranks[r] for r in (0, 1)}
    res = aws_user.invoke("shrink", "--cluster-id", cid, "--group", "cpu")
    assert res.returncode == 0, failed(res)
    assert running_instances(admin, cid) == kept  # only the grown VM went; the others are untouched

    res = aws_user.invoke("down", "--cluster-id", cid)
    assert res.returncode == 0, failed(res)
    assert [e for e in everything(admin) if e != f"bucket {shared_bucket}"] == []
    keys = boto3.client("s3").list_objects_v2(Bucket=shared_bucket, Prefix=f"team/{cid}/")
    assert keys.get("KeyCount", 0) == 0, "the cluster's records were left in the bucket"


def test_a_launcher_killed_outright_is_cleaned_up_by_down(
    aws_user: AwsUser, admin: awsemu.State, shared_bucket: str
) -> None:
    cfg = cluster_config(aws_user, shared_bucket)
    cid = f"aws-kill-{uuid.uuid4().hex[:6]}"
    with _deploying(
        aws_user, cid, "--config", cfg, "--nodes", "2", "--samples-per-cpu", "100000"
    ) as proc:
        rdv = open_rendezvous(f"s3://{shared_bucket}/team", cid)
        _wait_status(rdv, lambda st: st.phase == "running", "a running workload", proc=proc)
        os.killpg(proc.pid, signal.SIGKILL)  # no handler runs: the machines stay up
        proc.communicate()
        assert sorted(running_instances(admin, cid)) == [0, 1]
        res = aws_user.invoke("down", "--cluster-id", cid)
        assert res.returncode == 0, failed(res)
        # The deploy's state holds its launch key: `down` could check the head's signed
        # word that it stopped, rather than wait its whole minute for it.
        assert "no word from its head" not in res.stdout + res.stderr, failed(res)
    assert [e for e in everything(admin) if e != f"bucket {shared_bucket}"] == []
    assert running_instances(admin, cid) == {}


def test_lost_machines_under_a_running_deploy(
    aws_user: AwsUser, admin: awsemu.State, shared_bucket: str
) -> None:
    """A worker's instance terminated (a spot interruption): the status names the lost
    rank, and with [recovery] replace_lost Terraform re-creates exactly that instance,
    whose node joins the running head; then the head's instance: the launcher ends the
    run with a clear message instead of waiting for a done record that will never come."""
    recovery = "[recovery]\nreplace_lost = true\nmax_replacements = 1\n"
    cfg = cluster_config(aws_user, shared_bucket, recovery)
    cid = f"aws-lost-{uuid.uuid4().hex[:6]}"
    # A program that outlives its workers: only the launcher can end this run.
    run = "python -c 'import time; time.sleep(900)'"
    with _deploying(aws_user, cid, "--config", cfg, "--nodes", "3", "--run", run) as proc:
        rdv = open_rendezvous(f"s3://{shared_bucket}/team", cid)
        _wait_status(
            rdv,
            lambda st: st.phase == "running" and len(st.nodes_joined) == 3,
            "3 nodes running",
            proc=proc,
        )
        _applied(aws_user, cid, proc)
        ec2 = boto3.client("ec2")
        ranks = running_instances(admin, cid)
        t0 = time.monotonic()
        ec2.terminate_instances(InstanceIds=[ranks[2]])
        _wait_status(
            rdv,
            lambda st: st.nodes_lost == [2],
            "rank 2 reported lost",
            proc=proc,
            timeout=LOST_WAIT_S,
        )
        lost_s = time.monotonic() - t0
        _wait_status(
            rdv,
            lambda st: st.nodes_lost == [] and len(st.nodes_joined) == 3,
            "rank 2's replacement joined",
            proc=proc,
            timeout=420,
        )
        back_s = time.monotonic() - t0
        now = running_instances(admin, cid)
        # Exactly the lost instance was re-created; the others are the same machines.
        assert sorted(now) == [0, 1, 2] and now[2] != ranks[2], (ranks, now)
        assert (now[0], now[1]) == (ranks[0], ranks[1]), (ranks, now)
        # And the teardown meets a cloud that refuses part of it (here: an explicit
        # deny on deleting the VPC; on AWS also a delete that loses a race for good).
        iam = boto3.client("iam")
        deny = {"Effect": "Deny", "Action": "ec2:DeleteVpc", "Resource": "*"}
        iam.put_user_policy(
            UserName=awsemu.ADMIN_USER,
            PolicyName="no-vpc-delete",
            PolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": [deny]}),
        )
        try:
            t1 = time.monotonic()
            ec2.terminate_instances(InstanceIds=[ranks[0]])
            out, err = proc.communicate(timeout=300)
            ended_s = time.monotonic() - t1
        finally:
            iam.delete_user_policy(UserName=awsemu.ADMIN_USER, PolicyName="no-vpc-delete")
        assert proc.returncode != 0, out + err
        # Both reach the user: why the run ended -- EC2 was asked (the instance's
        # state), not only the head's 90 s of silence -- and what the teardown left.
        assert re.search(
            r"the head vanished: .* EC2 lists its instance i-\w+ as "
            r"(terminated|shutting-down)",
            err,
        ), out + err
        assert "destroy again (2/3)" in out and "destroy again (3/3)" in out, out
        assert "(left up)" in err and "(torn down)" not in err, err
        assert re.search(
            r"and the teardown failed: terraform destroy failed .*"
            r"may still exist: [^;]*module\.cluster\.aws_vpc\.this[^;]*; "
            rf"remove with: syndeo down --cluster-id {cid}",
            err,
        ), err
        assert "aws_region" not in err, err  # a data source: nothing that could be left
        assert "rank 2 lost; started a replacement" in err, err
        summary = json.loads((aws_user.results / cid / "deploy.json").read_text())
        assert "the head vanished" in summary["message"], summary
        assert "the teardown failed" in summary["message"], summary
        assert [e for e in everything(admin) if e.startswith("vpc ")], everything(admin)
        # What the message says to run, from a new shell, finishes the teardown.
        t2 = time.monotonic()
        res = aws_user.invoke("down", "--cluster-id", cid)
        down_s = time.monotonic() - t2
        assert res.returncode == 0, failed(res)
    assert [e for e in everything(admin) if e != f"bucket {shared_bucket}"] == []
    [event] = summary["recovery"]
    assert (
        event["rank"] == 2
        and event["replaced"] == 'rank 2 (module.cluster.aws_instance.node["2"] re-created)'
    )
    assert event["lost_s"] <= event["replaced_s"] <= event["joined_s"], event
    # The times are measurements, printed for the record (the goal for the first is
    # 30 s; how long it takes is Ray's health check on a loaded machine, not a pass mark).
    print(
        f"\nworker terminated -> reported lost: {lost_s:.1f} s; -> replacement joined: "
        f"{back_s:.1f} s (launcher: lost -> joined {event['replacement_joined_after_s']} s); "
        f"head terminated -> run ended, destroy refused 3 times: {ended_s:.1f} s; "
        f"then down: {down_s:.1f} s"
    )


# The workload of the spot test, on the head: ends (0) once Ray has known two rank-2
# nodes (the drained one stays in ray.nodes() as dead) and one of them is alive; a
# cluster that never replaces it makes it fail after 800 s.  Counting nodes rather
# than comparing with the first one it sees: the notice may drain rank 2 before this
# program's first ray.nodes() call.
RANK_2_REPLACED = "\\n".join(
    [
        "import ray, sys, time",
        "ray.init()",
        "def replaced():",
        "    try: nodes = ray.nodes()",
        "    except Exception as exc: print('ray.nodes:', exc, flush=True); return False",
        "    rank2 = [n for n in nodes if n.get('Labels', {}).get('syndeo-rank') == '2']",
        "    return len(rank2) >= 2 and any(n['Alive'] for n in rank2)",
        "end = time.time() + 800",
        "while time.time() < end and not replaced(): time.sleep(1)",
        "if time.time() >= end: sys.exit('rank 2 was never replaced')",
        "print('rank 2 replaced by a new node', flush=True)",
    ]
)


def test_a_spot_notice_drains_the_node_and_its_successor_comes_first(
    aws_user: AwsUser, admin: awsemu.State, shared_bucket: str
) -> None:
    """Spot instances: the instance's own IMDS serves an interruption notice; its node
    drains itself in Ray and records it, the launcher re-creates that rank's instance
    at once, and Terraform creates the successor before it terminates the drained one."""
    extra = "spot = true\n[recovery]\nreplace_lost = true\nmax_replacements = 1\n"
    cfg = cluster_config(aws_user, shared_bucket, extra)
    cid = f"aws-spot-{uuid.uuid4().hex[:6]}"
    run = "python -c " + shlex.quote(f'exec("{RANK_2_REPLACED}")')
    with _deploying(aws_user, cid, "--config", cfg, "--nodes", "3", "--run", run) as proc:
        rdv = open_rendezvous(f"s3://{shared_bucket}/team", cid)
        _wait_status(
            rdv,
            lambda st: st.phase == "running" and len(st.nodes_joined) == 3,
            "3 nodes running",
            proc=proc,
        )
        _applied(aws_user, cid, proc)
        ranks = running_instances(admin, cid)
        deadline = time.time() + 120  # EC2's notice: about two minutes
        notice = {
            "action": "terminate",
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(deadline)),
        }
        (admin.base / "notices").mkdir(exist_ok=True)
        t0 = time.monotonic()
        (admin.base / "notices" / ranks[2]).write_text(json.dumps(notice))
        st = _wait_status(
            rdv,
            lambda st: [n.rank for n in st.interrupted] == [2],
            "rank 2's notice in the status",
            proc=proc,
            timeout=120,
        )
        noticed_s = time.monotonic() - t0
        [note] = st.interrupted
        assert note.cloud == "aws" and note.action == "terminate", note
        assert note.deadline is not None and abs(note.deadline - deadline) <= 1, note
        # The program ends once Ray sees rank 2's successor (the launcher's record of
        # the replacement, below, says when it joined).
        out, err = proc.communicate(timeout=720)
    assert proc.returncode == 0, (out + err)[-4000:]
    assert "rank 2 replaced by a new node" in out + err, (out + err)[-4000:]
    log = (aws_user.home / "clusters" / cid / "terraform" / "terraform.log").read_text()
    created = log.find('aws_instance.node["2"]: Creation complete')
    deposed = log.find('aws_instance.node["2"] (deposed object')
    # The successor existed before the drained instance was terminated.
    assert 0 <= created < deposed, log[-4000:]
    summary = json.loads((aws_user.results / cid / "deploy.json").read_text())
    [event] = summary["recovery"]
    assert event["rank"] == 2 and event["interrupted"] == "aws", event
    assert event["replaced"] == 'rank 2 (module.cluster.aws_instance.node["2"] re-created)', event
    assert event["notice_s"] <= event["replaced_s"] <= event["joined_s"], event
    back_s = event["joined_s"] - event["notice_s"]
    assert [e for e in everything(admin) if e != f"bucket {shared_bucket}"] == []
    print(
        f"\nspot notice -> in the status: {noticed_s:.1f} s; -> successor joined: "
        f"{back_s:.1f} s (deadline 120 s)"
    )


def test_nothing_is_left_between_tests(admin: awsemu.State) -> None:
    # The session's emulator is shared: every test above must have cleaned up.
    assert everything(admin) == []
    assert_nothing_left(admin)


# Two one-CPU bundles on two machines: the head alone cannot hold them, so Ray's
# autoscaler asks for a VM of group `cpu`, which the watcher adds through Terraform.  A
# task in each bundle imports the job's package (--requirements): the VM made for it
# did not exist when the job was submitted.
SPREAD = """\
import ray
from ray.util.placement_group import placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy as Bundle
ray.init()
pg = placement_group([{"CPU": 1}] * 2, strategy="STRICT_SPREAD")
ray.get(pg.ready(), timeout=400)
print("nodes", len([n for n in ray.nodes() if n["Alive"]]), flush=True)

@ray.remote(num_cpus=1)
def where():
    import shellingham
    return ray.get_runtime_context().get_node_id(), shellingham.__file__

found = ray.get([where.options(scheduling_strategy=Bundle(pg, i)).remote() for i in range(2)])
print("imported on", len({n for n, _ in found}), "nodes:", *sorted(p for _, p in found))
"""


def _wait_log(log: Any, line: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while line not in log.read_text():
        assert time.monotonic() < deadline, f"no {line!r} in the watcher's log: {log.read_text()}"
        time.sleep(2)


def _installed_before_ray(instance_id: str) -> None:
    """The VM's console (kept once it is gone): it installed the job's wheels, fetched
    from the bucket, before its Ray started, so no task could land on it first."""
    console = BASE / "logs" / f"{instance_id}-syndeo-node.log"
    deadline = time.monotonic() + 60
    while not console.exists():
        assert time.monotonic() < deadline, f"no console of {instance_id}: {awsemu.logs(BASE)}"
        time.sleep(1)
    text = console.read_text()
    installed, joined = text.find(" installed in "), text.find("joined head")
    assert 0 <= installed < joined, text[-4000:]


def test_a_group_follows_demand_and_an_idle_cluster_stops_itself(
    aws_user: AwsUser, admin: awsemu.State, shared_bucket: str
) -> None:
    """A job with packages (requirements.txt) submitted while group `cpu` has no VM: the
    VM the autoscaler adds for it installs them from the bucket before its Ray starts,
    and the task there imports them; idle, the VM goes, and later the whole cluster."""
    cfg = cluster_config(aws_user, shared_bucket, '[[groups]]\nname = "cpu"\nmax_nodes = 1\n')
    cid = f"aws-as-{uuid.uuid4().hex[:6]}"
    with taken_down(aws_user, cid):
        res = aws_user.invoke(
            *("up", "--config", cfg, "--cluster-id", cid),
            *("--idle-timeout", "10s", "--autostop", "90s"),
        )
        assert res.returncode == 0, failed(res)
        assert sorted(running_instances(admin, cid)) == [0]  # it starts at its minimum
        job_dir = aws_user.root / "spread"
        job_dir.mkdir()
        (job_dir / "spread.py").write_text(SPREAD)
        (job_dir / "requirements.txt").write_text("shellingham\n")  # not in the image
        for path in (job_dir, *job_dir.iterdir()):
            give_to_ci_user(path)
        res = aws_user.invoke(
            *("submit", "--cluster-id", cid, "--workdir", str(job_dir), "--follow"),
            *("--", "python", "spread.py"),
        )
        assert res.returncode == 0 and "nodes 2" in res.stdout, failed(res)
        imported = re.search(r"^imported on 2 nodes: (\S+) (\S+)$", res.stdout, re.M)
        assert imported and all("/pylibs/" in p for p in imported.groups()), res.stdout
        [grown] = [iid for rank, iid in running_instances(admin, cid).items() if rank != 0]
        log = aws_user.home / "clusters" / cid / "watch.log"
        # (The node may join before the watcher's apply has returned.)
        _wait_log(log, "group cpu: started", 120)
        # Idle: Ray lets the VM go, the watcher's apply removes it (1 -> 2 -> 1) ...
        _wait_log(log, "let go", 300)
        assert sorted(running_instances(admin, cid)) == [0], log.read_text()
        _installed_before_ray(grown)
        # ... and after 90 s with nothing running, the watcher takes it down (`down`).
        _wait_log(log, "is down (autostop)", 400)
        assert not (aws_user.home / "clusters" / cid / "launched.json").exists()
    # The leak scan: nothing of the cluster is left in the emulated AWS.
    assert [e for e in everything(admin) if e != f"bucket {shared_bucket}"] == []


def _states(state: awsemu.State, ids: list[str]) -> dict[str, str]:
    ec2 = boto3.client("ec2", endpoint_url=state.endpoint, region_name=state.region)
    found = ec2.describe_instances(InstanceIds=ids)["Reservations"]
    return {i["InstanceId"]: i["State"]["Name"] for r in found for i in r["Instances"]}


def _kill_watcher(user: AwsUser, cid: str) -> None:
    """A closed laptop: the cluster's watcher ends without a word (by its recorded pid)."""
    launched = json.loads((user.home / "clusters" / cid / "launched.json").read_text())
    pid = int(launched["watcher"]["pid"])
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while os.path.exists(f"/proc/{pid}") and "zombie" not in _proc_state(pid):
        assert time.monotonic() < deadline, f"watcher {pid} is still there"
        time.sleep(0.2)


def _proc_state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/status") as f:
            return f.read()
    except OSError:
        return "zombie"  # gone meanwhile


def test_an_idle_cluster_without_its_watcher_powers_its_vms_off(
    aws_user: AwsUser, admin: awsemu.State, shared_bucket: str
) -> None:
    """`up --autostop` with the watcher gone: after autostop + grace the head stops the
    cluster itself and every VM powers off through its OS (the bed's power button):
    stopped in EC2, as instance_initiated_shutdown_behavior says; `down` removes it all."""
    cfg = cluster_config(aws_user, shared_bucket)
    cid = f"aws-po-{uuid.uuid4().hex[:6]}"
    with taken_down(aws_user, cid):
        res = aws_user.invoke(
            *("up", "--config", cfg, "--cluster-id", cid),
            *("--autostop", "20s", "--autostop-grace", "10s"),
        )
        assert res.returncode == 0, failed(res)
        ids = list(running_instances(admin, cid).values())
        assert len(ids) == 2
        _kill_watcher(aws_user, cid)
        # Stopped in EC2, then powered off in the bed (its console kept once it is).
        consoles = [BASE / "logs" / f"{i}-syndeo-node.log" for i in ids]
        deadline = time.monotonic() + 300
        while set(_states(admin, ids).values()) != {"stopped"} or not all(
            c.exists() for c in consoles
        ):
            assert time.monotonic() < deadline, f"{_states(admin, ids)}\n{awsemu.logs(BASE)}"
            time.sleep(2)
        log = awsemu.logs(BASE)
        # The head's own word: it stopped the cluster after autostop + grace, not before.
        assert "idle for autostop + grace (30 s), no watcher" in log, log
        assert all(f"{i}: the guest powered off: stop" in log for i in ids), log
        # Each VM's own ExecStopPost powered it off.
        assert all("powering this VM off" in c.read_text() for c in consoles), log
        assert all(awsemu.machine(i, BASE) is None for i in ids)  # powered off in the bed too
        # Nothing took the cluster down: only the VMs are off, and `down` removes the rest.
        assert (aws_user.home / "clusters" / cid / "launched.json").exists()
        res = aws_user.invoke("down", "--cluster-id", cid)
        assert res.returncode == 0, failed(res)
    assert [e for e in everything(admin) if e != f"bucket {shared_bucket}"] == []
