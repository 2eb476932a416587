"""What a cluster's processes listen on: found per process, by PID.

Ray's agents and workers rename themselves (``setproctitle``), which blanks their
``/proc/PID/environ``: ``processes_of`` misses them once they are up.  Every one of
them is a descendant of a process it does find (``syndeo node`` -> ``ray start`` ->
raylet -> agents and workers), so the cluster is those processes and their trees.
"""

from __future__ import annotations

import contextlib
import http.client
import ipaddress
import os
import socket
from dataclasses import dataclass
from pathlib import Path

import psutil

from tests.support.helpers import processes_of

WILDCARD = {"0.0.0.0", "::"}

# The wildcard listeners Ray opens whatever it is told, per process, with the reason
# (read in Ray 2.60's source: the comment above METRICS_OFF in syndeo/node/raynode.py;
# what a firewall must do about them: docs/security.md).  Each one is gRPC behind
# Ray's token; none of them may be anything else (a Prometheus exporter is not).
UNAVOIDABLE_WILDCARD = {
    # GrpcServer::Run binds 0.0.0.0 unless the node IP is exactly 127.0.0.1, which
    # `ray start` never uses (it swaps in the external address), nor does a client.
    "gcs_server": 1,  # the GCS (head)
    "raylet": 2,  # its node manager and its object manager
    "core worker": 1,  # each worker's own gRPC server (tasks, actors, ray::IDLE)
    # DashboardAgent._init_non_minimal: the agent's gRPC server, same rule.
    "ray::DashboardAgent": 1,
    # The workload's driver (the user's program, started by the head's `syndeo node`)
    # is a core worker too: its gRPC server, once ray.init() has connected.
    "driver": 1,
}
AGENTS = {"ray::DashboardAgent", "ray::RuntimeEnvAgent"}


@dataclass(frozen=True)
class Listener:
    pid: int
    name: str  # the process's name: gcs_server, raylet, ray::DashboardAgent, ...
    parent: str  # its parent's name (a core worker's is "raylet", a driver's "syndeo node")
    ip: str  # as the kernel reports it, IPv4-mapped IPv6 unwrapped
    port: int

    @property
    def wildcard(self) -> bool:
        return self.ip in WILDCARD

    @property
    def role(self) -> str:
        """The name, or "core worker" for a worker the raylet started."""
        if self.parent == "raylet" and self.name not in AGENTS:
            return "core worker"
        if self.parent == "syndeo node":
            return "driver"
        return self.name

    @property
    def loopback(self) -> bool:
        return ipaddress.ip_address(self.ip).is_loopback

    def __str__(self) -> str:
        return f"{self.name}[{self.pid}] {self.ip}:{self.port}"


def cluster_processes(cluster_id: str) -> list[psutil.Process]:
    found: dict[int, psutil.Process] = {}
    for p in processes_of(cluster_id):
        found[p.pid] = p
        with contextlib.suppress(psutil.Error):
            for c in p.children(recursive=True):
                found[c.pid] = c
    return list(found.values())


def _plain(ip: str) -> str:
    addr = ipaddress.ip_address(ip)
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        return str(addr.ipv4_mapped)
    return str(addr)


def _hex_ip(text: str) -> str:
    """An address of /proc/net/tcp{,6}: 32-bit words in host (little-endian) order."""
    raw = bytes.fromhex(text)
    raw = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    return _plain(str(ipaddress.ip_address(raw)))


def _listen_table(pid: int) -> dict[int, tuple[str, int]]:
    """Socket inode -> (ip, port) of every TCP listener in ``pid``'s network namespace
    (read from its own /proc/PID/net: psutil reads the caller's namespace, which is not
    the one of a node of the Slurm bed)."""
    table = {}
    for name in ("tcp", "tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/net/{name}").read_text().splitlines()[1:]:
                f = line.split()
                if f[3] == "0A":  # TCP_LISTEN
                    ip, port = f[1].split(":")
                    table[int(f[9])] = (_hex_ip(ip), int(port, 16))
    return table


def listeners(procs: list[psutil.Process]) -> list[Listener]:
    """Every TCP socket in LISTEN state held by one of ``procs``, in whatever network
    namespace each one runs."""
    tables: dict[int, dict[int, tuple[str, int]]] = {}  # per network namespace
    out: set[Listener] = set()
    for p in procs:
        with contextlib.suppress(psutil.Error, OSError):
            name = p.name()
            parent = p.parent()
            pname = parent.name() if parent is not None else ""
            if parent is not None and parent.cmdline()[-3:] == ["-m", "syndeo", "node"]:
                pname = "syndeo node"
            ns = os.stat(f"/proc/{p.pid}/ns/net").st_ino
            if ns not in tables:
                tables[ns] = _listen_table(p.pid)
            table = tables[ns]
            for fd in Path(f"/proc/{p.pid}/fd").iterdir():
                with contextlib.suppress(OSError):
                    link = os.readlink(fd)
                    if link.startswith("socket:["):
                        inode = int(link[8:-1])
                        if inode in table:
                            ip, port = table[inode]
                            out.add(Listener(p.pid, name, pname, ip, port))
    return sorted(out, key=lambda x: (x.name, x.port))


def avoidable_wildcards(found: list[Listener]) -> list[str]:
    """Wildcard listeners beyond UNAVOIDABLE_WILDCARD (by role, counted per process)."""
    per_process: dict[int, list[Listener]] = {}
    for x in found:
        if x.wildcard:
            per_process.setdefault(x.pid, []).append(x)
    extra = []
    for socks in per_process.values():
        allowed = UNAVOIDABLE_WILDCARD.get(socks[0].role, 0)
        if len(socks) > allowed:
            extra.append(", ".join(str(x) for x in socks) + f" (allowed: {allowed})")
    return extra


def external_ips() -> list[str]:
    """This machine's IPv4 addresses other than loopback (where a café sees us)."""
    ips = []
    for addrs in psutil.net_if_addrs().values():
        for a in addrs:
            if a.family == socket.AF_INET and not ipaddress.ip_address(a.address).is_loopback:
                ips.append(a.address)
    return sorted(set(ips))


def serves_metrics(ip: str, port: int, timeout: float = 2.0) -> bool:
    """True if ``GET /metrics`` on ip:port answers 200 with Prometheus text, no token."""
    conn = http.client.HTTPConnection(ip, port, timeout=timeout)
    try:
        conn.request("GET", "/metrics")
        resp = conn.getresponse()
        body = resp.read(4096)
    except (OSError, http.client.HTTPException):
        return False
    finally:
        conn.close()
    return resp.status == 200 and (b"# HELP" in body or b"# TYPE" in body)


def assert_ray_ports(nodes: list[tuple[str, str, str]], uid: int) -> None:
    """Issue 22 item 4, on each node ``(name, netns, ip)`` of a bed (its own network
    namespace and address), among the processes of ``uid``: Ray listens on a wildcard
    address only where it leaves no choice (UNAVOIDABLE_WILDCARD), else on the node's
    address or loopback, and nothing answers GET /metrics on the node's address."""
    from testbeds import netns

    for name, ns, ip in nodes:
        procs = []
        for pid in netns.netns_pids(ns):
            with contextlib.suppress(psutil.Error):
                proc = psutil.Process(pid)
                # The cluster's processes; srun's and sshd's own listeners are theirs.
                if proc.uids().real == uid and proc.name() not in ("srun", "sshd"):
                    procs.append(proc)
        found = listeners(procs)
        roles = {x.role for x in found}
        assert {"raylet", "ray::DashboardAgent", "ray::RuntimeEnvAgent"} <= roles, (name, roles)
        extra = avoidable_wildcards(found)
        assert extra == [], f"{name}: wildcard listeners Ray lets us avoid: {extra}"
        elsewhere = [str(x) for x in found if not x.wildcard and x.ip != ip and not x.loopback]
        assert elsewhere == [], f"{name}: {elsewhere}"
        served = [str(x) for x in found if serves_metrics(ip, x.port)]
        assert served == [], f"{name}: unauthenticated Prometheus endpoints: {served}"
