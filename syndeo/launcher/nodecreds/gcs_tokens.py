"""Downscoped GCS tokens for nodes without a Google identity (Slurm, ssh): the launcher's
part (the node's is syndeo/rendezvous/gstoken.py).

A Credential Access Boundary (https://cloud.google.com/iam/docs/downscoping-short-lived-credentials)
turns the launcher's own access token into one that reaches only the cluster's prefix:
Google's Security Token Service exchanges it (``POST https://sts.googleapis.com/v1/token``,
RFC 8693 form fields; the boundary goes, as JSON, in ``options``:
https://cloud.google.com/iam/docs/reference/sts/rest/v1/TopLevel/token).  The token
lives as long as its source token (about an hour) and only the source credential can
renew it, which a node must not hold: so the launcher renews it while the cluster lives
(:class:`Renewer`: deploy's follow, and the watcher of an ``up`` cluster) and writes it
sealed with the launch key to the cluster's ``creds/gcs``, where the nodes read it.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from syndeo.core.errors import ConfigError, SyndeoError
from syndeo.launcher.spec import Launched, SlurmPart
from syndeo.launcher.state import write_atomic
from syndeo.rendezvous import open_rendezvous
from syndeo.rendezvous._cloud import parse_bucket_uri
from syndeo.rendezvous.gstoken import EXPIRY_VAR, FILE_NAME, TOKEN_VAR, seal_token

# google-auth's google.auth.downscoped.Credentials would do the exchange, but its endpoint
# is fixed (https://sts.<universe domain>/v1/token): the one POST is made here, so that a
# test can point it at a local fake STS with SYNDEO_GCP_STS_URL.
STS_URL_VAR = "SYNDEO_GCP_STS_URL"
STS_URL = "https://sts.googleapis.com/v1/token"
# The launcher's own credential variables: never passed on once a token replaces them.
OWN = ("GOOGLE_APPLICATION_CREDENTIALS",)
# Renewal: a token lives about 60 min; a fresh one every 20 min leaves the nodes 40 min of
# a valid token to read the next with, through an outage of the launcher or the store.
RENEW_EVERY_S = 20 * 60.0
RENEW_MARGIN_S = 30 * 60.0  # a shorter-lived token is renewed this long before it ends
RETRY_S = 60.0  # after a failed renewal
_SCOPES = ("https://www.googleapis.com/auth/cloud-platform",)
# Clusters this process made node tokens for: they are the ones to renew.
_issued: set[tuple[str, str]] = set()
_lock = threading.Lock()


def access_boundary(bucket: str, prefix: str, cluster_id: str) -> dict[str, Any]:
    """The Credential Access Boundary of one cluster's nodes: object read, write, delete
    under ``<prefix>/<cluster_id>/`` and listing with that prefix only (the shapes of
    Google's examples: "Limit permissions for specific objects" and "...listing")."""
    base = f"{prefix}/{cluster_id}/" if prefix else f"{cluster_id}/"
    objects = f"projects/_/buckets/{bucket}/objects/{base}"
    # CEL; the names hold no quote (parse_bucket_uri and cluster ids allow none).
    condition = (
        f"resource.name.startsWith('{objects}') || "
        f"api.getAttribute('storage.googleapis.com/objectListPrefix', '').startsWith('{base}')"
    )
    return {
        "accessBoundary": {
            "accessBoundaryRules": [
                {
                    "availableResource": f"//storage.googleapis.com/projects/_/buckets/{bucket}",
                    # objectUser: get, create, delete, list objects (no IAM, no buckets).
                    "availablePermissions": ["inRole:roles/storage.objectUser"],
                    "availabilityCondition": {
                        "title": f"syndeo cluster {cluster_id}",
                        "expression": condition,
                    },
                }
            ]
        }
    }


def emulated(env: Mapping[str, str]) -> bool:
    """A store emulator and no STS named: there is no Google to exchange tokens with."""
    return bool(env.get("STORAGE_EMULATOR_HOST")) and not env.get(STS_URL_VAR)


def _source_token() -> str:
    """A fresh access token of the launcher's own Google credentials (ADC)."""
    import google.auth
    from google.auth.exceptions import DefaultCredentialsError, GoogleAuthError
    from google.auth.transport.requests import Request

    try:
        creds, _project = google.auth.default(scopes=list(_SCOPES))
        creds.refresh(Request())  # type: ignore[no-untyped-call]  # a full hour for the exchanged token
    except DefaultCredentialsError:
        raise ConfigError(
            "gcs: no Google credentials to make the nodes' token from: set "
            "GOOGLE_APPLICATION_CREDENTIALS or run 'gcloud auth application-default login'"
        ) from None
    except GoogleAuthError as exc:
        raise ConfigError(
            f"gcs: the launcher's Google credentials could not be refreshed: {_line(exc)}"
        ) from None
    return str(creds.token)


def _line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def exchange(source: str, boundary: Mapping[str, Any], url: str) -> tuple[str, float]:
    """The STS token exchange: (downscoped token, expiry in seconds since the epoch)."""
    import requests

    form = {
        "grant_type": "urn:ietf:params:oauth:grant-type:token-exchange",
        "subject_token_type": "urn:ietf:params:oauth:token-type:access_token",
        "requested_token_type": "urn:ietf:params:oauth:token-type:access_token",
        "subject_token": source,
        "options": json.dumps(boundary, separators=(",", ":")),
    }
    before = time.time()
    hint = 'allow the token exchange, or set node_credentials = "forward"'
    try:
        reply = requests.post(url, data=form, timeout=30)
    except requests.RequestException as exc:
        raise ConfigError(
            f"gcs: cannot reach STS at {url} ({type(exc).__name__}); {hint}"
        ) from None
    try:
        body = reply.json()
    except ValueError:
        body = {}
    if reply.status_code != 200 or not isinstance(body, dict) or "access_token" not in body:
        why = (body.get("error_description") or body.get("error")) if isinstance(body, dict) else ""
        detail = f": {str(why).strip().splitlines()[0]}" if str(why or "").strip() else ""
        raise ConfigError(
            f"gcs: STS refused the nodes' downscoped token (HTTP {reply.status_code}{detail}); "
            f"{hint}"
        )
    return str(body["access_token"]), before + float(body.get("expires_in", 3600))


def mint(uri: str, cluster_id: str, env: Mapping[str, str] | None = None) -> tuple[str, float]:
    """A token for the nodes of ``cluster_id`` that reaches only its prefix of ``uri``."""
    env = os.environ if env is None else env
    bucket, prefix = parse_bucket_uri(uri, "gs")
    boundary = access_boundary(bucket, prefix, cluster_id)
    return exchange(_source_token(), boundary, env.get(STS_URL_VAR) or STS_URL)


def node_env(
    uri: str, cluster_id: str, env: Mapping[str, str], forwarded: Mapping[str, str]
) -> dict[str, str]:
    """The nodes' variables: the forwarded ones but the launcher's own credentials, and a
    token of their own (remembered: :func:`issued` says to renew it)."""
    token, expires_at = mint(uri, cluster_id, env)
    with _lock:
        _issued.add((uri, cluster_id))
    keep = {k: v for k, v in forwarded.items() if k not in OWN}
    return {**keep, TOKEN_VAR: token, EXPIRY_VAR: f"{expires_at:.0f}"}


def issued(uri: str, cluster_id: str) -> bool:
    """Whether this process gave nodes of ``cluster_id`` a token that must be renewed."""
    with _lock:
        return (uri, cluster_id) in _issued


def token_files(launched: Launched) -> list[Path]:
    """Where else the nodes look for the sealed token: a Slurm job dir, which they share
    with the launcher (they leave their exit codes there)."""
    part = launched.part
    return [Path(part.job_dir) / FILE_NAME] if isinstance(part, SlurmPart) else []


class Renewer:
    """Mints the nodes' next token well before the last expires and writes it sealed to
    the cluster's ``creds/gcs`` (and ``files``); :meth:`tick` from a loop (the watcher's)."""

    def __init__(
        self,
        uri: str,
        cluster_id: str,
        launch_key: str,
        say: Callable[[str], None],
        files: Sequence[Path] = (),
    ) -> None:
        self.uri, self.cluster_id, self.launch_key, self.say = uri, cluster_id, launch_key, say
        self.files = list(files)
        self.next_at = 0.0  # at once: a node that started late gets a full hour
        self._rdv: Any = None

    def tick(self, now: float | None = None) -> bool:
        """Renew if due; True when a fresh token was written."""
        now = time.time() if now is None else now
        if now < self.next_at:
            return False
        try:
            token, expires_at = mint(self.uri, self.cluster_id)
            if self._rdv is None:
                self._rdv = open_rendezvous(self.uri, self.cluster_id)
            blob = seal_token(token, expires_at, self.launch_key, self.cluster_id)
            self._rdv.put_store_token(blob)
            for path in self.files:
                write_atomic(path, blob)  # 0600
        except (SyndeoError, OSError) as exc:
            self.say(f"syndeo: could not renew the nodes' GCS token, will retry: {exc}")
            self.next_at = now + RETRY_S
            return False
        self.next_at = max(now + RETRY_S, min(now + RENEW_EVERY_S, expires_at - RENEW_MARGIN_S))
        return True

    def remove_files(self) -> None:
        """The job dir's copy, once the cluster is down (the store's goes with its records)."""
        for path in self.files:
            path.unlink(missing_ok=True)


class Renewal:
    """A :class:`Renewer` in a thread of its own while a launcher follows its cluster
    (deploy, and ``up`` until its watcher takes over); started only if the target gave
    the nodes a token."""

    CHECK_S = 5.0

    def __init__(
        self, uri: str, cluster_id: str, launch_key: str | None, say: Callable[[str], None]
    ) -> None:
        self.uri, self.cluster_id, self.launch_key, self.say = uri, cluster_id, launch_key, say
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._renewer: Renewer | None = None

    def start(self, launched: Launched) -> None:
        if self._thread is not None or not issued(self.uri, self.cluster_id):
            return
        if self.launch_key is None:
            self.say("syndeo: no launch key to seal the nodes' GCS token with: not renewed")
            return
        renewer = self._renewer = Renewer(
            self.uri, self.cluster_id, self.launch_key, self.say, token_files(launched)
        )

        def run() -> None:
            while True:
                renewer.tick()
                if self._stop.wait(self.CHECK_S):
                    return

        self._thread = threading.Thread(target=run, name="gcs-token-renewal", daemon=True)
        self._thread.start()

    def stop(self, *, remove: bool = True) -> None:
        """Before the teardown removes ``creds/gcs``: nothing writes it again.  ``remove``:
        the job dir's copy too (not when a watcher takes over)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=60)
            self._thread = None
        if remove and self._renewer is not None:
            self._renewer.remove_files()
