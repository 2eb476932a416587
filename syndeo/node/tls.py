"""A node's part of Ray's TLS (``SYNDEO_TLS=1``; the design is in syndeo/core/tls.py).

Before Ray starts: wait (up to the join timeout, like every other record) for the
launcher's sealed CA in the rendezvous, open it with the launch key, and make this
node's own key and certificate, signed by that CA, naming every address a peer may
dial it at.  The files go into the node's private scratch dir (0600) and leave with the
node; the CA's key never touches the disk.
"""

from __future__ import annotations

import hashlib
import socket
import time
from collections.abc import Callable
from pathlib import Path

from syndeo.core import tls
from syndeo.core.errors import ConfigError, NodeError
from syndeo.core.nodeconfig import NodeSettings
from syndeo.core.securedir import write_private
from syndeo.rendezvous import Rendezvous

# In the node's scratch dir; removed at node teardown (main.py).
CA_FILE, CERT_FILE, KEY_FILE = "tls-ca.pem", "tls-node.pem", "tls-node.key"
FILES = (CA_FILE, CERT_FILE, KEY_FILE)


def check(s: NodeSettings, enabled: bool) -> None:
    """Before anything starts: TLS needs the launch key that opens the bundle."""
    if enabled and s.launch_key is None:
        raise ConfigError(
            f"invalid node environment: {tls.ENV_VAR}=1 needs SYNDEO_LAUNCH_KEY (the key "
            "that opens the cluster's TLS bundle)"
        )


def wait_for_authority(
    s: NodeSettings, rdv: Rendezvous, log: Callable[[str], None]
) -> tls.Authority:
    """The launch's CA from the rendezvous, waiting up to the join timeout.

    A bundle that fails authentication (another launch's key, another cluster's, or
    changed in the store) is never used: logged once per distinct blob, and the wait
    goes on (the launcher may still write the real one) until the timeout says what
    was seen.
    """
    assert s.launch_key is not None  # check() ran first
    rejected: dict[str, str] = {}

    def probe() -> tls.Authority | None:
        blob = rdv.get_tls_bundle()
        if blob is None:
            return None
        try:
            return tls.unseal(blob, s.launch_key or "", s.cluster_id)
        except tls.BundleRejected as exc:
            digest = hashlib.sha256(blob).hexdigest()[:12]
            if digest not in rejected:
                rejected[digest] = str(exc)
                log(f"refusing the TLS bundle in the rendezvous (sha256 {digest}…): {exc}")
            return None

    def why() -> str:
        msg = f"no TLS bundle for cluster {s.cluster_id!r} at {s.rendezvous} within "
        msg += f"{s.join_timeout:.0f} s"
        if rejected:
            return msg + ": one was there but refused (" + "; ".join(rejected.values()) + ")"
        return msg + " (did the launcher start this cluster with --tls?)"

    return rdv.poller.wait(probe, time.monotonic() + s.join_timeout, why)


def node_addresses(s: NodeSettings) -> list[str]:
    """What peers may dial this node at: its Ray address (``SYNDEO_NODE_IP``; without it,
    every address of the machine, one of which Ray picks) and 127.0.0.1 (local clients,
    the agents)."""
    ips = [s.node_ip] if s.node_ip else tls.local_addresses()
    return list(dict.fromkeys([*ips, "127.0.0.1"]))


def prepare(s: NodeSettings, rdv: Rendezvous, log: Callable[[str], None]) -> dict[str, str]:
    """This node's TLS files in its scratch dir; the variables that make Ray use them."""
    authority = wait_for_authority(s, rdv, log)
    host = socket.gethostname()
    try:
        cert, key = authority.issue(f"syndeo {s.cluster_id} r{s.rank}", node_addresses(s), [host])
    except ValueError as exc:  # an address the certificate cannot name
        raise NodeError(f"cannot make this node's TLS certificate: {exc}") from None
    paths = {name: s.scratch / name for name in FILES}
    # O_NOFOLLOW|O_EXCL in the node's private dir: never through another user's link.
    write_private(paths[CA_FILE], authority.cert_pem)
    write_private(paths[KEY_FILE], key)
    write_private(paths[CERT_FILE], cert)
    return tls.ray_env(str(paths[CA_FILE]), str(paths[CERT_FILE]), str(paths[KEY_FILE]))


def remove(scratch: Path) -> None:
    for name in FILES:
        (scratch / name).unlink(missing_ok=True)
