"""The launcher's part of Ray's TLS (``--tls``; the design is in syndeo/core/tls.py).

On by default where the nodes talk over a network others share (slurm, ssh:
:data:`syndeo.launcher.spec.TLS_BY_DEFAULT`); turned off there, the launcher says so in
one line (:func:`notice`).

Per launch: a fresh CA, sealed into the cluster's rendezvous prefix for the nodes, and a
client key and certificate of the launcher's (``ca.pem``, ``client.pem``, ``client.key``,
0600 in the cluster's dir; :func:`syndeo.launcher.state.forget` removes them with the
cluster).  The CA's key is kept nowhere else: a launch that needs another certificate
later makes a new cluster.
"""

from __future__ import annotations

import socket
from collections.abc import Iterable

from syndeo.core import tls
from syndeo.core.errors import ConfigError
from syndeo.launcher.spec import ClusterSpec, tls_default
from syndeo.launcher.state import CLIENT_TLS_FILES, cluster_dir, write_atomic
from syndeo.rendezvous import Rendezvous

CA, CERT, KEY = CLIENT_TLS_FILES


def check(spec: ClusterSpec) -> None:
    """One line, before anything starts: the nodes open the CA with the launch key."""
    if spec.tls and spec.launch_key is None:
        raise ConfigError(
            f"tls: cluster {spec.cluster_id} has no launch key to seal its CA with (a cluster "
            "saved by an older syndeo): start it again with this version, or without tls"
        )


def notice(spec: ClusterSpec) -> str | None:
    """The one line a launch prints when TLS is off where it is on by default: on those
    targets the token Ray's processes present crosses a network other users see."""
    if spec.tls or not tls_default(spec.target):
        return None
    return (
        "syndeo: Ray's TLS is off: the cluster's token crosses the network between nodes "
        "in clear (--no-tls, or tls = false in the config)"
    )


def new_authority(spec: ClusterSpec) -> tls.Authority | None:
    """This launch's CA, or None without ``tls``."""
    check(spec)
    return tls.new_authority(spec.cluster_id) if spec.tls else None


def deliver(rdv: Rendezvous, spec: ClusterSpec, authority: tls.Authority) -> None:
    """The CA into the cluster's prefix, sealed with the launch key (the nodes wait for it)."""
    assert spec.launch_key is not None  # check() ran first
    rdv.put_tls_bundle(tls.seal(authority, spec.launch_key, spec.cluster_id))


def write_client(
    cluster_id: str, authority: tls.Authority, ips: Iterable[str] = ()
) -> dict[str, str]:
    """The launcher's client files; the environment that makes a client use them.

    A Ray driver serves too (its workers call back to it at the address of the node it
    attached to), so the certificate names this machine's addresses and ``ips`` (the
    cluster's nodes: a driver on the local target attaches to one of theirs).
    """
    where = cluster_dir(cluster_id)
    names = [*tls.local_addresses(), "127.0.0.1", *ips]
    cert, key = authority.issue(f"syndeo {cluster_id} client", names, [socket.gethostname()])
    write_atomic(where / CA, authority.cert_pem)
    write_atomic(where / KEY, key)
    write_atomic(where / CERT, cert)
    return tls.ray_env(str(where / CA), str(where / CERT), str(where / KEY))
