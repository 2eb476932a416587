"""Hosts as network namespaces, all on one host bridge with no default route.

A bed creates one bridge (its own name, its own ``/24``; the machine side gets
``.1``) and, per host, a namespace whose ``eth0`` is one end of a veth pair whose
other end is plugged into that bridge.  Nothing can leave the machine: the
namespaces have no route beyond the bridge's subnet.

Every function takes the names it acts on and is idempotent, so one bed's
teardown never touches another bed's bridge, veths or namespaces.
"""

from __future__ import annotations

import contextlib
import ipaddress
from pathlib import Path

from syndeo.core.errors import TargetError
from testbeds.procs import run

NETNS_DIR = Path("/run/netns")
# Linux limits interface names to 15 characters (IFNAMSIZ - 1).
IFNAME_MAX = 15


def link_exists(name: str) -> bool:
    return Path(f"/sys/class/net/{name}").exists()


def check_ifname(name: str) -> str:
    """``name`` if it is a valid interface name, else one clear TargetError."""
    if not 1 <= len(name) <= IFNAME_MAX or "/" in name or any(c.isspace() for c in name):
        raise TargetError(f"interface name {name!r} must be 1..{IFNAME_MAX} chars, no '/' or space")
    return name


def bridge_up(bridge: str, host_ip: str, prefix: int = 24) -> None:
    """Create ``bridge`` with ``host_ip/prefix`` on the machine side (idempotent)."""
    check_ifname(bridge)
    if not link_exists(bridge):
        run(["ip", "link", "add", bridge, "type", "bridge"])
    addrs = run(["ip", "-4", "-o", "addr", "show", "dev", bridge])
    if f" {host_ip}/" not in addrs:
        run(["ip", "addr", "add", f"{host_ip}/{prefix}", "dev", bridge])
    run(["ip", "link", "set", bridge, "up"])


def node_up(netns: str, veth: str, ip: str, bridge: str, prefix: int = 24) -> None:
    """Create ``netns`` with ``eth0`` = ``ip/prefix`` plugged into ``bridge`` (idempotent).

    ``veth`` is the host-side end's name (unique per bed and host).
    """
    check_ifname(veth)
    if not (NETNS_DIR / netns).exists():
        run(["ip", "netns", "add", netns])
    if not link_exists(veth):
        run(["ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", netns])
    run(["ip", "link", "set", veth, "master", bridge, "up"])
    inside = ["ip", "-n", netns]
    if f" {ip}/" not in run([*inside, "-4", "-o", "addr", "show", "dev", "eth0"]):
        run([*inside, "addr", "add", f"{ip}/{prefix}", "dev", "eth0"])
    run([*inside, "link", "set", "eth0", "up"])
    run([*inside, "link", "set", "lo", "up"])


def netns_pids(netns: str) -> list[int]:
    """PIDs of every process whose network namespace is ``netns`` ([] if it is gone)."""
    if not (NETNS_DIR / netns).exists():
        return []
    out = run(["ip", "netns", "pids", netns], check=False)
    return [int(p) for p in out.split()]


def list_netns(prefix: str) -> list[str]:
    """Names of the namespaces under /run/netns that start with ``prefix``."""
    if not NETNS_DIR.is_dir():
        return []
    return sorted(p.name for p in NETNS_DIR.iterdir() if p.name.startswith(prefix))


def node_down(netns: str, veth: str) -> None:
    """Delete the host-side veth first (that removes its peer), then the namespace."""
    if veth and link_exists(veth):
        run(["ip", "link", "del", veth])
    if (NETNS_DIR / netns).exists():
        try:
            run(["ip", "netns", "del", netns])
        except TargetError:
            # A process still holding the namespace: the caller kills those first.
            with contextlib.suppress(OSError):
                (NETNS_DIR / netns).unlink()
            raise


def bridge_down(bridge: str) -> None:
    if link_exists(bridge):
        run(["ip", "link", "del", bridge])


def subnet_in_use(subnet: str, except_dev: str = "") -> str | None:
    """The device (other than ``except_dev``) that already has an address in ``subnet``.

    Two beds on one ``/24`` would give the machine two routes to the same hosts:
    a bed picks a subnet nobody else uses instead.
    """
    net = ipaddress.ip_network(subnet, strict=False)
    for line in run(["ip", "-4", "-o", "addr", "show"]).splitlines():
        fields = line.split()
        if len(fields) < 4 or fields[2] != "inet":
            continue
        dev = fields[1]
        if dev != except_dev and ipaddress.ip_interface(fields[3]).network.overlaps(net):
            return dev
    return None
