"""A bed of real SSH hosts on one machine, for testing the ssh target end to end.

Every host is a network namespace with its own address on a bridge this bed owns
(no default route: nothing leaves the machine), its own hostname and mount
namespace, its own "disk" (a private directory bind-mounted over
:data:`HOST_DISK`), and Debian's real ``/usr/sbin/sshd`` with its own host key and
config: key-only login for the unprivileged test user ``syndeo-ci``, no root, no
passwords, no PAM.

Scoped to one checkout: the state lives under ``base`` (by default
``<checkout>/.testbed/ssh``, git-ignored), and the bridge, veth and namespace names
carry a short hash of ``base``, so two checkouts on one machine run two beds side
by side.  The bed's ``/24`` is chosen under a machine-wide lock among the
``10.98.X.0/24`` nobody else uses.  :func:`down` kills only the processes the bed
started (its sshd pid files and the processes inside its own namespaces) and
removes only its own links, namespaces and directory.

Root only.  Typical use::

    bed = sshhosts.up(base, n=3)
    out = sshhosts.ssh(bed, bed.hosts[0], "hostname")   # as syndeo-ci, over real ssh
    sshhosts.refuse(bed, bed.hosts[1])                   # that host now refuses SSH
    sshhosts.restore(bed, bed.hosts[1])
    sshhosts.down(base)

or ``with sshhosts.session(base, n=3) as bed: ...`` (exclusive, always torn down).

Clients outside this module use :attr:`Bed.key`, :attr:`Bed.known_hosts`,
:attr:`Bed.user` and :meth:`Bed.ssh_options` (strict host key checking against the
bed's own known_hosts file).

Two machine-wide things are created once and left in place, because every bed
(and any system sshd) shares them: sshd's privilege-separation directory
``/run/sshd`` and the empty mount point :data:`HOST_DISK`.  The subnet lock file
lives in ``/run/lock``.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import pwd
import shlex
import shutil
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from syndeo.core.errors import TargetError
from testbeds import netns
from testbeds.procs import pid_alive, read_pid, run, terminate, wait_until

CI_USER = "syndeo-ci"
SSHD = Path("/usr/sbin/sshd")
# Each host's private directory appears here inside that host (its "local disk").
HOST_DISK = Path("/var/lib/syndeo-host")
# sshd's compiled-in privilege separation directory (Debian: created by the service).
PRIVSEP_DIR = Path("/run/sshd")
# Serialises subnet choice between beds of different checkouts.
NET_LOCK = Path("/run/lock/syndeo-testbed-net.lock")
SUBNET_PREFIX = "10.98"  # beds use 10.98.X.0/24; the local Slurm cluster 10.99.0.0/24
FIRST_HOST_OCTET = 11
MAX_HOSTS = 100
SETUP_HINT = "run scripts/setup.d/ssh.sh (as root) first"


class SshHost(BaseModel):
    """One host of the bed, as clients see it."""

    model_config = ConfigDict(frozen=True)
    name: str  # its hostname (inside its UTS namespace)
    ip: str  # its address on the bed's bridge; sshd listens on ip:22
    netns: str  # /run/netns/<netns>
    veth: str  # host-side end of its link
    host_key: str  # sshd's public host key, "ssh-ed25519 AAAA…" (Terraform's host_key)


class Bed(BaseModel):
    """What :func:`up` created; persisted as ``<base>/state.json``."""

    base: Path
    tag: str
    bridge: str
    host_ip: str  # the machine's address on the bridge (servers for the hosts bind here)
    prefix: int = 24
    user: str = CI_USER
    hosts: list[SshHost] = Field(min_length=1)

    @property
    def key(self) -> Path:
        """The test user's private ed25519 key (owned by that user, 0600)."""
        return self.base / "client" / "id_ed25519"

    @property
    def public_key(self) -> Path:
        return self.base / "client" / "id_ed25519.pub"

    @property
    def known_hosts(self) -> Path:
        """Every host's key, by IP and name: use with ``StrictHostKeyChecking=yes``."""
        return self.base / "client" / "known_hosts"

    def host(self, name: str) -> SshHost:
        for h in self.hosts:
            if h.name == name:
                return h
        raise TargetError(f"no host named {name!r} in the SSH test bed ({self.base})")

    def host_dir(self, host: SshHost) -> Path:
        """The bed-side directory of ``host`` (config, host key, pid file, log)."""
        return self.base / "hosts" / host.name

    def disk(self, host: SshHost) -> Path:
        """Where ``host``'s :data:`HOST_DISK` lives, seen from the machine."""
        return self.host_dir(host) / "disk"

    def sshd_log(self, host: SshHost) -> Path:
        return self.host_dir(host) / "sshd.log"

    def ssh_options(self) -> list[str]:
        """``ssh`` options for a non-interactive, key-only, strictly verified login."""
        return [
            "-i",
            str(self.key),
            "-o",
            "BatchMode=yes",
            "-o",
            "IdentitiesOnly=yes",
            "-o",
            "PreferredAuthentications=publickey",
            "-o",
            "StrictHostKeyChecking=yes",
            "-o",
            f"UserKnownHostsFile={self.known_hosts}",
            "-o",
            "GlobalKnownHostsFile=/dev/null",
            "-o",
            "ConnectTimeout=5",
            "-o",
            "LogLevel=ERROR",
        ]

    def ssh_argv(self, host: SshHost, command: str) -> list[str]:
        """argv of ``ssh`` running ``command`` on ``host`` as :attr:`user` (run it as that user)."""
        return ["ssh", *self.ssh_options(), f"{self.user}@{host.ip}", command]


# --------------------------------------------------------------------------- names
def default_base() -> Path:
    """``<checkout>/.testbed/ssh`` of the checkout this module was imported from."""
    return Path(__file__).resolve().parents[1] / ".testbed" / "ssh"


def tag_for(base: Path) -> str:
    """Six hex digits naming this bed's links and namespaces (a hash of ``base``)."""
    return hashlib.sha256(str(base.resolve()).encode()).hexdigest()[:6]


def _names(tag: str) -> tuple[str, str]:
    """(bridge, namespace prefix) of the bed with ``tag``."""
    return f"sysh{tag}", f"sysh{tag}-"


def _veth(tag: str, i: int) -> str:
    return netns.check_ifname(f"syh{tag}h{i}")


# --------------------------------------------------------------------------- helpers
def _require_root() -> None:
    if os.geteuid() != 0:
        raise TargetError("the SSH test bed needs root (namespaces, sshd): run with sudo")


def _user(user: str) -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(user)
    except KeyError:
        raise TargetError(f"test user {user!r} does not exist: {SETUP_HINT}") from None


def _chown(path: Path, pw: pwd.struct_passwd) -> None:
    os.chown(path, pw.pw_uid, pw.pw_gid)


@contextlib.contextmanager
def _flock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _bed_lock(base: Path) -> Path:
    # Beside base, not inside: down() removes base.
    return base.parent / f".{base.name}.lock"


def session_lock(base: Path) -> Path:
    """The lock a :func:`session` holds for as long as it uses the bed under ``base``."""
    return base.parent / f".{base.name}.session.lock"


def _keygen(path: Path, comment: str) -> None:
    if not path.exists():
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)])


def _pick_subnet(tag: str, bridge: str) -> str:
    """A ``10.98.X`` whose /24 no other interface uses, starting from the tag's own X."""
    start = int(tag, 16) % 256
    for step in range(256):
        subnet = f"{SUBNET_PREFIX}.{(start + step) % 256}"
        if netns.subnet_in_use(f"{subnet}.0/24", except_dev=bridge) is None:
            return subnet
    raise TargetError(f"every {SUBNET_PREFIX}.X.0/24 is in use on this machine: no room for a bed")


def _tcp_open(ip: str, port: int = 22) -> bool:
    try:
        with socket.create_connection((ip, port), timeout=0.5):
            return True
    except OSError:
        return False


# --------------------------------------------------------------------------- state
def load(base: Path | None = None) -> Bed | None:
    """The bed recorded under ``base``, or None."""
    state = (base or default_base()) / "state.json"
    try:
        return Bed.model_validate_json(state.read_text())
    except (OSError, ValueError):
        return None


def _our_sshd(pid_file: Path) -> int | None:
    """The PID in ``pid_file`` if it is a live sshd started with the config beside it.

    A stale pid file (a crash, a reboot) may name some unrelated process by now:
    only a process whose command line names this very config is ours to signal.
    """
    pid = read_pid(pid_file)
    if pid is None or not pid_alive(pid):
        return None
    try:
        # The listener rewrites its title ("sshd: /usr/sbin/sshd -f CONF … [listener] …").
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    conf = str(pid_file.parent / "sshd_config").encode()
    return pid if cmdline.startswith((b"sshd", str(SSHD).encode())) and conf in cmdline else None


def sshd_pid(bed: Bed, host: SshHost) -> int | None:
    """PID of ``host``'s listening sshd if it runs, else None."""
    return _our_sshd(bed.host_dir(host) / "sshd.pid")


def is_up(base: Path | None = None) -> bool:
    """True if the bed exists and every host's sshd accepts connections."""
    bed = load(base)
    return bed is not None and all(
        sshd_pid(bed, h) is not None and _tcp_open(h.ip) for h in bed.hosts
    )


# --------------------------------------------------------------------------- up
def up(base: Path | None = None, n: int = 3, user: str = CI_USER, timeout: float = 30.0) -> Bed:
    """Bring up ``n`` SSH hosts under ``base`` and return them (idempotent).

    A bed already up with ``n`` hosts is returned as is (a host whose sshd was
    stopped by :func:`refuse` gets it back); a bed of another size is an error.
    On any failure everything this call created is removed again.
    """
    _require_root()
    base = (base or default_base()).resolve()
    if not 1 <= n <= MAX_HOSTS:
        raise TargetError(f"SSH test bed size must be 1..{MAX_HOSTS} hosts, got {n}")
    for tool in (str(SSHD), "ssh", "ssh-keygen", "ip", "nsenter", "unshare", "runuser"):
        if shutil.which(tool) is None:
            raise TargetError(f"{tool} not found: {SETUP_HINT}")
    pw = _user(user)
    with _flock(_bed_lock(base)):
        bed = load(base)
        if bed is not None and (len(bed.hosts) != n or bed.user != user):
            raise TargetError(
                f"an SSH test bed of {len(bed.hosts)} hosts for {bed.user} is already up in "
                f"{base}: bring it down first (testbeds.sshhosts.down)"
            )
        try:
            return _up(base, n, pw, bed, timeout)
        except BaseException:
            _down(base)
            raise


def _up(base: Path, n: int, pw: pwd.struct_passwd, bed: Bed | None, timeout: float) -> Bed:
    tag = tag_for(base)
    bridge, ns_prefix = _names(tag)
    for d in (base, base / "hosts"):
        d.mkdir(parents=True, exist_ok=True)
        os.chmod(d, 0o755)  # sshd reads authorized_keys as the user: keep the path traversable
    client = base / "client"
    client.mkdir(exist_ok=True)
    _chown(client, pw)
    os.chmod(client, 0o755)
    if bed is None:
        with _flock(NET_LOCK):
            subnet = _pick_subnet(tag, bridge)
            netns.bridge_up(bridge, f"{subnet}.1")
        hosts = []
        for i in range(1, n + 1):
            name = f"host{i}"
            hdir = base / "hosts" / name
            hdir.mkdir(exist_ok=True)
            _keygen(hdir / "ssh_host_ed25519_key", f"{name}@syndeo-testbed")
            hosts.append(
                SshHost(
                    name=name,
                    ip=f"{subnet}.{FIRST_HOST_OCTET - 1 + i}",
                    netns=f"{ns_prefix}{name}",
                    veth=_veth(tag, i),
                    host_key=_pubkey(hdir / "ssh_host_ed25519_key.pub"),
                )
            )
        bed = Bed(
            base=base, tag=tag, bridge=bridge, host_ip=f"{subnet}.1", user=pw.pw_name, hosts=hosts
        )
        (base / "state.json").write_text(bed.model_dump_json(indent=2))
    else:
        netns.bridge_up(bed.bridge, bed.host_ip, bed.prefix)

    _client_files(bed, pw)
    PRIVSEP_DIR.mkdir(mode=0o755, exist_ok=True)
    HOST_DISK.mkdir(mode=0o755, parents=True, exist_ok=True)
    hosts_file = base / "hosts" / "etc-hosts"
    lines = ["127.0.0.1 localhost", *(f"{h.ip} {h.name}" for h in bed.hosts)]
    hosts_file.write_text("\n".join(lines) + "\n")
    os.chmod(hosts_file, 0o644)
    for h in bed.hosts:
        netns.node_up(h.netns, h.veth, h.ip, bed.bridge, bed.prefix)
        _host_files(bed, h, pw)
        if sshd_pid(bed, h) is None:
            _start_sshd(bed, h, timeout)
    return bed


def _pubkey(path: Path) -> str:
    kind, blob, *_ = path.read_text().split()
    return f"{kind} {blob}"


def _client_files(bed: Bed, pw: pwd.struct_passwd) -> None:
    """The test user's key pair and the known_hosts file naming every host's key."""
    _keygen(bed.key, f"{bed.user}@syndeo-testbed")
    for f in (bed.key, bed.public_key):
        _chown(f, pw)
    os.chmod(bed.key, 0o600)  # ssh refuses a private key others can read
    os.chmod(bed.public_key, 0o644)
    lines = [f"{h.ip},{h.name} {h.host_key}" for h in bed.hosts]
    bed.known_hosts.write_text("\n".join(lines) + "\n")
    os.chmod(bed.known_hosts, 0o644)


def _host_files(bed: Bed, h: SshHost, pw: pwd.struct_passwd) -> None:
    """``h``'s sshd_config, authorized_keys and private disk (idempotent)."""
    hdir = bed.host_dir(h)
    os.chmod(hdir, 0o755)
    disk = bed.disk(h)
    disk.mkdir(exist_ok=True)
    _chown(disk, pw)
    os.chmod(disk, 0o755)
    _authorize(bed, h, True)
    conf = hdir / "sshd_config"
    conf.write_text(
        "\n".join(
            [
                "# SSH test-bed host (testbeds.sshhosts); not a system config.",
                f"ListenAddress {h.ip}:22",
                f"HostKey {hdir / 'ssh_host_ed25519_key'}",
                f"PidFile {hdir / 'sshd.pid'}",
                f"AuthorizedKeysFile {hdir / 'authorized_keys'}",
                f"AllowUsers {bed.user}",
                "PubkeyAuthentication yes",
                "PasswordAuthentication no",
                "KbdInteractiveAuthentication no",
                "PermitRootLogin no",
                "UsePAM no",
                # The bed lives in the checkout, which may sit below a world-writable dir
                # (/tmp: CI clones anywhere), and StrictModes then refuses every key.  The
                # bed writes its key files itself (root-owned, 0644) and nothing routes
                # to these hosts but our own bridge.
                "StrictModes no",
                "UseDNS no",
                "PrintMotd no",
                "X11Forwarding no",
                "PermitUserEnvironment no",
                "LogLevel VERBOSE",
                # Terraform's file provisioner speaks scp; others use sftp.
                "Subsystem sftp /usr/lib/openssh/sftp-server",
                "",
            ]
        )
    )
    run([str(SSHD), "-t", "-f", str(conf)])


def _authorize(bed: Bed, h: SshHost, allow: bool) -> None:
    keys = bed.host_dir(h) / "authorized_keys"
    keys.write_text(bed.public_key.read_text() if allow else "")
    os.chmod(keys, 0o644)


def _start_sshd(bed: Bed, h: SshHost, timeout: float) -> None:
    hdir = bed.host_dir(h)
    with contextlib.suppress(FileNotFoundError):
        (hdir / "sshd.pid").unlink()
    # Not `ip netns exec`: it remounts /sys.  The private mount namespace gives the
    # host its own /etc/hosts and disk; sshd daemonises and writes its pid file.
    inner = " && ".join(
        [
            f"hostname {shlex.quote(h.name)}",
            f"mount --bind {shlex.quote(str(bed.disk(h)))} {HOST_DISK}",
            f"mount --bind {shlex.quote(str(bed.base / 'hosts' / 'etc-hosts'))} /etc/hosts",
            f"exec {SSHD} -f {shlex.quote(str(hdir / 'sshd_config'))} "
            f"-E {shlex.quote(str(bed.sshd_log(h)))}",
        ]
    )
    run(
        [
            "nsenter",
            f"--net={netns.NETNS_DIR / h.netns}",
            "unshare",
            "--uts",
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            inner,
        ],
        timeout=timeout,
    )
    wait_until(
        lambda: True if sshd_pid(bed, h) is not None and _tcp_open(h.ip) else None,
        timeout,
        f"sshd of {h.name} ({h.ip}:22); log: {bed.sshd_log(h)}",
    )


# --------------------------------------------------------------------------- faults
def refuse(bed: Bed, host: SshHost, how: Literal["connection", "auth"] = "connection") -> None:
    """Make ``host`` refuse SSH: stop its sshd (connection refused), or drop the key (auth).

    Sessions already open stay open, as on a real machine whose sshd is stopped.
    :func:`restore` (or :func:`up`) undoes it.
    """
    if how == "auth":
        _authorize(bed, host, False)
        return
    kill_sshd(bed, host)


def kill_sshd(bed: Bed, host: SshHost) -> None:
    """Stop ``host``'s listening sshd (by its pid file) and wait until its port is closed."""
    pid = sshd_pid(bed, host)
    if pid is not None:
        terminate([pid], grace=5)
    wait_until(lambda: None if _tcp_open(host.ip) else True, 10, f"{host.name}:22 to close")


def restore(bed: Bed, host: SshHost, timeout: float = 30.0) -> None:
    """Undo :func:`refuse`: authorise the key again and start sshd if it is stopped."""
    _authorize(bed, host, True)
    if sshd_pid(bed, host) is None:
        _start_sshd(bed, host, timeout)


# --------------------------------------------------------------------------- use
def ssh(
    bed: Bed, host: SshHost, command: str, timeout: float = 60.0
) -> subprocess.CompletedProcess[str]:
    """Run ``command`` on ``host`` as the bed's user over real ssh (never raises on rc != 0)."""
    pw = _user(bed.user)
    env = {"HOME": pw.pw_dir, "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
    argv = [
        "runuser",
        "-u",
        bed.user,
        "--",
        "env",
        "-i",
        *(f"{k}={v}" for k, v in env.items()),
        *bed.ssh_argv(host, command),
    ]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)


def host_processes(bed: Bed, host: SshHost, user: str | None = None) -> list[str]:
    """``"pid cmdline"`` of every process on ``host`` (of ``user`` only, if given)."""
    uid = _user(user).pw_uid if user is not None else None
    out = []
    for pid in netns.netns_pids(host.netns):
        try:
            if uid is not None and os.stat(f"/proc/{pid}").st_uid != uid:
                continue
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").strip()
        except OSError:
            continue  # gone meanwhile
        out.append(f"{pid} {cmd.decode(errors='replace')}")
    return out


def leftovers(base: Path | None = None) -> list[str]:
    """What of the bed under ``base`` still exists (empty after :func:`down`)."""
    base = (base or default_base()).resolve()
    bridge, ns_prefix = _names(tag_for(base))
    found = [f"netns {ns}" for ns in netns.list_netns(ns_prefix)]
    found += [f"process {p}" for ns in netns.list_netns(ns_prefix) for p in netns.netns_pids(ns)]
    net = Path("/sys/class/net")
    links = sorted(p.name for p in net.iterdir()) if net.is_dir() else []
    veth_prefix = f"syh{tag_for(base)}h"
    found += [f"link {x}" for x in links if x == bridge or x.startswith(veth_prefix)]
    if base.exists():
        found.append(f"dir {base}")
    return found


# --------------------------------------------------------------------------- session
@contextlib.contextmanager
def session(base: Path | None = None, n: int = 3, user: str = CI_USER) -> Iterator[Bed]:
    """Exclusive use of the bed under ``base``: up on entry, always down on exit.

    A second session on the same ``base`` (another test run of this checkout) waits
    for the first instead of tearing its hosts away; leftovers of an interrupted
    session are cleared first.  Beds of other bases are never touched.
    """
    _require_root()
    base = (base or default_base()).resolve()
    with _flock(session_lock(base)):
        down(base)
        try:
            yield up(base, n=n, user=user)
        finally:
            down(base)


# --------------------------------------------------------------------------- down
def down(base: Path | None = None) -> None:
    """Stop every process the bed started and remove what it created.  Safe to repeat."""
    _require_root()
    base = (base or default_base()).resolve()
    with _flock(_bed_lock(base)):
        _down(base)


def _down(base: Path) -> None:
    tag = tag_for(base)
    bridge, ns_prefix = _names(tag)
    spaces = netns.list_netns(ns_prefix)
    # sshd and every session it started (the user's commands) live in the host's netns;
    # the pid files catch an sshd whose namespace is already gone.
    pids = [p for ns in spaces for p in netns.netns_pids(ns)]
    hosts_dir = base / "hosts"
    if hosts_dir.is_dir():
        pids += [p for f in hosts_dir.glob("*/sshd.pid") if (p := _our_sshd(f)) is not None]
    terminate(sorted(set(pids)))
    for ns in spaces:
        # The namespace is "<prefix>host<i>"; its veth follows from i.
        index = ns.removeprefix(f"{ns_prefix}host")
        netns.node_down(ns, _veth(tag, int(index)) if index.isdigit() else "")
    net = Path("/sys/class/net")
    if net.is_dir():  # veths of namespaces that vanished before state.json was written
        for link in net.iterdir():
            if link.name.startswith(f"syh{tag}h"):
                run(["ip", "link", "del", link.name], check=False)
    netns.bridge_down(bridge)
    shutil.rmtree(base, ignore_errors=True)
