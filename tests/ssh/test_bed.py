"""The SSH test bed itself: real logins, own names/addresses/disks, faults, clean teardown.

The ssh target's tests stand on this bed, so it is tested on its own first.
"""

from __future__ import annotations

import fcntl
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from syndeo.core.errors import TargetError
from testbeds import netns, sshhosts
from testbeds.objectstores import Server
from testbeds.procs import pid_alive

pytestmark = pytest.mark.ssh

ROOT = Path(__file__).resolve().parents[2]


def _ok(bed: sshhosts.Bed, host: sshhosts.SshHost, command: str) -> str:
    result = sshhosts.ssh(bed, host, command)
    assert result.returncode == 0, f"{host.name}: {command!r} failed: {result.stderr}"
    return result.stdout


def _as_user(bed: sshhosts.Bed, argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["runuser", "-u", bed.user, "--", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_user_logs_in_to_each_host_which_has_its_own_name_and_address(
    ssh_hosts: sshhosts.Bed,
) -> None:
    bed = ssh_hosts
    assert len({h.ip for h in bed.hosts}) == len({h.name for h in bed.hosts}) == 3
    for host in bed.hosts:
        out = _ok(bed, host, "hostname; id -un; ip -4 -o addr show dev eth0; ip -4 route")
        name, user, addr, *routes = out.splitlines()
        assert name == host.name
        assert user == bed.user
        assert f"inet {host.ip}/{bed.prefix} " in addr
        # Nothing leaves the machine: the only route is the bed's own subnet.
        assert routes and not any(r.startswith("default") for r in routes), routes


def test_login_is_key_only_and_host_keys_are_checked(
    ssh_hosts: sshhosts.Bed, tmp_path: Path
) -> None:
    bed = ssh_hosts
    host = bed.hosts[0]
    target = f"{bed.user}@{host.ip}"
    # The server offers nothing but public keys (no password, no keyboard-interactive).
    no_key = [o for o in bed.ssh_options() if not o.startswith(("-i", str(bed.key)))]
    methods = "PreferredAuthentications=password,keyboard-interactive,publickey"
    denied = _as_user(bed, ["ssh", *no_key, "-o", methods, "-F", "/dev/null", target, "true"])
    assert denied.returncode == 255
    assert "Permission denied (publickey)." in denied.stderr
    # A host key other than the one on record is refused (StrictHostKeyChecking=yes).
    wrong = tmp_path / "known_hosts"
    wrong.write_text(f"{host.ip} {bed.hosts[1].host_key}\n")
    wrong.chmod(0o644)
    tmp_path.chmod(0o755)
    opts = [o.replace(str(bed.known_hosts), str(wrong)) for o in bed.ssh_options()]
    spoofed = _as_user(bed, ["ssh", *opts, target, "true"])
    assert spoofed.returncode == 255
    assert "Host key verification failed." in spoofed.stderr
    # root may not log in even with the right key.
    root = subprocess.run(
        ["ssh", *bed.ssh_options(), f"root@{host.ip}", "true"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert root.returncode == 255 and "Permission denied" in root.stderr


def test_each_host_has_a_disk_of_its_own(ssh_hosts: sshhosts.Bed) -> None:
    bed = ssh_hosts
    one, two = bed.hosts[0], bed.hosts[1]
    probe = f"{sshhosts.HOST_DISK}/probe-{uuid.uuid4().hex[:8]}"
    _ok(bed, one, f"echo written-on-{one.name} > {probe}")
    assert _ok(bed, one, f"cat {probe}").strip() == f"written-on-{one.name}"
    assert sshhosts.ssh(bed, two, f"test -e {probe}").returncode == 1
    # Seen from the machine it lives in host one's directory only.
    name = Path(probe).name
    assert (bed.disk(one) / name).read_text().strip() == f"written-on-{one.name}"
    assert not (bed.disk(two) / name).exists()
    assert not Path(probe).exists()
    _ok(bed, one, f"rm {probe}")


def test_hosts_reach_each_other_over_the_bridge(ssh_hosts: sshhosts.Bed) -> None:
    bed = ssh_hosts
    one, two = bed.hosts[0], bed.hosts[1]
    # The way a node reaches the head: TCP from one host to another's address.
    banner = _ok(bed, one, f"exec 3<>/dev/tcp/{two.ip}/22 && head -c 7 <&3")
    assert banner == "SSH-2.0"


def test_a_refusing_host_fails_cleanly_and_the_others_keep_working(
    ssh_hosts: sshhosts.Bed,
) -> None:
    bed = ssh_hosts
    bad, good = bed.hosts[1], bed.hosts[2]
    try:
        sshhosts.refuse(bed, bad)
        refused = sshhosts.ssh(bed, bad, "true")
        assert refused.returncode == 255
        assert refused.stderr.strip().splitlines() == [
            f"ssh: connect to host {bad.ip} port 22: Connection refused"
        ]
        assert _ok(bed, good, "hostname").strip() == good.name
        sshhosts.restore(bed, bad)
        assert _ok(bed, bad, "hostname").strip() == bad.name

        sshhosts.refuse(bed, bad, how="auth")
        denied = sshhosts.ssh(bed, bad, "true")
        assert denied.returncode == 255
        assert "Permission denied (publickey)." in denied.stderr
    finally:
        sshhosts.restore(bed, bad)
    assert _ok(bed, bad, "hostname").strip() == bad.name


def test_s3_emulator_on_the_bridge_is_reachable_from_every_host(
    ssh_hosts: sshhosts.Bed, bed_s3: Server
) -> None:
    bed = ssh_hosts
    assert bed_s3.host == bed.host_ip
    for host in bed.hosts:
        url = f"{bed_s3.endpoint}/moto-api/"
        code = _ok(bed, host, f"curl -s -o /dev/null -w '%{{http_code}}' {url}")
        assert code == "200", f"{host.name}: {code}"
    # A host's 127.0.0.1 is its own loopback: the store is reached through the bridge only.
    local = sshhosts.ssh(bed, bed.hosts[0], f"curl -s -m 5 http://127.0.0.1:{bed_s3.port}/")
    assert local.returncode == 7  # curl: failed to connect


def test_up_is_idempotent_and_a_different_size_is_one_clear_error(
    ssh_hosts: sshhosts.Bed,
) -> None:
    bed = ssh_hosts
    pids = [sshhosts.sshd_pid(bed, h) for h in bed.hosts]
    again = sshhosts.up(bed.base, n=len(bed.hosts))
    assert again == bed
    assert [sshhosts.sshd_pid(bed, h) for h in bed.hosts] == pids
    with pytest.raises(TargetError, match="already up") as err:
        sshhosts.up(bed.base, n=len(bed.hosts) + 1)
    assert "\n" not in str(err.value)
    assert sshhosts.is_up(bed.base)


def test_the_session_holds_the_bed_exclusively(ssh_hosts: sshhosts.Bed) -> None:
    # Another test run of this checkout would wait here instead of tearing the hosts away.
    with sshhosts.session_lock(ssh_hosts.base).open("a") as fh, pytest.raises(BlockingIOError):
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)


def test_a_second_bed_lives_beside_the_first_and_down_removes_all_of_it(
    ssh_hosts: sshhosts.Bed,
) -> None:
    first = ssh_hosts
    # Its own parent dir: the bed keeps its lock file beside its base.
    parent = ROOT / ".testbed" / f"second-{uuid.uuid4().hex[:6]}"
    base = parent / "ssh"
    try:
        second = sshhosts.up(base, n=2)
        # Its own names and subnet, so neither bed can disturb the other.
        assert second.bridge != first.bridge
        assert second.host_ip.rsplit(".", 1)[0] != first.host_ip.rsplit(".", 1)[0]
        assert not {h.netns for h in second.hosts} & {h.netns for h in first.hosts}
        host = second.hosts[0]
        # A process the user left behind on a host (as a crashed node would).
        sleeper = int(_ok(second, host, "nohup sleep 600 >/dev/null 2>&1 & echo $!"))
        # nohup may not have exec'd sleep yet: either command line is this process.
        listed = sshhosts.host_processes(second, host, second.user)
        assert {f"{sleeper} sleep 600", f"{sleeper} nohup sleep 600"} & set(listed), listed
        assert sshhosts.leftovers(base)
    finally:
        sshhosts.down(base)
    assert sshhosts.leftovers(base) == []
    assert not netns.list_netns(f"sysh{second.tag}-")
    assert not netns.link_exists(second.bridge)
    assert not any(netns.link_exists(h.veth) for h in second.hosts)
    assert not base.exists()
    assert not pid_alive(sleeper)
    gone = subprocess.run(["pgrep", "-f", str(base)], capture_output=True, text=True, check=False)
    assert gone.stdout == "", f"processes of the removed bed: {gone.stdout}"
    sshhosts.down(base)  # safe to repeat
    shutil.rmtree(parent)
    # The first bed did not notice.
    for h in first.hosts:
        assert _ok(first, h, "hostname").strip() == h.name
