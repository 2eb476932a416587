"""A real multi-node Slurm cluster on one machine, to try and test the Slurm target.

``up()`` starts munged, slurmctld and one slurmd per node; every node lives in its
own network namespace (own hostname and IP on a host bridge, no default route) and
its own UTS/mount namespace (own /etc/hosts).  ``down()`` cancels jobs, kills every
process in the node namespaces, stops the daemons and removes namespaces, links,
cgroups and the state directory, in the order that leaves nothing behind.

Root only.  State lives under ``/run/syndeo-slurm`` (``state.json`` records
what was created so ``down()`` works from any process).

Run as root, so nothing an unprivileged user can touch may steer it: the base must be
a real directory that root owns and only root can write, below directories of the
same kind (``/var/tmp/...`` is refused: anyone could have made it, or a link in its
place); pid files are read without following links and only a live slurmctld, slurmd
or munged above pid 1 is ever signalled; directories are chowned and chmodded through
descriptors opened without following links; the munge key is created 0400.
"""

from __future__ import annotations

import contextlib
import functools
import os
import pwd
import shutil
import signal
import socket
import stat
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from pydantic import BaseModel, ConfigDict, Field

from syndeo.core.errors import TargetError
from testbeds import netns
from testbeds.procs import pid_alive, run, terminate, wait_until

DEFAULT_BASE = Path("/run/syndeo-slurm")
NETNS_PREFIX = "syndeo-"
BRIDGE = "sybr0"
SLURM_CONF_LINK = Path("/etc/slurm/slurm.conf")
CI_USER = "syndeo-ci"
CGROUP_ROOT = Path("/sys/fs/cgroup")
GPU_PARTITION = "gpu"


class LocalNode(BaseModel):
    model_config = ConfigDict(frozen=True)
    name: str
    ip: str
    netns: str


class LocalCluster(BaseModel):
    """What ``up()`` created; persisted as ``<base>/state.json``."""

    nodes: list[LocalNode]
    cpus_per_node: int = Field(ge=1)
    memory_mb: int = Field(ge=256)
    partition: str
    base: Path
    controller_ip: str
    proctrack: str
    # The last gpu_nodes nodes form partition GPU_PARTITION, each with a gres gpu:1
    # whose "device" is /dev/null: Ray sees one logical GPU per node; nothing real.
    gpu_nodes: int = Field(default=0, ge=0)
    # Non-zero: Slurm tracks memory as a consumable (CR_Core_Memory) and gives each job
    # this many MiB per CPU unless it asks (DefMemPerCPU), as many sites do.
    mem_per_cpu_mb: int = Field(default=0, ge=0)

    @property
    def cpu_nodes(self) -> list[LocalNode]:
        return self.nodes[: len(self.nodes) - self.gpu_nodes]

    @property
    def gpu_node_list(self) -> list[LocalNode]:
        return self.nodes[len(self.nodes) - self.gpu_nodes :]

    @property
    def conf(self) -> Path:
        return self.base / "etc" / "slurm.conf"

    @property
    def env(self) -> dict[str, str]:
        """Environment for Slurm client commands (also works without the /etc symlink)."""
        return {"SLURM_CONF": str(self.conf)}


def _require_root() -> None:
    if os.geteuid() != 0:
        raise TargetError("the local Slurm cluster needs root (namespaces, daemons): run with sudo")


def _proctrack() -> str:
    # proctrack/cgroup is what makes scancel kill Ray's self-daemonising processes;
    # it needs the cgroup v1 freezer.  Elsewhere fall back to process groups.
    return "proctrack/cgroup" if (CGROUP_ROOT / "freezer").is_dir() else "proctrack/linuxproc"


def veth_name(node: str) -> str:
    """Host-side veth of ``node`` (interface names are limited to 15 characters)."""
    return f"syv-{node}"[:15]


def _chown(path: Path, user: str, mode: int | None = None) -> None:
    """chown (and chmod) the directory ``path`` itself, never what a link there names."""
    pw = pwd.getpwnam(user)
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        os.fchown(fd, pw.pw_uid, pw.pw_gid)
        if mode is not None:
            os.fchmod(fd, mode)
    finally:
        os.close(fd)


def check_base(base: Path) -> None:
    """Refuse (TargetError) a base an unprivileged user could have made or could change.

    Every existing component of ``base`` from / down must be a real directory (no
    symlink) owned by root and writable by nobody else; what does not exist yet is
    created by root below such a directory, so it is root's too.
    """
    if not base.is_absolute():
        raise TargetError(f"local Slurm base {base} must be an absolute path")
    path = Path("/")
    for part in base.parts[1:]:
        path = path / part
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return
        if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
            raise TargetError(f"local Slurm base: {path} is not a directory (a link?): refused")
        if st.st_uid != 0 or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise TargetError(
                f"local Slurm base: {path} is not root's alone (owner uid {st.st_uid}, mode "
                f"{stat.S_IMODE(st.st_mode):o}): the cluster runs as root and would trust "
                "what another user put there; use a base under /run or /var/lib"
            )


# The daemons this bed starts: the only processes down() signals by pid file.
_DAEMONS = ("slurmctld", "slurmd", "munged")


def daemon_pid(path: Path) -> int | None:
    """The pid in ``path`` (not followed if a link) if it is a live daemon of ours."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    with os.fdopen(fd) as fh:
        try:
            pid = int(fh.read(32).strip())
        except ValueError:
            return None
    # Never pid 0, 1 or a negative one (kill(-1) is every process), nor anything
    # that is not one of our daemons.
    if pid <= 1:
        return None
    try:
        comm = Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return None
    return pid if comm in _DAEMONS else None


def load(base: Path = DEFAULT_BASE) -> LocalCluster | None:
    state = base / "state.json"
    if not state.exists():
        return None
    try:
        return LocalCluster.model_validate_json(state.read_text())
    except ValueError:
        return None


def is_up(base: Path = DEFAULT_BASE) -> bool:
    pid = daemon_pid(base / "run" / "slurmctld.pid")
    return load(base) is not None and pid is not None and pid_alive(pid)


# --------------------------------------------------------------------------- up
def up(
    nodes: int = 3,
    cpus_per_node: int = 4,
    memory_mb: int = 4096,
    partition: str = "debug",
    base: Path = DEFAULT_BASE,
    subnet: str = "10.99.0",
    timeout: float = 60.0,
    gpu_nodes: int = 0,
    mem_per_cpu_mb: int = 0,
) -> LocalCluster:
    """Start the cluster (or return the running one if it has the same shape).

    ``gpu_nodes``: that many more nodes, in a second partition ``gpu``, each with a
    ``gpu:1`` generic resource backed by /dev/null (the default partition is unchanged).
    ``mem_per_cpu_mb``: memory tracked per job (CR_Core_Memory, DefMemPerCPU).
    """
    _require_root()
    check_base(base)
    if not 1 <= nodes <= 200 or not 0 <= gpu_nodes <= 200 - nodes:
        raise TargetError(f"local cluster size must be 1..200 nodes, got {nodes}+{gpu_nodes}")
    for tool in ("slurmctld", "slurmd", "munged", "ip", "nsenter", "unshare", "sinfo"):
        if shutil.which(tool) is None:
            raise TargetError(f"{tool} not found: run scripts/setup.d/slurm.sh (as root) first")
    running = load(base)
    if running is not None and is_up(base):
        if (
            len(running.nodes) == nodes + gpu_nodes
            and running.cpus_per_node == cpus_per_node
            and running.gpu_nodes == gpu_nodes
            and running.mem_per_cpu_mb == mem_per_cpu_mb
        ):
            return running
        raise TargetError(
            f"a local Slurm cluster with {len(running.nodes)} nodes is already up: "
            "run `invoke slurm.down` first"
        )
    down(base)  # clear leftovers of a crashed run

    cluster = LocalCluster(
        nodes=[
            LocalNode(name=f"node{i}", ip=f"{subnet}.{10 + i}", netns=f"{NETNS_PREFIX}node{i}")
            for i in range(1, nodes + gpu_nodes + 1)
        ],
        gpu_nodes=gpu_nodes,
        mem_per_cpu_mb=mem_per_cpu_mb,
        cpus_per_node=cpus_per_node,
        memory_mb=memory_mb,
        partition=partition,
        base=base,
        controller_ip=f"{subnet}.1",
        proctrack=_proctrack(),
    )
    try:
        _prepare_dirs(cluster)
        (base / "state.json").write_text(cluster.model_dump_json(indent=2))
        _start_munge(cluster)
        netns.bridge_up(BRIDGE, cluster.controller_ip)
        for n in cluster.nodes:
            netns.node_up(n.netns, veth_name(n.name), n.ip, BRIDGE)
        _write_configs(cluster)
        _start_slurmctld(cluster, timeout)
        for n in cluster.nodes:
            _start_slurmd(cluster, n)
        wait_until(lambda: True if _all_idle(cluster) else None, timeout, "all slurmd nodes idle")
    except BaseException:
        down(base)
        raise
    return cluster


def _prepare_dirs(c: LocalCluster) -> None:
    check_base(c.base)
    c.base.mkdir(mode=0o755, parents=True, exist_ok=True)
    check_base(c.base)  # (as made: root's, and nobody slipped a link in meanwhile)
    _chown(c.base, "root", 0o755)  # users' Slurm commands read etc/ and the munge socket
    for sub in ("etc", "run", "log", "state", "munge", *(f"spool/{n.name}" for n in c.nodes)):
        (c.base / sub).mkdir(mode=0o755, parents=True, exist_ok=True)
    _chown(c.base / "state", "slurm")
    _chown(c.base / "log", "slurm")
    _chown(c.base / "munge", "munge", 0o755)
    # Jobs write their output and rendezvous under here as the unprivileged user.
    jobs = c.base / "jobs"
    jobs.mkdir(exist_ok=True)
    _chown(jobs, "root", 0o1777)


def _start_munge(c: LocalCluster) -> None:
    d = c.base / "munge"
    key = d / "munge.key"
    new_munge_key(key)
    run(
        [
            "runuser",
            "-u",
            "munge",
            "--",
            "munged",
            f"--socket={d / 'munge.socket'}",
            f"--key-file={key}",
            f"--pid-file={d / 'munged.pid'}",
            f"--log-file={d / 'munged.log'}",
            f"--seed-file={d / 'munged.seed'}",
        ]
    )
    wait_until(lambda: True if (d / "munge.socket").exists() else None, 15, "munged socket")


def new_munge_key(key: Path, owner: str = "munge") -> None:
    """A fresh key at ``key``: created 0400 (never readable by others, not even for an
    instant), not through a link left in its place, and only then given to ``owner``."""
    with contextlib.suppress(FileNotFoundError):
        key.unlink()
    fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o400)
    try:
        os.write(fd, os.urandom(1024))
        pw = pwd.getpwnam(owner)
        os.fchown(fd, pw.pw_uid, pw.pw_gid)
    finally:
        os.close(fd)


def _templates() -> Environment:
    """slurm.conf and cgroup.conf of the test cluster (``testbeds/templates``)."""
    return Environment(
        loader=FileSystemLoader(Path(__file__).parent / "templates"),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,  # config files, not HTML
    )


def _write_configs(c: LocalCluster) -> None:
    env = _templates()
    controller = socket.gethostname().split(".")[0]
    values = {
        "cluster_name": "syndeo-local",
        "controller_name": controller,
        "controller_ip": c.controller_ip,
        "ctld_port": 6817,
        "slurmd_port": 6818,
        "munge_socket": c.base / "munge" / "munge.socket",
        # Short credential lifetime: a requeued job waits cred_expire+1 s before rerunning.
        "cred_expire": 10,
        "base": c.base,
        "proctrack": c.proctrack,
        "slurmd_timeout": 10,
        "nodes": c.cpu_nodes,
        "gpu_nodes": c.gpu_node_list,
        "gpu_partition": GPU_PARTITION,
        "cpus": c.cpus_per_node,
        "memory_mb": c.memory_mb,
        "mem_per_cpu_mb": c.mem_per_cpu_mb,
        "partition": c.partition,
    }
    etc = c.base / "etc"
    (etc / "slurm.conf").write_text(env.get_template("slurm.conf.j2").render(**values))
    (etc / "cgroup.conf").write_text(env.get_template("cgroup.conf.j2").render())
    if c.gpu_nodes:
        # Slurm 22.05 reports a gpu gres without File= as count 0 and drains the node
        # (tried: Count=1 in gres.conf, and slurm.conf alone).  /dev/null stands in for
        # the device: Slurm schedules it and sets CUDA_VISIBLE_DEVICES=0 in the task, as
        # on a real GPU node; nothing is bound (ConstrainDevices=no).
        lines = [f"NodeName={n.name} Name=gpu File=/dev/null" for n in c.gpu_node_list]
        (etc / "gres.conf").write_text(
            "# Generated by testbeds.slurmcluster\n" + "\n".join(lines) + "\n"
        )
    hosts = ["127.0.0.1 localhost", f"{c.controller_ip} {controller}"]
    hosts += [f"{n.ip} {n.name}" for n in c.nodes]
    (etc / "hosts").write_text("\n".join(hosts) + "\n")
    # Users then need no SLURM_CONF; only replace a link (never a site's real config).
    SLURM_CONF_LINK.parent.mkdir(parents=True, exist_ok=True)
    if SLURM_CONF_LINK.is_symlink() or not SLURM_CONF_LINK.exists():
        with contextlib.suppress(FileNotFoundError):
            SLURM_CONF_LINK.unlink()
        SLURM_CONF_LINK.symlink_to(etc / "slurm.conf")


def _start_slurmctld(c: LocalCluster, timeout: float) -> None:
    run(["slurmctld", "-f", str(c.conf)], timeout=timeout)
    wait_until(
        lambda: True if "is UP" in run(["scontrol", "ping"], check=False, env=c.env) else None,
        timeout,
        "slurmctld to answer",
    )


def _start_slurmd(c: LocalCluster, n: LocalNode) -> None:
    # Not `ip netns exec`: it remounts /sys, which hides the cgroup tree slurmd needs.
    inner = (
        f"hostname {n.name} && mount --bind {c.base / 'etc' / 'hosts'} /etc/hosts && "
        f"exec slurmd -f {c.conf} -N {n.name}"
    )
    run(
        [
            "nsenter",
            f"--net={netns.NETNS_DIR / n.netns}",
            "unshare",
            "--uts",
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            inner,
        ]
    )


def _all_idle(c: LocalCluster) -> bool:
    out = run(["sinfo", "-h", "-N", "-o", "%N %t"], check=False, env=c.env)
    states = dict(line.split() for line in out.splitlines() if line.strip())
    return all(states.get(n.name, "").startswith("idle") for n in c.nodes)


# --------------------------------------------------------------------------- status
def status(base: Path = DEFAULT_BASE) -> str:
    c = load(base)
    if c is None or not is_up(base):
        return "local Slurm cluster: down"
    nodes = run(["sinfo", "-N", "-o", "%N %t %c %O"], check=False, env=c.env)
    jobs = run(["squeue", "-o", "%i %u %T %D %N %R"], check=False, env=c.env)
    ips = ", ".join(f"{n.name}={n.ip}" for n in c.nodes)
    return f"local Slurm cluster: up ({ips}; {c.proctrack})\n{nodes}\n{jobs}".rstrip()


# --------------------------------------------------------------------------- failures
def kill_node(name: str, base: Path = DEFAULT_BASE) -> None:
    """Simulate a node crash: SIGKILL its slurmd and every process in its namespace.

    KILL only, no TERM first: a crashed machine runs no signal handlers, and a TERM
    would let the node record a clean "terminated" ending (a different, racy outcome).
    """
    c = load(base)
    node = next((n for n in (c.nodes if c else []) if n.name == name), None)
    if node is None:
        raise TargetError(f"no local Slurm node named {name!r}")
    # Repeat until empty: a process may fork between listing and killing.
    for _ in range(50):
        pids = netns.netns_pids(node.netns)
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(TargetError):
            wait_until(functools.partial(_all_gone, pids), 5, "killed")
    raise TargetError(f"processes of node {name} keep appearing after SIGKILL")


def _all_gone(pids: list[int]) -> bool | None:
    return None if any(pid_alive(p) for p in pids) else True


def revive_node(name: str, base: Path = DEFAULT_BASE, timeout: float = 60.0) -> None:
    """Restart a killed node's slurmd and return it to service (undo :func:`kill_node`)."""
    c = load(base)
    node = next((n for n in (c.nodes if c else []) if n.name == name), None)
    if c is None or node is None:
        raise TargetError(f"no local Slurm node named {name!r}")
    terminate(netns.netns_pids(node.netns), grace=0)
    _start_slurmd(c, node)
    # A node already marked DOWN needs an explicit resume; an idle one refuses it.
    run(["scontrol", "update", f"nodename={name}", "state=resume"], check=False, env=c.env)
    wait_until(lambda: True if _all_idle(c) else None, timeout, f"{name} back in service")


# --------------------------------------------------------------------------- down
def down(base: Path = DEFAULT_BASE) -> None:
    """Stop everything ``up()`` started and remove what it created.  Safe to repeat."""
    _require_root()
    check_base(base)
    c = load(base)
    ctld = daemon_pid(base / "run" / "slurmctld.pid")
    if c is not None and ctld is not None and pid_alive(ctld):
        with contextlib.suppress(TargetError):
            jobs = run(["squeue", "-h", "-o", "%i"], check=False, env=c.env).split()
            if jobs:
                run(["scancel", *jobs], check=False, env=c.env)
    # Everything running "on" a node (slurmd, slurmstepd, job processes) is in its netns.
    spaces = netns.list_netns(NETNS_PREFIX)
    terminate([p for ns in spaces for p in netns.netns_pids(ns)])
    pid_files = sorted((base / "run").glob("slurmd-*.pid")) if (base / "run").is_dir() else []
    pid_files += [base / "run" / "slurmctld.pid", base / "munge" / "munged.pid"]
    terminate([p for f in pid_files if (p := daemon_pid(f)) is not None])
    _remove_cgroups([n.name for n in c.nodes] if c else [])
    for ns in spaces:
        netns.node_down(ns, veth_name(ns.removeprefix(NETNS_PREFIX)))
    netns.bridge_down(BRIDGE)
    if SLURM_CONF_LINK.is_symlink() and str(os.readlink(SLURM_CONF_LINK)).startswith(str(base)):
        SLURM_CONF_LINK.unlink()
    shutil.rmtree(base, ignore_errors=True)


def _remove_cgroups(names: list[str]) -> None:
    """rmdir the per-node ``slurm_<node>`` trees slurmd created, deepest first."""
    if not CGROUP_ROOT.is_dir():
        return
    for hierarchy in CGROUP_ROOT.iterdir():
        for name in names:
            top = hierarchy / f"slurm_{name}"
            if not top.is_dir():
                continue
            dirs = sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts))
            for d in [*dirs, top]:
                with contextlib.suppress(OSError):
                    d.rmdir()
