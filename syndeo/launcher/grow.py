"""``grow`` / ``shrink``: add or remove a node group's nodes on a cluster started with ``up``.

The target starts (or stops) machines exactly as at ``up``, each running ``syndeo
node`` with the group's settings and a rank past the ones in use; the new nodes
find the running head through the rendezvous and join it.  The head notices nodes
that leave (it logs which groups shrank) and the workload keeps running wherever
Ray can still place its work.
"""

from __future__ import annotations

import os
import time

from syndeo.core.errors import ConfigError, JoinTimeout
from syndeo.launcher.config import load_config
from syndeo.launcher.spec import Launched
from syndeo.launcher.state import load_launched, store_env, update_launched
from syndeo.launcher.targets import get_target
from syndeo.launcher.ui import Ui
from syndeo.launcher.watch import note_nodes
from syndeo.rendezvous import Rendezvous, open_rendezvous


def grow(
    cluster_id: str | None,
    group: str,
    nodes: int,
    wait_s: float | None = None,
    ui: Ui | None = None,
    hosts: list[str] | None = None,
) -> str:
    """Submit/start ``nodes`` more nodes of ``group``; with ``wait_s``, wait until they joined.

    ``hosts``: one machine per new node (the ssh target; the others find their own)."""
    if nodes < 1:
        raise ConfigError(f"nodes: must be >= 1, got {nodes}")
    ui = ui or Ui()
    found = load_launched(cluster_id)
    cid = found.cluster_id
    os.environ.update(store_env(found))

    def add(launched: Launched) -> tuple[Rendezvous, int, str]:
        if hosts and launched.target != "ssh":
            raise ConfigError(
                f"--hosts names the machines of an ssh cluster's new nodes; the "
                f"{launched.target} target finds its own"
            )
        target = get_target(load_config(target=launched.target), echo=ui.echo)
        rdv = open_rendezvous(launched.rendezvous, launched.cluster_id)
        st = rdv.read_status()
        before = st.groups.get(group, [0, 0])[0] if st else 0
        asked_at = time.time()
        started = target.grow(launched, group, nodes, hosts=hosts)
        note_nodes(target, launched, asked_at)  # cost from the request on
        return rdv, before, started

    # One change of the cluster's state at a time (the watcher of an `up` cluster
    # replaces lost nodes): `down` and `shrink` must know the new machines.
    rdv, before, started = update_launched(cid, add)
    ui.info(f"cluster {cid}: {nodes} node(s) of group {group} started ({started})")
    if wait_s is not None:
        deadline = time.monotonic() + wait_s
        while True:
            st = rdv.read_status()
            have = st.groups.get(group, [0, 0])[0] if st else 0
            if have >= before + nodes:
                ui.info(f"cluster {cid}: group {group} has {have} node(s)")
                break
            if time.monotonic() >= deadline:
                raise JoinTimeout(
                    f"group {group} has {have} node(s) after {wait_s:.0f} s, expected "
                    f"{before + nodes} ({started} may still be queued)"
                )
            time.sleep(1.0)
    return started


def shrink(
    cluster_id: str | None, group: str, nodes: int | None = None, ui: Ui | None = None
) -> list[str]:
    """Stop nodes of ``group`` (never the head); the head carries on without them."""
    ui = ui or Ui()
    cid = load_launched(cluster_id).cluster_id

    def remove(launched: Launched) -> list[str]:
        target = get_target(load_config(target=launched.target), echo=ui.echo)
        stopped = target.shrink(launched, group, nodes)
        note_nodes(target, launched, time.time())  # their cost ends here
        return stopped

    stopped = update_launched(cid, remove)
    ui.info(f"cluster {cid}: stopped {', '.join(stopped)} of group {group}")
    return stopped
