"""The paths a node uses on its host, and the image it runs, on the SSH bed.

``[ssh] host_dir`` (where the node's environment is written and sourced) and
``[ssh] remote_image_dir`` were used as given: a level another user of the host can
write let them swap the ``node.env`` the node sources or the image it runs.  Now every
level is checked on the host (terraform/ssh/securedir.sh) before anything is written
there.  And the image, checked at upload only, is checked again by the node's start
(terraform/modules/node/files/syndeo-node) against the digest the launcher chose.
"""

from __future__ import annotations

import contextlib
import json
import signal
import threading
import time
import uuid
from pathlib import Path

import psutil
import pytest

from syndeo.image.manifest import image_digest
from testbeds import netns, sshhosts
from testbeds.users import CI_USER, UserRun, give_to_ci_user
from tests.support.helpers import launcher_of
from tests.support.ssh import assert_clean as _assert_clean
from tests.support.ssh import body as _body
from tests.support.ssh import launcher as _launcher
from tests.support.ssh import terraform_log as _terraform_log

pytestmark = [pytest.mark.ssh, pytest.mark.slow]


def test_a_host_dir_others_can_write_is_refused_before_anything_is_written(
    ssh_hosts: sshhosts.Bed, run: UserRun
) -> None:
    shared = run.root / "shared"
    shared.mkdir()
    give_to_ci_user(shared)
    shared.chmod(0o777)  # anyone may rename what the node would source below it
    body = _body(run, ssh_hosts).replace(
        "connect_timeout_s = 20\n", f'connect_timeout_s = 20\nhost_dir = "{shared}/syndeo"\n'
    )
    outcome = run.deploy(body)
    assert outcome["exit_code"] != 0, outcome
    error = outcome["error"]
    assert "\n" not in error, error
    assert f"refusing [ssh] host_dir {shared}/syndeo/clusters/" in error, error
    assert f"{shared} is writable by others without the sticky bit" in error, error
    assert f"chmod go-w {shared}" in error, error
    assert list(shared.iterdir()) == []  # nothing written there, on any host
    assert not list((run.root / "rdv").glob("*/*/*"))  # and no node started
    _assert_clean(ssh_hosts, run)


def _kill_node(host: sshhosts.SshHost) -> int:
    """SIGKILL everything of the CI user's on ``host`` but sshd (only this cluster's node
    runs there): the node, its container and Apptainer's squashfuse mount, as in a crash.
    (Not by the node's variables: a container's processes no longer carry them.)"""
    killed = 0
    for pid in netns.netns_pids(host.netns):
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
            p = psutil.Process(pid)
            if p.username() == CI_USER and p.name() != "sshd":
                p.kill()
                killed += 1
    return killed


def test_an_image_replaced_on_a_host_is_refused_when_its_node_starts(
    ssh_hosts: sshhosts.Bed, run: UserRun, sif: Path
) -> None:
    """The cluster starts with the uploaded image; then host 3's copy is replaced and
    its node killed.  The replacement's start (same host, same upload: the image is
    not uploaded again) refuses the swapped SIF, and the launcher says so."""
    cid = f"ssh-swap-{uuid.uuid4().hex[:6]}"
    body = _body(run, ssh_hosts, extra=f'container = "{sif}"\n').replace(
        "[bench]\nsamples_per_cpu = 200\nrepeats = 1\n",
        "[bench]\nsamples_per_cpu = 30000\nrepeats = 3\n",
    )
    body = f'cluster_id = "{cid}"\n' + body.replace(
        "[ssh]\n", "[recovery]\nreplace_lost = true\nmax_replacements = 1\n[ssh]\n"
    )
    digest = image_digest(sif).removeprefix("sha256:")
    proc = _launcher(run, body)
    stderr = proc.stderr
    assert stderr is not None
    # The launcher's words as they come (read on: a full pipe would stall it).
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(stderr.readline, "")))
    reader.start()
    try:
        status = run.root / "rdv" / cid / "a0" / "status.json"
        deadline = time.monotonic() + 420
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError, ValueError):
                st = json.loads(status.read_text())
                if st.get("phase") == "running" and st.get("progress"):
                    break
            assert proc.poll() is None, "".join(lines)[-3000:]
            time.sleep(0.3)
        else:
            raise AssertionError("the benchmark never started running")
        copy = ssh_hosts.disk(ssh_hosts.hosts[2]) / "images" / f"{digest}.sif"
        swapped = copy.with_name("swapped.part")
        swapped.write_bytes(b"not the image the launcher uploaded\n")
        give_to_ci_user(swapped)
        swapped.replace(copy)
        assert _kill_node(ssh_hosts.hosts[2]) >= 2  # the node and its Ray
        # The replacement is refused; once the launcher has said so, the rest of the
        # benchmark (on two nodes) is not needed: Ctrl-C, which destroys the cluster.
        deadline = time.monotonic() + 300
        while "its replacement could not start" not in " ".join("".join(lines).split()):
            assert time.monotonic() < deadline, "".join(lines)[-3000:]
            assert proc.poll() is None, "".join(lines)[-3000:]
            time.sleep(0.3)
    finally:
        if proc.poll() is None:
            launcher_of(proc).send_signal(signal.SIGINT)
            proc.wait(timeout=300)
        reader.join(timeout=60)
    # The launcher's console wraps long lines.
    said = " ".join("".join(lines).split())
    assert "rank 2 lost; its replacement could not start: terraform apply failed" in said, said
    assert "syndeo-node: refusing image" in said, said[-3000:]
    # The node's own line, as its host names the image, in the start's output.
    used = f"{sshhosts.HOST_DISK}/images/{digest}.sif"
    refused = [ln for ln in _terraform_log(run).splitlines() if "syndeo-node: refusing" in ln]
    assert refused, _terraform_log(run)[-3000:]
    assert f"syndeo-node: refusing image {used}: its sha256 is" in refused[0], refused
    assert f"not the launcher's {digest} (replaced since it was uploaded?)" in refused[0]
    _assert_clean(ssh_hosts, run)
