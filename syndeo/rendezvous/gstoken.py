"""A node's downscoped GCS token and its renewal (``node_credentials = "scoped"`` on hosts
without a Google identity: Slurm, ssh).

The launcher hands each node a token that reaches only the cluster's prefix
(``SYNDEO_GCS_TOKEN``, ``SYNDEO_GCS_TOKEN_EXPIRY``;
syndeo/launcher/nodecreds/gcs_tokens.py). Such a token lives about an hour and only its
source credential can renew it, which a node must not hold: so the launcher, while the
cluster lives, mints a fresh one well before the last expires and writes it sealed with
the launch key (syndeo/core/sealed.py) to the cluster-wide key :data:`KEY` of the
rendezvous. The node's client renews by reading that object with the token it still
holds, and takes it only if it opens with its launch key: a planted or changed token is
refused and logged, never used. The expiry is sealed with the token, and a node never
takes one that ends before the one it holds: an older token of the same launch, put back
by someone who can write the prefix, is refused like a planted one.

A Slurm job may queue for longer than its token lives, and then has nothing to read the
store with: the launcher also writes the sealed token to the job dir, which the nodes
share with it (``SYNDEO_GCS_TOKEN_FILE``), and a node reads that first.

Imported only by the gs backend (google-auth and requests are its dependencies).
"""

from __future__ import annotations

import datetime
import json
import logging
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote

from syndeo.core import sealed
from syndeo.core.nodeconfig import LAUNCH_KEY_VAR

TOKEN_VAR = "SYNDEO_GCS_TOKEN"
EXPIRY_VAR = "SYNDEO_GCS_TOKEN_EXPIRY"  # seconds since the epoch
FILE_VAR = "SYNDEO_GCS_TOKEN_FILE"  # a shared file with the sealed token (Slurm's job dir)
# Under a Slurm job dir, in a directory of its own: the one the nodes' containers get,
# read-only (the job dir itself holds secrets and what the launcher reads back).
FILE_NAME = "for-nodes/gcs-token"
# A token from the file must outlive google-auth's refresh threshold (3 min 45 s), or it
# is asked for again at once.
FILE_FRESH_S = 300.0
# Cluster-wide (not per attempt, like tls/bundle): a restarted attempt's nodes renew
# from it too; removed with the claim by cleanup(all_attempts=True).
KEY = "creds/gcs"
PURPOSE = b"syndeo gcs token v1"  # HKDF info: this key opens nothing but tokens
READ_TIMEOUT_S = 10.0

log = logging.getLogger("syndeo.rendezvous.gs")


def seal_token(token: str, expires_at: float, launch_key: str, cluster_id: str) -> bytes:
    plain = json.dumps({"token": token, "expires_at": expires_at}).encode()
    return sealed.seal(plain, launch_key, cluster_id, PURPOSE)


def unseal_token(blob: bytes, launch_key: str, cluster_id: str) -> tuple[str, float]:
    """(token, expiry) of a sealed blob; :class:`sealed.Rejected` if not this launch's."""
    data = json.loads(sealed.unseal(blob, launch_key, cluster_id, PURPOSE))
    try:
        return str(data["token"]), float(data["expires_at"])
    except (KeyError, TypeError, ValueError):
        raise sealed.Rejected("authentic but not a token this version can read") from None


def _refresh_error(message: str) -> Exception:
    from google.auth.exceptions import RefreshError

    return RefreshError(message)  # type: ignore[no-untyped-call]


def _naive_utc(epoch: float) -> datetime.datetime:
    # google-auth compares expiry with a naive UTC "now".
    return datetime.datetime.fromtimestamp(epoch, datetime.UTC).replace(tzinfo=None)


class SealedTokenRefresher:
    """google-auth's ``refresh_handler``: the launcher's latest token, from the store.

    It reads the object with a plain HTTP GET on the token the credentials still hold
    (google-auth refreshes 3 min 45 s before expiry): going through the storage client
    would ask these same credentials to refresh, and recurse.
    """

    def __init__(
        self,
        endpoint: str,
        bucket: str,
        name: str,
        launch_key: str,
        cluster_id: str,
        path: str | None = None,
    ) -> None:
        self.url = (
            f"{endpoint.rstrip('/')}/storage/v1/b/{quote(bucket, safe='')}/o/"
            f"{quote(name, safe='')}?alt=media"
        )
        self.launch_key = launch_key
        self.cluster_id = cluster_id
        self.path = path
        self.credentials: Any = None  # set by node_credentials: whose token reads
        # The expiry of the newest token this node has held: none older is taken.
        self.newest = 0.0

    def __call__(self, request: Any, scopes: Any = None) -> tuple[str, datetime.datetime]:
        """(token, expiry) of the sealed object; a RefreshError (google-auth's) if none can
        be taken, which the backend reports as credentials that could not be refreshed."""
        import requests

        if self.path and (found := self._from_file()) is not None:
            return found
        current = getattr(self.credentials, "token", None)
        try:
            reply = requests.get(
                self.url, headers={"Authorization": f"Bearer {current}"}, timeout=READ_TIMEOUT_S
            )
        except requests.RequestException as exc:
            raise _refresh_error(f"cannot read the renewed token: {type(exc).__name__}") from None
        if reply.status_code == 404:
            raise _refresh_error(
                "the launcher has not renewed the token (is it still following the cluster?)"
            )
        if reply.status_code == 401:
            # Nothing left to read with: a node that started after its token ended (a
            # Slurm job that queued longer than an hour) or a launcher that stopped renewing.
            raise _refresh_error(
                "this node's token expired before a renewed one could be read (did its job "
                "queue longer than the token lives, or the launcher stop following?)"
            )
        if reply.status_code != 200:
            raise _refresh_error(f"cannot read the renewed token: HTTP {reply.status_code}")
        try:
            token, expires_at = self._take(reply.content)
        except (sealed.Rejected, ValueError) as exc:
            # Someone who can write the prefix but holds no launch key: never use it.
            log.warning("syndeo: refused the GCS token in the rendezvous: %s", exc)
            raise _refresh_error(f"refused the token in the rendezvous: {exc}") from None
        return token, _naive_utc(expires_at)

    def _take(self, blob: bytes) -> tuple[str, float]:
        """The token in ``blob`` if it is this launch's and no older than the one held."""
        token, expires_at = unseal_token(blob, self.launch_key, self.cluster_id)
        if expires_at <= time.time():
            raise sealed.Rejected("it has expired")
        if expires_at < self.newest:
            raise sealed.Rejected(
                "it ends before the token this node holds (an older one put back)"
            )
        self.newest = expires_at
        return token, expires_at

    def _from_file(self) -> tuple[str, datetime.datetime] | None:
        """The launcher's latest token from the shared file, if it opens and is fresh."""
        try:
            blob = Path(self.path or "").read_bytes()
        except OSError:
            return None  # not written yet, or not shared after all: the store then
        try:
            token, expires_at = unseal_token(blob, self.launch_key, self.cluster_id)
        except (sealed.Rejected, ValueError) as exc:
            log.warning("syndeo: refused the GCS token in %s: %s", self.path, exc)
            return None
        if expires_at - time.time() < FILE_FRESH_S or expires_at < self.newest:
            return None  # the store may hold a newer one
        self.newest = expires_at
        return token, _naive_utc(expires_at)


def node_credentials(
    env: Mapping[str, str], endpoint: str, bucket: str, name: str, cluster_id: str
) -> Any:
    """Credentials from the token the launcher made for this node, renewed from object
    ``name`` of ``bucket``; None when the node has none (its own identity, forwarded)."""
    token, expiry = env.get(TOKEN_VAR), env.get(EXPIRY_VAR)
    if not token:
        return None
    from google.oauth2.credentials import Credentials

    launch_key = env.get(LAUNCH_KEY_VAR, "")
    refresher = SealedTokenRefresher(
        endpoint, bucket, name, launch_key, cluster_id, env.get(FILE_VAR) or None
    )
    try:
        expires_at = float(expiry or 0)
    except ValueError:
        expires_at = time.time()  # unreadable: renew at once
    refresher.newest = expires_at
    creds = Credentials(  # type: ignore[no-untyped-call]
        token, expiry=_naive_utc(expires_at), refresh_handler=refresher
    )
    refresher.credentials = creds
    return creds


__all__ = [
    "EXPIRY_VAR",
    "FILE_NAME",
    "FILE_VAR",
    "KEY",
    "TOKEN_VAR",
    "SealedTokenRefresher",
    "node_credentials",
    "seal_token",
    "unseal_token",
]
