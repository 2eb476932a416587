"""``deploy --target ssh`` end to end on the SSH bed: real sshd hosts in network
namespaces, real Terraform, the launcher run by the unprivileged CI user.

Each run forms the cluster on the hosts, runs the workload, collects the result and
destroys everything; afterwards no process of the CI user may remain on any host,
and the Terraform state may hold no resource.
"""

from __future__ import annotations

import contextlib
import json
import pwd
import shutil
import signal
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import psutil
import pytest

from testbeds import netns, sshhosts
from testbeds.objectstores import Server, make_bucket, running
from testbeds.users import CI_PYTHON, CI_USER, UserRun, as_user, give_to_ci_user
from tests.support.helpers import launcher_of
from tests.support.listeners import assert_ray_ports
from tests.support.programs import check_packed_run, write_project
from tests.support.ssh import BENCH
from tests.support.ssh import assert_clean as _assert_clean
from tests.support.ssh import body as _body
from tests.support.ssh import launcher as _launcher
from tests.support.ssh import ssh_section as _ssh_section
from tests.support.ssh import terraform_log as _terraform_log

pytestmark = [pytest.mark.ssh, pytest.mark.slow]


def _flags(bed: sshhosts.Bed) -> list[str]:
    """The ssh options of docs/targets/ssh.md: ``--hosts h1,h2,h3 --ssh-user U --ssh-key K``."""
    hosts = ",".join(h.ip for h in bed.hosts)
    return ["--hosts", hosts, "--ssh-user", bed.user, "--ssh-key", str(bed.key)]


def _benchmark(outcome: dict[str, Any], nodes: int = 3) -> dict[str, Any]:
    assert outcome.get("exit_code") == 0, outcome
    result = json.loads(Path(str(outcome["result_path"])).read_text())
    manifest = result["manifest"]
    assert manifest["target"] == "ssh" and manifest["cluster_nodes"] == nodes, manifest
    # The head ran on the first host (its own hostname in the namespace).
    assert manifest["hostname"] == "host1", manifest
    assert [r["env_id"] for r in result["results"]] == ["CartPole-v1"]
    assert result["results"][0]["samples_counted"] == result["results"][0]["samples_requested"]
    assert result["results"][0]["syndeo"]["mean"] > 0
    summary = json.loads((Path(outcome["result_path"]).parent / "deploy.json").read_text())
    assert summary["machines"]["provider"] == "ssh" and summary["machines"]["count"] == nodes
    assert summary["machines"]["instance_seconds"] > 0
    return summary


def test_bare_nodes_file_rendezvous(ssh_hosts: sshhosts.Bed, run: UserRun) -> None:
    """The hosts, login and key from the command line (the flags docs/targets/ssh.md
    shows), not the file."""
    argv = run.argv(_body(run, ssh_hosts, flags=True), *_flags(ssh_hosts))
    proc = subprocess.Popen(
        as_user(argv, run.env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=run.root,
    )
    outcome = UserRun.finish(proc, timeout=600)
    summary = _benchmark(outcome)
    machines = summary["machines"]
    assert machines["hosts"] == [h.ip for h in ssh_hosts.hosts], machines
    assert (machines["user"], machines["key"]) == (ssh_hosts.user, str(ssh_hosts.key)), machines
    assert summary["timings_s"]["all_joined_s"] > 0
    print("bring-up bare:", json.dumps(summary["timings_s"]))
    assert "Traceback" not in outcome["_stderr"]
    _assert_clean(ssh_hosts, run)


def test_dry_run_with_the_readme_flags_creates_nothing(
    ssh_hosts: sshhosts.Bed, run: UserRun
) -> None:
    """``invoke deploy --target ssh --hosts … --ssh-user U --ssh-key K --dry-run``: the
    tfvars and terraform commands it would run, the flags over the file, and nothing made."""
    argv = run.argv(_body(run, ssh_hosts, flags=True), *_flags(ssh_hosts), "--dry-run")
    out = subprocess.run(
        as_user(argv, run.env),
        capture_output=True,
        text=True,
        cwd=run.root,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    tfvars = json.loads("\n".join(ln[4:] for ln in lines if ln.startswith("#   ")))
    assert tfvars["hosts"] == [h.ip for h in ssh_hosts.hosts]
    assert tfvars["ssh_user"] == ssh_hosts.user
    assert tfvars["ssh_private_key_file"] == str(ssh_hosts.key)
    assert tfvars["node"]["node_count"] == 3
    assert any(ln.startswith("TF_DATA_DIR=") and " apply " in ln for ln in lines), out.stdout
    assert not (run.home / "clusters").exists()  # a dry run writes nothing
    assert not list(run.root.glob("rdv/*"))


def test_containerised_nodes_s3_on_the_bridge(
    ssh_hosts: sshhosts.Bed, bed_s3: Server, run: UserRun, sif: Path
) -> None:
    make_bucket(bed_s3, "ssh-rdv")
    # STS at moto's address too: the hosts get a token for the cluster's prefix.
    env = {**run.env, **bed_s3.env, "AWS_ENDPOINT_URL_STS": bed_s3.endpoint}
    body = _body(run, ssh_hosts, "s3://ssh-rdv/syndeo", extra=f'container = "{sif}"\n')
    proc = run.start(body, env)
    outcome = UserRun.finish(proc, timeout=900)
    summary = _benchmark(outcome)
    said = outcome["_stdout"] + outcome["_stderr"]
    assert "ssh: node credentials: scoped to the cluster's prefix until" in said
    assert summary["image"]["digest"]
    print("bring-up container (first, with upload):", json.dumps(summary["timings_s"]))
    # Every host got its own copy, named by digest, on its own disk.
    digest = summary["image"]["digest"].removeprefix("sha256:")
    for host in ssh_hosts.hosts:
        copy = ssh_hosts.disk(host) / "images" / f"{digest}.sif"
        assert copy.is_file(), f"{host.name} has no image copy"
    # (local-exec output lands in the cluster's terraform log)
    assert _terraform_log(run).count("syndeo: uploaded image") == 3, _terraform_log(run)[-3000:]
    _assert_clean(ssh_hosts, run)
    # A second run finds the hosts' copies current and uploads nothing.
    again = UserRun.finish(
        run.start(body, env),
        timeout=900,
    )
    _benchmark(again)
    log = _terraform_log(run)
    assert log.count("syndeo: uploaded image") == 3 and log.count("already has image") == 3, log
    _assert_clean(ssh_hosts, run)


def test_a_host_refusing_ssh_starts_nothing(ssh_hosts: sshhosts.Bed, run: UserRun) -> None:
    bad = ssh_hosts.hosts[1]
    sshhosts.refuse(ssh_hosts, bad, how="connection")
    try:
        body = _body(run, ssh_hosts).replace("connect_timeout_s = 20", "connect_timeout_s = 5")
        outcome = run.deploy(body)
    finally:
        sshhosts.restore(ssh_hosts, bad)
    assert outcome["exit_code"] != 0, outcome
    assert bad.ip in outcome["error"] and "\n" not in outcome["error"], outcome
    assert "terraform apply failed" in outcome["error"]
    _assert_clean(ssh_hosts, run)


def test_unreachable_rendezvous_the_nodes_error_reaches_the_user(
    ssh_hosts: sshhosts.Bed, run: UserRun
) -> None:
    # On the launcher's loopback: the launcher reaches it, the hosts cannot.
    with running("s3", run.root / "logs") as s3:
        make_bucket(s3, "loopback")
        env = {**run.env, **s3.env}
        body = _body(run, ssh_hosts, "s3://loopback/syndeo")
        proc = run.start(body, env)
        outcome = UserRun.finish(proc, timeout=600)
    assert outcome["exit_code"] != 0, outcome
    message = outcome.get("message") or outcome.get("error", "")
    # The head's own words, fetched from its host: which endpoint it could not reach.
    assert f"exited on {ssh_hosts.hosts[0].ip}" in message, message
    assert "127.0.0.1" in message and "reach" in message.lower(), message
    _assert_clean(ssh_hosts, run)


# ---------------------------------------------------------------------- interrupts
def test_ctrl_c_during_apply_destroys(ssh_hosts: sshhosts.Bed, run: UserRun) -> None:
    # A host that does not answer holds the apply at its reach step for a while:
    # a deterministic point inside the apply to interrupt.
    slow = ssh_hosts.hosts[2]
    sshhosts.refuse(ssh_hosts, slow, how="connection")
    try:
        proc = _launcher(run, _body(run, ssh_hosts).replace("= 20", "= 120"))
        launcher = launcher_of(proc)
        _wait_terraform(run, 'terraform_data.reach["0"]: Creation complete')
        launcher.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=300)
    finally:
        sshhosts.restore(ssh_hosts, slow)
    assert proc.returncode == 130, err
    assert "Destroy complete" in _terraform_log(run), err
    assert "Traceback" not in err
    _assert_clean(ssh_hosts, run)


def test_sigterm_during_the_run_destroys(ssh_hosts: sshhosts.Bed, run: UserRun) -> None:
    body = _body(run, ssh_hosts, extra="run = \"python -c 'import time; time.sleep(600)'\"\n")
    proc = _launcher(run, body)
    launcher = launcher_of(proc)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        phases = [
            json.loads(p.read_text()).get("phase")
            for p in (run.root / "rdv").glob("*/a0/status.json")
        ]
        if "running" in phases:
            break
        time.sleep(0.3)
    else:
        raise AssertionError("the workload never started")
    launcher.send_signal(signal.SIGTERM)
    _out, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, err
    assert "Destroy complete" in _terraform_log(run), err
    assert not list((run.root / "rdv").glob("*/a0/head.json")), "records left behind"
    _assert_clean(ssh_hosts, run)


def _wait_terraform(run: UserRun, needle: str, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if needle in _terraform_log(run):
            return
        time.sleep(0.2)
    raise AssertionError(f"terraform never logged {needle!r}: {_terraform_log(run)[-2000:]}")


def test_up_then_down(ssh_hosts: sshhosts.Bed, run: UserRun) -> None:
    cfg = run.config(_body(run, ssh_hosts))
    up = subprocess.run(
        as_user([str(CI_PYTHON), "-m", "syndeo", "up", "--config", str(cfg)], run.env),
        capture_output=True,
        text=True,
        cwd=run.root,
        timeout=600,
        check=False,
    )
    assert up.returncode == 0, up.stderr[-3000:]
    assert "is up: 3 nodes" in up.stdout
    cluster_id = up.stdout.split("Cluster ", 1)[1].split(" ", 1)[0]
    running_nodes = [sshhosts.host_processes(ssh_hosts, h, CI_USER) for h in ssh_hosts.hosts]
    assert all(any("syndeo node" in p for p in procs) for procs in running_nodes)
    # Ray's listeners on each host, as on the Slurm bed.
    hosts = [(h.name, h.netns, h.ip) for h in ssh_hosts.hosts]
    assert_ray_ports(hosts, pwd.getpwnam(CI_USER).pw_uid)
    # A job through the rendezvous: the launcher never connects to the head.
    (run.root / "job").mkdir()
    (run.root / "job" / "printer.py").write_text(PRINTER.replace("range(8)", "range(2)"))
    give_to_ci_user(run.root / "job")
    give_to_ci_user(run.root / "job" / "printer.py")
    job = subprocess.run(
        as_user(
            [
                str(CI_PYTHON),
                "-m",
                "syndeo",
                "submit",
                "--cluster-id",
                cluster_id,
                "--workdir",
                str(run.root / "job"),
                "--follow",
                "--",
                "python",
                "printer.py",
            ],
            run.env,
        ),
        capture_output=True,
        text=True,
        cwd=run.root,
        timeout=300,
        check=False,
    )
    assert job.returncode == 0, job.stderr[-3000:]
    assert "line 1 " in job.stdout and "succeeded" in job.stderr
    down = subprocess.run(
        as_user([str(CI_PYTHON), "-m", "syndeo", "down", "--cluster-id", cluster_id], run.env),
        capture_output=True,
        text=True,
        cwd=run.root,
        timeout=600,
        check=False,
    )
    assert down.returncode == 0, down.stderr[-3000:]
    assert f"cluster {cluster_id} is down" in down.stderr + down.stdout
    _assert_clean(ssh_hosts, run)


PRINTER = (
    "import time\n"
    "for i in range(8):\n"
    "    print(f'line {i} {time.time():.3f}', flush=True)\n"
    "    time.sleep(1)\n"
)


def test_deploy_run_output_is_shown_live_and_kept(ssh_hosts: sshhosts.Bed, run: UserRun) -> None:
    """On a VM-like target the head's log goes with its machine: the program's output
    comes through the rendezvous, shown while it runs and kept in workload.log."""
    (run.root / "printer.py").write_text(PRINTER)
    give_to_ci_user(run.root / "printer.py")
    cfg = run.config(_body(run, ssh_hosts))
    proc = subprocess.Popen(
        as_user(
            [
                str(CI_PYTHON),
                "-m",
                "syndeo",
                "deploy",
                "--config",
                str(cfg),
                "--run",
                "python printer.py",
            ],
            run.env,
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=run.root,
    )
    arrived: dict[int, tuple[float, float]] = {}
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("line "):
            _, i, stamp = line.split()
            arrived[int(i)] = (float(stamp), time.time())
    stderr = proc.stderr.read() if proc.stderr else ""
    assert proc.wait(timeout=420) == 0, stderr[-3000:]
    assert sorted(arrived) == list(range(8)), stderr[-3000:]
    # Live: the first line was shown before the program printed its last one.
    assert arrived[0][1] < arrived[7][0]
    lags = [round(seen - printed, 2) for printed, seen in arrived.values()]
    print("print -> shown at the launcher, s:", lags)
    [kept] = list(run.results.glob("*/workload.log"))
    assert [ln.split()[1] for ln in kept.read_text().splitlines() if ln.startswith("line ")] == [
        str(i) for i in range(8)
    ]
    _assert_clean(ssh_hosts, run)


def test_your_program_and_its_files_run_on_the_hosts(ssh_hosts: sshhosts.Bed, run: UserRun) -> None:
    """deploy --run with a work dir of the user's own: packed into the rendezvous (the
    ignore rules kept out what they name), run by the head in its unpacked copy, shipped
    by Ray to the other nodes as the job's working dir."""
    proj = write_project(run.root / "proj")
    give_to_ci_user(proj)
    cfg = run.config(_body(run, ssh_hosts))
    out = subprocess.run(
        as_user(
            [
                str(CI_PYTHON),
                "-m",
                "syndeo",
                "deploy",
                "--config",
                str(cfg),
                "--workdir",
                str(proj),
                "--run",
                "python prog.py",
            ],
            run.env,
        ),
        capture_output=True,
        text=True,
        cwd=run.root,
        timeout=420,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "packed for the head" in out.stderr + out.stdout
    check_packed_run(out.stdout, proj, nodes=2)
    _assert_clean(ssh_hosts, run)


def test_bad_input_starts_nothing(ssh_hosts: sshhosts.Bed, run: UserRun) -> None:
    cases = {
        "unknown host": (
            _body(run, ssh_hosts).replace(ssh_hosts.hosts[0].ip, "10.98.250.99"),
            "is not in",
        ),
        "missing key": (
            _body(run, ssh_hosts).replace(str(ssh_hosts.key), "/nonexistent/key"),
            "key file /nonexistent/key not found",
        ),
        "root login": (_body(run, ssh_hosts) + 'user = "root"\n', "nodes run unprivileged"),
        "hosts vs nodes": (
            _body(run, ssh_hosts).replace('target = "ssh"\n', 'target = "ssh"\nnodes = 2\n'),
            "2 nodes asked for but 3 hosts given",
        ),
    }
    for name, (body, expected) in cases.items():
        outcome = run.deploy(body)
        assert outcome["exit_code"] != 0, (name, outcome)
        assert expected in outcome.get("error", ""), (name, outcome)
        assert "terraform" not in outcome["_stderr"].lower(), (name, outcome["_stderr"])
    _assert_clean(ssh_hosts, run)


def test_node_groups_on_hosts(ssh_hosts: sshhosts.Bed, run: UserRun) -> None:
    """Groups on the ssh target: hosts are taken group by group (a group's own
    [groups.ssh] hosts, else the next of [ssh] hosts), every node carries its group's
    label and shape, and Ray's own API places work by group."""
    h1, h2, h3 = (h.ip for h in ssh_hosts.hosts)
    probe = run.root / "groups_probe.py"
    shutil.copy(Path(__file__).resolve().parents[1] / "groups_probe.py", probe)
    give_to_ci_user(probe)
    body = (
        f'target = "ssh"\ncpus_per_node = 1\njoin_timeout_s = 120\n'
        f'rendezvous = "{(run.root / "rdv").as_uri()}"\nrun = "{CI_PYTHON} {probe} 1"\n'
        # rank 0 = the head group (host1), rank 1 = cpu (its own host3), rank 2 = big (host2)
        f'[[groups]]\nname = "cpu"\ncpus_per_node = 2\nssh = {{ hosts = ["{h3}"] }}\n'
        f'[[groups]]\nname = "big"\nmemory_mb_per_node = 1024\n'
        + _ssh_section(ssh_hosts, hosts=[h1, h2])
    )
    outcome = run.deploy(body)
    assert outcome.get("exit_code") == 0, outcome
    out = json.loads(Path(str(outcome["result_path"])).read_text())
    assert out["groups"] == {"head": [0], "cpu": [1], "big": [2]}
    assert out["cpu_per_group"] == {"head": 1, "cpu": 2, "big": 1}
    assert {g: (t["group"], t["host"]) for g, t in out["by_label"].items()} == {
        "head": ("head", "host1"),
        "cpu": ("cpu", "host3"),
        "big": ("big", "host2"),
    }
    assert out["by_rank"]["1"]["host"] == "host3"
    assert "head 1/1, cpu 1/1, big 1/1" in outcome["_stderr"]
    summary = json.loads((Path(outcome["result_path"]).parent / "deploy.json").read_text())
    assert summary["machines"]["hosts"] == [h1, h3, h2]
    print("bring-up groups:", json.dumps(summary["timings_s"]))
    _assert_clean(ssh_hosts, run)


def _syndeo(run: UserRun, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        as_user([str(CI_PYTHON), "-m", "syndeo", *args], run.env),
        capture_output=True,
        text=True,
        cwd=run.root,
        timeout=600,
        check=False,
    )


def _nodes_on(bed: sshhosts.Bed, index: int) -> list[str]:
    return [
        p for p in sshhosts.host_processes(bed, bed.hosts[index], CI_USER) if "syndeo node" in p
    ]


def test_grow_and_shrink_an_up_cluster_on_hosts(ssh_hosts: sshhosts.Bed, run: UserRun) -> None:
    """`grow --hosts` adds a node of a group on a new host (Terraform starts only it; the
    head counts it in its group), `shrink` stops exactly it, `down` removes the rest."""
    h1, h2, h3 = (h.ip for h in ssh_hosts.hosts)
    body = (
        f'target = "ssh"\ncpus_per_node = 1\njoin_timeout_s = 120\n'
        f'rendezvous = "{(run.root / "rdv").as_uri()}"\n'
        f'[[groups]]\nname = "cpu"\ncpus_per_node = 2\n' + _ssh_section(ssh_hosts, hosts=[h1, h2])
    )
    up = _syndeo(run, "up", "--config", str(run.config(body)))
    assert up.returncode == 0, up.stderr[-3000:]
    cid = up.stdout.split("Cluster ", 1)[1].split(" ", 1)[0]
    try:
        head_pid = _nodes_on(ssh_hosts, 0)
        assert head_pid and _nodes_on(ssh_hosts, 1) and not _nodes_on(ssh_hosts, 2)
        refused = _syndeo(run, "grow", "--cluster-id", cid, "--group", "cpu", "--hosts", h2)
        assert refused.returncode == 2 and f"host {h2} already runs a node" in refused.stderr
        grow = _syndeo(
            run, "grow", "--cluster-id", cid, "--group", "cpu", "--hosts", h3, "--wait-s", "180"
        )
        assert grow.returncode == 0, grow.stderr[-3000:]
        assert f"rank 2 on {h3}" in grow.stdout + grow.stderr
        assert "group cpu has 2 node(s)" in grow.stdout + grow.stderr
        assert _nodes_on(ssh_hosts, 2)
        assert _nodes_on(ssh_hosts, 0) == head_pid  # the running nodes were not touched
        shrink = _syndeo(run, "shrink", "--cluster-id", cid, "--group", "cpu")
        assert shrink.returncode == 0, shrink.stderr[-3000:]
        assert f"rank 2 on {h3}" in shrink.stdout + shrink.stderr
        deadline = time.monotonic() + 30
        while _nodes_on(ssh_hosts, 2) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not _nodes_on(ssh_hosts, 2)
        assert _nodes_on(ssh_hosts, 0) == head_pid and _nodes_on(ssh_hosts, 1)
    finally:
        down = _syndeo(run, "down", "--cluster-id", cid)
    assert down.returncode == 0, down.stderr[-3000:]
    _assert_clean(ssh_hosts, run)


# ------------------------------------------------------------- other users of a host
OTHER_USER = "nobody"  # a second local user of every host (they share this machine's /tmp)


def test_a_failing_start_leaves_nothing_another_user_can_read_or_write(
    ssh_hosts: sshhosts.Bed, bed_s3: Server, run: UserRun
) -> None:
    """Issue 22, item 1: the start script carries the node's environment, bucket
    credentials included.  Terraform's remote-exec left it in /tmp/terraform_<n>.sh,
    mode 0777, whenever a start failed; the module now pipes it over ssh."""
    make_bucket(bed_s3, "ssh-other")
    secret = f"s3cret-{uuid.uuid4().hex}"
    env = {**run.env, **bed_s3.env, "AWS_SECRET_ACCESS_KEY": secret}  # moto takes any key
    # A node directory the login cannot create: every start fails at its mkdir.
    body = _body(run, ssh_hosts, "s3://ssh-other/syndeo").replace(
        "connect_timeout_s = 20\n", 'connect_timeout_s = 20\nhost_dir = "/proc/syndeo-nope"\n'
    )
    started = int(time.time()) - 1
    proc = run.start(body, env)
    outcome = UserRun.finish(proc, timeout=600)
    assert outcome["exit_code"] != 0 and "terraform apply failed" in outcome["error"], outcome
    assert secret not in json.dumps(outcome)
    # What the other user sees of ours, written since the start, where hosts keep
    # scratch files (the hosts share this machine's /tmp; their home dirs are 0700).
    dirs = [
        "/tmp",
        "/var/tmp",
        "/dev/shm",
        str(sshhosts.HOST_DISK),
        f"/home/{CI_USER}",
        *(str(ssh_hosts.disk(h)) for h in ssh_hosts.hosts),
    ]

    def other_finds(test: str) -> list[str]:
        found = subprocess.run(
            [
                "runuser",
                "-u",
                OTHER_USER,
                "--",
                "find",
                *dirs,
                "-xdev",
                "-user",
                CI_USER,
                "-newermt",
                f"@{started}",
                "-type",
                "f",
                test,
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert found.returncode in (0, 1), found.stderr  # 1: a dir it may not enter
        assert "-newermt" not in found.stderr, found.stderr
        return found.stdout.split()

    assert other_finds("-writable") == []
    for path in other_finds("-readable"):
        with contextlib.suppress(OSError):
            assert secret not in Path(path).read_text(errors="replace"), path
    scripts = [p for p in Path("/tmp").glob("terraform_*.sh") if p.stat().st_mtime >= started]
    assert not scripts, f"remote-exec scripts left in /tmp: {scripts}"
    _assert_clean(ssh_hosts, run)


def _kill_node_on(bed: sshhosts.Bed, host: sshhosts.SshHost, cid: str) -> int:
    """SIGKILL every process of cluster ``cid`` on ``host`` (its node, Ray, Ray's workers):
    the node dies as it would with a crash, nothing of it gets to say goodbye."""
    killed = 0
    for pid in netns.netns_pids(host.netns):
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
            p = psutil.Process(pid)
            if p.environ().get("SYNDEO_CLUSTER_ID") == cid:
                p.kill()
                killed += 1
    return killed


def test_a_killed_node_is_started_again_on_its_host(ssh_hosts: sshhosts.Bed, run: UserRun) -> None:
    """[recovery] replace_lost on hosts: a worker's node killed mid-benchmark is started
    again on the same host (its terraform_data re-created: stop, then start), joins the
    running head, and the benchmark's count stays exact."""
    cid = f"ssh-recover-{uuid.uuid4().hex[:6]}"
    body = _body(run, ssh_hosts).replace(BENCH, "[bench]\nsamples_per_cpu = 30000\nrepeats = 3\n")
    body = f'cluster_id = "{cid}"\n' + body.replace(
        "[ssh]\n", "[recovery]\nreplace_lost = true\nmax_replacements = 1\n[ssh]\n"
    )
    proc = _launcher(run, body)
    try:
        status = run.root / "rdv" / cid / "a0" / "status.json"
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError, ValueError):
                st = json.loads(status.read_text())
                if st.get("phase") == "running" and st.get("progress"):
                    break  # the benchmark samples on every node
            assert proc.poll() is None, proc.communicate()[1][-3000:]
            time.sleep(0.3)
        else:
            raise AssertionError("the benchmark never started running")
        assert _kill_node_on(ssh_hosts, ssh_hosts.hosts[2], cid) >= 2  # the node and its Ray
        _out, err = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            launcher_of(proc).send_signal(signal.SIGINT)
            proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-3000:]
    assert "rank 2 lost; started a replacement" in err, err[-3000:]
    result_dir = run.results / cid
    [env] = json.loads((result_dir / "result.json").read_text())["results"]
    assert env["samples_counted"] == env["samples_requested"] == 30000 * 3
    summary = json.loads((result_dir / "deploy.json").read_text())
    assert summary["lost_ranks"] == [2]
    [event] = summary["recovery"]
    assert event["replaced"] == 'rank 2 (terraform_data.node["2"] re-created)', event
    assert event["lost_s"] <= event["replaced_s"] <= event["joined_s"]
    # Started again on its own host: the third host's node is the one that came back.
    assert 'terraform_data.node["2"]: Creation complete' in _terraform_log(run)
    print("ssh: lost -> replacement joined, s:", event["replacement_joined_after_s"])
    print("repeats, steps/s:", [r["steps_per_s"] for r in env["syndeo"]["repeats"]])
    print("benchmark: node losses", json.dumps(env["node_losses"]))
    _assert_clean(ssh_hosts, run)


# Two one-CPU tasks on two nodes at once: the head (one CPU) alone cannot hold them, so
# Ray's autoscaler asks for a node of the `auto` group, which the watcher adds on the
# group's pool host.
SPREAD = """\
import ray
from ray.util.placement_group import placement_group
ray.init()
pg = placement_group([{"CPU": 1}] * 2, strategy="STRICT_SPREAD")
ray.get(pg.ready(), timeout=240)
print("nodes", len([n for n in ray.nodes() if n["Alive"]]), flush=True)
"""


def test_a_group_follows_demand_on_its_pool_of_hosts(ssh_hosts: sshhosts.Bed, run: UserRun) -> None:
    """`max_nodes` with `[groups.ssh] pool`: a job that needs a second node makes the
    watcher add one on the pool's host (Terraform, as `grow --hosts` does); idle for the
    idle timeout, it is let go; nothing else on that host is touched."""
    h1, h2, _ = (h.ip for h in ssh_hosts.hosts)
    body = (
        f'target = "ssh"\ncpus_per_node = 1\njoin_timeout_s = 120\nidle_timeout_s = 10\n'
        f'rendezvous = "{(run.root / "rdv").as_uri()}"\n'
        f'[[groups]]\nname = "head"\n'
        f'[[groups]]\nname = "auto"\nmax_nodes = 1\nssh = {{ pool = ["{h2}"] }}\n'
        + _ssh_section(ssh_hosts, hosts=[h1])
    )
    job = run.root / "job"
    job.mkdir()
    (job / "spread.py").write_text(SPREAD)
    give_to_ci_user(job)
    give_to_ci_user(job / "spread.py")
    up = _syndeo(run, "up", "--config", str(run.config(body)))
    assert up.returncode == 0, up.stderr[-3000:]
    cid = up.stdout.split("Cluster ", 1)[1].split(" ", 1)[0]
    try:
        assert _nodes_on(ssh_hosts, 0) and not _nodes_on(ssh_hosts, 1)  # at its minimum
        done = _syndeo(
            run,
            *("submit", "--cluster-id", cid, "--workdir", str(job)),
            *("--follow", "--", "python", "spread.py"),
        )
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        assert "nodes 2" in done.stdout
        log = run.home / "clusters" / cid / "watch.log"
        # (The node may join and the job end before the watcher has logged the start.)
        deadline = time.monotonic() + 60
        while f"started rank 1 on {h2}" not in log.read_text() and time.monotonic() < deadline:
            time.sleep(1)
        assert f"group auto: started rank 1 on {h2}" in log.read_text(), log.read_text()
        deadline = time.monotonic() + 120
        while "let go" not in log.read_text() and time.monotonic() < deadline:
            time.sleep(1)
        assert f"group auto: let go rank 1 on {h2}" in log.read_text(), log.read_text()
        assert not _nodes_on(ssh_hosts, 1) and _nodes_on(ssh_hosts, 0)
    finally:
        down = _syndeo(run, "down", "--cluster-id", cid)
    assert down.returncode == 0, down.stderr[-3000:]
    _assert_clean(ssh_hosts, run)
