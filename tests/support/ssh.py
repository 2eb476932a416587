"""The ssh bed's runs as the CI user: the config of a deploy on the bed's hosts, the
launcher, what it left (processes on the hosts, Terraform state, node files)."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from testbeds import sshhosts
from testbeds.users import CI_PYTHON, CI_USER, UserRun, as_user

BENCH = "[bench]\nsamples_per_cpu = 200\nrepeats = 1\n"


def ssh_section(
    bed: sshhosts.Bed, hosts: list[str] | None = None, extra: str = "", flags: bool = False
) -> str:
    """The [ssh] table; with ``flags`` its hosts and key are left to the command line."""
    hosts = hosts or [h.ip for h in bed.hosts]
    # With flags the file names a wrong login, host and key: only the flags can work.
    named = (
        'hosts = ["192.0.2.1"]\nuser = "nobody"\nkey = "/nonexistent"\n'
        if flags
        else f'hosts = {json.dumps(hosts)}\nkey = "{bed.key}"\n'
    )
    return (
        f'[ssh]\n{named}known_hosts = "{bed.known_hosts}"\n'
        f'python = "{CI_PYTHON}"\nconnect_timeout_s = 20\n'
        # Each host's own disk: the image is uploaded to every host separately.
        f'remote_image_dir = "{sshhosts.HOST_DISK}/images"\n{extra}'
    )


def body(
    run: UserRun, bed: sshhosts.Bed, rendezvous: str = "", extra: str = "", flags: bool = False
) -> str:
    rendezvous = rendezvous or (run.root / "rdv").as_uri()
    return (
        f'target = "ssh"\ncpus_per_node = 1\njoin_timeout_s = 120\nrendezvous = "{rendezvous}"\n'
        f"{extra}{BENCH}{ssh_section(bed, flags=flags)}"
    )


def assert_clean(bed: sshhosts.Bed, run: UserRun) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        left = {h.name: sshhosts.host_processes(bed, h, CI_USER) for h in bed.hosts}
        if not any(left.values()):
            break
        time.sleep(0.5)
    assert not any(left.values()), f"processes left on the hosts: {left}"
    for state in (run.home / "clusters").glob("*/terraform/terraform.tfstate"):
        resources = json.loads(state.read_text()).get("resources", [])
        assert resources == [], f"{state} still holds {resources}"
    # This run's clusters left no node files on the hosts (the hosts share /home here).
    ours = [p.name for p in (run.home / "clusters").glob("ssh-*")]
    host_side = Path(f"/home/{CI_USER}/.syndeo/clusters")
    assert not [p for cid in ours for p in host_side.glob(f"{cid}/*/node.pid")]


def launcher(run: UserRun, body: str) -> subprocess.Popen[str]:
    cfg = run.config(body)
    return subprocess.Popen(
        as_user([str(CI_PYTHON), "-m", "syndeo", "deploy", "--config", str(cfg)], run.env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=run.root,
    )


def terraform_log(run: UserRun) -> str:
    return "\n".join(
        p.read_text(errors="replace")
        for p in (run.home / "clusters").glob("*/terraform/terraform.log")
    )
