"""A real multi-node Slurm cluster on one machine, to try and test the Slurm target.

``up()`` starts munged, slurmctld and one slurmd per node; every node lives in its
own network namespace (own hostname and IP on a host bridge, no default route) and
its own UTS/mount namespace (own /etc/hosts).  ``down()`` cancels jobs, kills every
process in the node namespaces, stops the daemons and removes namespaces, links,
cgroups and the state directory, in the order that leaves nothing behind.

Root only.  State lives under ``/var/tmp/syndeo-slurm`` (``state.json`` records
what was created so ``down()`` works from any process).
"""

from __future__ import annotations

import contextlib
import functools
import os
import pwd
import shutil
import signal
import socket
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from pydantic import BaseModel, ConfigDict, Field

from syndeo.core.errors import TargetError
from testbeds import netns
from testbeds.procs import pid_alive, read_pid, run, terminate, wait_until

DEFAULT_BASE = Path("/var/tmp/syndeo-slurm")
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


def _chown(path: Path, user: str) -> None:
    pw = pwd.getpwnam(user)
    os.chown(path, pw.pw_uid, pw.pw_gid)


def load(base: Path = DEFAULT_BASE) -> LocalCluster | None:
    state = base / "state.json"
    if not state.exists():
        return None
    try:
        return LocalCluster.model_validate_json(state.read_text())
    except ValueError:
        return None


def is_up(base: Path = DEFAULT_BASE) -> bool:
    pid = read_pid(base / "run" / "slurmctld.pid")
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
) -> LocalCluster:
    """Start the cluster (or return the running one if it has the same shape).

    ``gpu_nodes``: that many more nodes, in a second partition ``gpu``, each with a
    ``gpu:1`` generic resource backed by /dev/null (the default partition is unchanged).
    """
    _require_root()
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
    c.base.mkdir(parents=True, exist_ok=True)
    os.chmod(c.base, 0o755)  # users' Slurm commands read etc/ and the munge socket
    for sub in ("etc", "run", "log", "state", "munge", *(f"spool/{n.name}" for n in c.nodes)):
        (c.base / sub).mkdir(parents=True, exist_ok=True)
    _chown(c.base / "state", "slurm")
    _chown(c.base / "log", "slurm")
    munge_dir = c.base / "munge"
    _chown(munge_dir, "munge")
    os.chmod(munge_dir, 0o755)
    # Jobs write their output and rendezvous under here as the unprivileged user.
    jobs = c.base / "jobs"
    jobs.mkdir(exist_ok=True)
    os.chmod(jobs, 0o1777)


def _start_munge(c: LocalCluster) -> None:
    d = c.base / "munge"
    key = d / "munge.key"
    key.write_bytes(os.urandom(1024))
    _chown(key, "munge")
    os.chmod(key, 0o400)
    run([
        "runuser", "-u", "munge", "--", "munged",
        f"--socket={d / 'munge.socket'}", f"--key-file={key}", f"--pid-file={d / 'munged.pid'}",
        f"--log-file={d / 'munged.log'}", f"--seed-file={d / 'munged.seed'}",
    ])  # fmt: skip
    wait_until(lambda: True if (d / "munge.socket").exists() else None, 15, "munged socket")


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
    run([
        "nsenter", f"--net={netns.NETNS_DIR / n.netns}", "unshare", "--uts", "--mount",
        "--propagation", "private", "sh", "-c", inner,
    ])  # fmt: skip


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
    c = load(base)
    ctld = read_pid(base / "run" / "slurmctld.pid")
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
    terminate([p for f in pid_files if (p := read_pid(f)) is not None])
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
