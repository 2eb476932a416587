"""Google Cloud Storage rendezvous (``gs://bucket/prefix``) with google-cloud-storage.

Credentials: Application Default Credentials (``GOOGLE_APPLICATION_CREDENTIALS``,
gcloud login, or the VM's service account).  ``STORAGE_EMULATOR_HOST`` points the
client at an emulator (anonymous credentials then).  A node the launcher gave a
downscoped token (``SYNDEO_GCS_TOKEN``: Slurm, ssh) uses that, renewed from the store
(syndeo/rendezvous/gstoken.py).  Atomic create is an upload
with ``if_generation_match=0`` (412 when the object exists).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import requests
from google.api_core import exceptions as gexc
from google.auth import exceptions as auth_exc
from google.cloud import storage
from google.cloud.storage.retry import DEFAULT_RETRY

from syndeo.rendezvous import _cloud, gstoken

# Retry transient errors (429, 5xx, connection resets) with jittered exponential
# backoff, but only for RETRY_BUDGET_S in total instead of the default 120 s.
# It is passed to every call, also uploads: all our writes are safe to repeat.
_RETRY = DEFAULT_RETRY.with_timeout(_cloud.RETRY_BUDGET_S).with_delay(
    initial=0.2, maximum=3.0, multiplier=2.0
)
_TIMEOUT = (_cloud.CONNECT_TIMEOUT_S, _cloud.READ_TIMEOUT_S)
# A wheelhouse goes up in chunks of a resumable upload of this size (a multiple of
# 256 KiB, as GCS wants) and comes back in ranged reads of this size.
PART = 8 * 2**20
READ_PIECE = 2**20


class GCSRendezvous(_cloud.CloudRendezvous):
    scheme = "gs"
    max_object = 5 * 2**40  # one object
    service = "GCS"
    env_passthrough = (
        *("GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_CLOUD_PROJECT", "CLOUDSDK_CORE_PROJECT"),
        *("STORAGE_EMULATOR_HOST", "GCE_METADATA_HOST", "GCE_METADATA_IP", "NO_GCE_CHECK"),
        *_cloud.NETWORK_ENV,
    )
    env_secrets = ("GOOGLE_APPLICATION_CREDENTIALS", gstoken.TOKEN_VAR, gstoken.EXPIRY_VAR)

    def __init__(self, uri: str, cluster_id: str, attempt: int = 0) -> None:
        super().__init__(uri, cluster_id, attempt)
        self.endpoint = os.environ.get("STORAGE_EMULATOR_HOST") or "https://storage.googleapis.com"
        self._bucket_seen = False
        # The launcher's downscoped token, if it made one for this node (else None: ADC).
        creds = gstoken.node_credentials(
            os.environ, self.endpoint, self.bucket, self._name(gstoken.KEY), cluster_id
        )
        with self._op("connect to"):
            self.client: Any = storage.Client(
                project=os.environ.get("GOOGLE_CLOUD_PROJECT")
                or os.environ.get("CLOUDSDK_CORE_PROJECT"),
                credentials=creds,
            )
        self.gbucket: Any = self.client.bucket(self.bucket)

    def _denied(self, exc: Exception) -> bool:
        if isinstance(exc, gexc.RetryError) and isinstance(exc.cause, Exception):
            return self._denied(exc.cause)
        return isinstance(
            exc, gexc.Forbidden | gexc.Unauthorized | auth_exc.DefaultCredentialsError
        )

    def _cause(self, exc: Exception) -> str | None:
        if isinstance(exc, gexc.RetryError) and exc.cause is not None:
            inner = self._cause(exc.cause) if isinstance(exc.cause, Exception) else None
            return f"gave up after {_cloud.RETRY_BUDGET_S:.0f} s of retries: {inner or exc.cause}"
        if isinstance(exc, gexc.NotFound):
            return "the bucket does not exist"
        if isinstance(exc, gexc.Forbidden):
            return f"access denied ({exc.message})"
        if isinstance(exc, gexc.Unauthorized):
            return "not authenticated: the credentials are invalid or expired"
        if isinstance(exc, gexc.GoogleAPICallError):
            return f"{exc.code} {exc.message}"
        if isinstance(exc, auth_exc.DefaultCredentialsError):
            return (
                "no Google credentials found (set GOOGLE_APPLICATION_CREDENTIALS, run "
                "'gcloud auth application-default login', or attach a service account)"
            )
        if isinstance(exc, auth_exc.RefreshError):
            return f"the credentials could not be refreshed (expired or revoked?): {exc}"
        if isinstance(exc, requests.exceptions.RequestException | auth_exc.TransportError):
            return f"endpoint {self.endpoint} unreachable ({type(exc).__name__})"
        return None

    # ------------------------------------------------------------------ primitives
    def check(self) -> None:
        with self._op("list", ""):
            # Listing needs only object permissions (no storage.buckets.get).
            list(
                self.client.list_blobs(
                    self.gbucket, prefix=self.base, max_results=1, retry=_RETRY, timeout=_TIMEOUT
                )
            )
        self._bucket_seen = True

    def _put_if_absent(self, name: str, data: bytes) -> bool:
        try:
            self.gbucket.blob(name).upload_from_string(
                data, if_generation_match=0, retry=_RETRY, timeout=_TIMEOUT
            )
        except gexc.PreconditionFailed:
            return False
        return True

    def _write(self, key: str, data: bytes) -> None:
        with self._op("write", key):
            self.gbucket.blob(self._name(key)).upload_from_string(
                data, retry=_RETRY, timeout=_TIMEOUT
            )

    def _read(self, key: str, limit: int | None = None) -> bytes | None:
        # With a limit, a ranged GET (``end`` is inclusive): never more than limit + 1 bytes.
        end = None if limit is None else limit
        with self._op("read", key):
            try:
                data = bytes(
                    self.gbucket.blob(self._name(key)).download_as_bytes(
                        start=None if end is None else 0, end=end, retry=_RETRY, timeout=_TIMEOUT
                    )
                )
            except gexc.NotFound:
                pass
            else:
                if limit is not None and len(data) > limit:
                    raise self._too_large(key, limit)
                return data
        # A 404 does not say whether the object or the whole bucket is missing:
        # ask once, so that a wrong bucket fails fast instead of timing out.
        if not self._bucket_seen:
            self.check()
        return None

    def _create_stream(self, key: str, pieces: Iterable[bytes]) -> bool:
        """A wheelhouse, as one resumable upload of :data:`PART`-byte chunks (at most about
        one chunk in memory).  Not conditional: it is stored by its content's digest, so a
        racing writer stores the same packages (sealed apart, each whole and valid).  A
        failure cancels the upload: no object is left, whole or cut short."""
        blob = self.gbucket.blob(self._name(key), chunk_size=PART)
        # The writer's exit cancels the upload on an exception and finishes it else.
        with self._op("write", key), blob.open("wb", retry=_RETRY, timeout=_TIMEOUT) as out:
            for piece in pieces:
                out.write(piece)
        return True

    def _read_stream(self, key: str) -> Iterator[bytes] | None:
        """The object in ranged reads of :data:`READ_PIECE` bytes, all of the generation
        found first (a replaced object fails the read, never mixes two)."""
        with self._op("read", key):
            blob = self.gbucket.get_blob(self._name(key), retry=_RETRY, timeout=_TIMEOUT)
        if blob is None:
            if not self._bucket_seen:
                self.check()  # a wrong bucket fails here, not as a missing object
            return None
        size, generation = int(blob.size or 0), blob.generation

        def pieces() -> Iterator[bytes]:
            with self._op("read", key):
                for start in range(0, size, READ_PIECE):
                    yield blob.download_as_bytes(
                        start=start,
                        end=min(start + READ_PIECE, size) - 1,  # inclusive
                        if_generation_match=generation,
                        checksum=None,  # a range has none; the records are sealed
                        retry=_RETRY,
                        timeout=_TIMEOUT,
                    )

        return pieces()

    def _list(self, prefix: str) -> list[str]:
        with self._op("list", prefix):
            blobs = self.client.list_blobs(
                self.gbucket, prefix=self._name(prefix), retry=_RETRY, timeout=_TIMEOUT
            )
            return sorted(self._rel(b.name) for b in blobs)

    def _delete_one(self, name: str) -> None:
        with contextlib.suppress(gexc.NotFound):  # deleted concurrently: goal reached
            self.gbucket.blob(name).delete(retry=_RETRY, timeout=_TIMEOUT)

    def _delete_prefix(self, prefix: str) -> None:
        names = [self._name(key) for key in self._list(prefix)]
        with self._op("delete", prefix), ThreadPoolExecutor(max_workers=8) as pool:
            # GCS has no multi-object delete in the JSON API; a few parallel deletes.
            list(pool.map(self._delete_one, names))
