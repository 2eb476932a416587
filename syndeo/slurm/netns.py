"""One network namespace per test node, all on a host bridge with no default route.

Each node gets its own IP on ``<subnet>.0/24`` (host = ``.1``); nothing can leave
the machine because the namespaces have no route beyond the bridge.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from syndeo.errors import TargetError
from syndeo.slurm.procs import run

BRIDGE = "sybr0"
NETNS_DIR = Path("/run/netns")


def _link_exists(name: str) -> bool:
    return Path(f"/sys/class/net/{name}").exists()


def veth_name(node: str) -> str:
    # Interface names are limited to 15 characters.
    return f"syv-{node}"[:15]


def bridge_up(host_ip: str) -> None:
    if not _link_exists(BRIDGE):
        run(["ip", "link", "add", BRIDGE, "type", "bridge"])
    addrs = run(["ip", "-4", "-o", "addr", "show", "dev", BRIDGE])
    if f" {host_ip}/" not in addrs:
        run(["ip", "addr", "add", f"{host_ip}/24", "dev", BRIDGE])
    run(["ip", "link", "set", BRIDGE, "up"])


def node_up(netns: str, node: str, ip: str) -> None:
    """Create ``netns`` with ``eth0`` = ``ip``/24 plugged into the bridge (idempotent)."""
    if not (NETNS_DIR / netns).exists():
        run(["ip", "netns", "add", netns])
    veth = veth_name(node)
    if not _link_exists(veth):
        run(["ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", netns])
    run(["ip", "link", "set", veth, "master", BRIDGE, "up"])
    inside = ["ip", "-n", netns]
    if f" {ip}/" not in run([*inside, "-4", "-o", "addr", "show", "dev", "eth0"]):
        run([*inside, "addr", "add", f"{ip}/24", "dev", "eth0"])
    run([*inside, "link", "set", "eth0", "up"])
    run([*inside, "link", "set", "lo", "up"])


def netns_pids(netns: str) -> list[int]:
    if not (NETNS_DIR / netns).exists():
        return []
    out = run(["ip", "netns", "pids", netns], check=False)
    return [int(p) for p in out.split()]


def list_netns(prefix: str) -> list[str]:
    if not NETNS_DIR.is_dir():
        return []
    return sorted(p.name for p in NETNS_DIR.iterdir() if p.name.startswith(prefix))


def node_down(netns: str, node: str) -> None:
    """Delete the host-side veth first (that removes its peer), then the namespace."""
    veth = veth_name(node)
    if _link_exists(veth):
        run(["ip", "link", "del", veth])
    if (NETNS_DIR / netns).exists():
        try:
            run(["ip", "netns", "del", netns])
        except TargetError:
            # A process still holding the namespace: the caller kills those first.
            with contextlib.suppress(OSError):
                (NETNS_DIR / netns).unlink()
            raise


def bridge_down() -> None:
    if _link_exists(BRIDGE):
        run(["ip", "link", "del", BRIDGE])
