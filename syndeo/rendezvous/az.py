"""Azure Blob rendezvous (``az://container/prefix``) with azure-storage-blob.

The storage account comes from the environment, like the Azure CLI:
``AZURE_STORAGE_CONNECTION_STRING``, or ``AZURE_STORAGE_ACCOUNT`` (or a full
``SYNDEO_AZURE_ACCOUNT_URL`` for other clouds/emulators) with ``AZURE_STORAGE_KEY``,
``AZURE_STORAGE_SAS_TOKEN`` or, if azure-identity is installed,
DefaultAzureCredential (managed identity, workload identity, az login).
Atomic create is an upload with ``overwrite=False`` (``If-None-Match: *``).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterable, Iterator
from typing import Any

from azure.core import MatchConditions
from azure.core.exceptions import (
    ClientAuthenticationError,
    HttpResponseError,
    ResourceNotFoundError,
    ServiceRequestError,
    ServiceResponseError,
)
from azure.storage.blob import BlobServiceClient, ExponentialRetry

from syndeo.core.errors import RendezvousError
from syndeo.rendezvous import _cloud

_URL_ENV = "SYNDEO_AZURE_ACCOUNT_URL"
# A wheelhouse goes up in blocks of this size (a block blob holds 50,000) and comes
# back in ranged reads of this size.
PART = 8 * 2**20
READ_PIECE = 2**20


def _credential() -> Any:
    if key := os.environ.get("AZURE_STORAGE_KEY"):
        return key
    if sas := os.environ.get("AZURE_STORAGE_SAS_TOKEN"):
        return sas
    try:
        from azure.identity import DefaultAzureCredential

        # Its failed attempts are logged as multi-line warnings; ours is one line.
        logging.getLogger("azure.identity").setLevel(logging.ERROR)
    except ModuleNotFoundError:
        raise RendezvousError(
            "Azure Blob rendezvous: no credential: set AZURE_STORAGE_CONNECTION_STRING, "
            "AZURE_STORAGE_KEY or AZURE_STORAGE_SAS_TOKEN, or pip install azure-identity"
        ) from None
    return DefaultAzureCredential()


def _code(exc: HttpResponseError) -> str | None:
    # azure-storage sets ``error_code`` on the exceptions it raises; azure-core does not declare it.
    code = getattr(exc, "error_code", None)
    return str(code) if code else None


class AzureRendezvous(_cloud.CloudRendezvous):
    scheme = "az"
    max_object = 50_000 * PART  # a block blob of 50,000 blocks (_create_stream)
    service = "Azure Blob"
    env_passthrough = (
        *("AZURE_STORAGE_CONNECTION_STRING", "AZURE_STORAGE_ACCOUNT", "AZURE_STORAGE_KEY"),
        *("AZURE_STORAGE_SAS_TOKEN", _URL_ENV, "AZURE_CLIENT_ID", "AZURE_TENANT_ID"),
        *("AZURE_CLIENT_SECRET", "AZURE_CLIENT_CERTIFICATE_PATH", "AZURE_FEDERATED_TOKEN_FILE"),
        *("AZURE_AUTHORITY_HOST", "IDENTITY_ENDPOINT", "IDENTITY_HEADER", "MSI_ENDPOINT"),
        *("MSI_SECRET",),
        *_cloud.NETWORK_ENV,
    )
    env_secrets = (
        *("AZURE_STORAGE_CONNECTION_STRING", "AZURE_STORAGE_KEY", "AZURE_STORAGE_SAS_TOKEN"),
        *("AZURE_CLIENT_SECRET", "AZURE_CLIENT_CERTIFICATE_PATH", "AZURE_FEDERATED_TOKEN_FILE"),
        *("IDENTITY_HEADER", "MSI_SECRET"),
    )

    def __init__(self, uri: str, cluster_id: str, attempt: int = 0) -> None:
        super().__init__(uri, cluster_id, attempt)
        options: dict[str, Any] = {
            # Storage's default backoff is 15 s + 3**n; same shape, ~8 s over 3 retries.
            "retry_policy": ExponentialRetry(
                initial_backoff=0.3,  # type: ignore[arg-type]  # floats work; stubs say int
                increment_base=1.5,  # type: ignore[arg-type]
                retry_total=_cloud.MAX_ATTEMPTS - 1,
                random_jitter_range=0.5,  # type: ignore[arg-type]
            ),
            "connection_timeout": _cloud.CONNECT_TIMEOUT_S,
            "read_timeout": _cloud.READ_TIMEOUT_S,
        }
        if conn := os.environ.get("AZURE_STORAGE_CONNECTION_STRING"):
            try:
                svc = BlobServiceClient.from_connection_string(conn, **options)
            except ValueError as exc:
                raise RendezvousError(f"invalid AZURE_STORAGE_CONNECTION_STRING: {exc}") from None
        else:
            account = os.environ.get("AZURE_STORAGE_ACCOUNT")
            url = os.environ.get(_URL_ENV) or (
                account and f"https://{account}.blob.core.windows.net"
            )
            if not url:
                raise RendezvousError(
                    f"Azure Blob rendezvous {uri}: no storage account: set "
                    "AZURE_STORAGE_CONNECTION_STRING or AZURE_STORAGE_ACCOUNT"
                )
            svc = BlobServiceClient(url, credential=_credential(), **options)
        self.endpoint = svc.url
        self.container: Any = svc.get_container_client(self.bucket)

    def _denied(self, exc: Exception) -> bool:
        return isinstance(exc, ClientAuthenticationError) or (
            isinstance(exc, HttpResponseError) and exc.status_code == 403
        )

    def _cause(self, exc: Exception) -> str | None:
        if isinstance(exc, ClientAuthenticationError):
            if exc.response is None:  # raised by azure-identity, not by the service
                return f"no usable Azure credential ({str(exc).splitlines()[0]})"
            return "access denied: authentication failed (wrong account key, expired SAS/token?)"
        if isinstance(exc, ResourceNotFoundError) and _code(exc) == "ContainerNotFound":
            return "the container does not exist"
        if isinstance(exc, HttpResponseError) and exc.status_code == 403:
            return f"access denied ({_code(exc) or 'forbidden'})"
        if isinstance(exc, ServiceRequestError | ServiceResponseError):
            return f"endpoint {self.endpoint} unreachable ({type(exc).__name__})"
        if isinstance(exc, HttpResponseError):
            return f"{exc.status_code} {_code(exc) or exc.reason}"
        return None

    # ------------------------------------------------------------------ primitives
    def check(self) -> None:
        with self._op("list", ""):
            pages = self.container.list_blobs(name_starts_with=self.base, results_per_page=1)
            next(pages.by_page(), None)

    def _put_if_absent(self, name: str, data: bytes) -> bool:
        try:
            self.container.upload_blob(name, data, overwrite=False)
        except HttpResponseError as exc:
            # 409 BlobAlreadyExists; 412 when the service evaluates If-None-Match itself.
            if exc.status_code in (409, 412) and _code(exc) != "ContainerBeingDeleted":
                return False
            raise
        return True

    def _write(self, key: str, data: bytes) -> None:
        with self._op("write", key):
            self.container.upload_blob(self._name(key), data, overwrite=True)

    def _read(self, key: str, limit: int | None = None) -> bytes | None:
        with self._op("read", key):
            try:
                if limit is None:
                    return bytes(self.container.download_blob(self._name(key)).readall())
                # A ranged GET: never more than limit + 1 bytes, whatever the blob holds.
                stream = self.container.download_blob(self._name(key), offset=0, length=limit + 1)
                data = bytes(stream.readall())
                if len(data) > limit:
                    raise self._too_large(key, limit)
                return data
            except ResourceNotFoundError as exc:
                if _code(exc) == "ContainerNotFound":
                    raise
                return None

    def _create_stream(self, key: str, pieces: Iterable[bytes]) -> bool:
        """A wheelhouse, staged in blocks of :data:`PART` bytes (at most one block in
        memory) and committed at the end.  Not conditional: it is stored by its content's
        digest, so a racing writer stores the same packages (sealed apart, each whole and
        valid).  A failure commits nothing: no blob is left (Azure drops the staged blocks
        of a blob never committed)."""
        blob, buf = self.container.get_blob_client(self._name(key)), bytearray()
        ids: list[str] = []
        with self._op("write", key):
            for piece in pieces:
                buf += piece
                while len(buf) >= PART:
                    ids.append(self._stage(blob, len(ids), bytes(memoryview(buf)[:PART])))
                    del buf[:PART]
            if buf or not ids:
                ids.append(self._stage(blob, len(ids), bytes(buf)))
            blob.commit_block_list(ids)
        return True

    @staticmethod
    def _stage(blob: Any, number: int, data: bytes) -> str:
        block_id = f"{number:08d}"  # every id of a blob has the same length
        blob.stage_block(block_id, data, length=len(data))
        return block_id

    def _read_stream(self, key: str) -> Iterator[bytes] | None:
        """The blob in ranged reads of :data:`READ_PIECE` bytes, all of the version found
        first (a replaced blob fails the read, never mixes two)."""
        blob = self.container.get_blob_client(self._name(key))
        with self._op("read", key):
            try:
                props = blob.get_blob_properties()
            except ResourceNotFoundError as exc:
                if _code(exc) == "ContainerNotFound":
                    raise
                return None
        size, etag = int(props.size), props.etag

        def pieces() -> Iterator[bytes]:
            with self._op("read", key):
                for start in range(0, size, READ_PIECE):
                    yield blob.download_blob(
                        offset=start,
                        length=min(READ_PIECE, size - start),
                        etag=etag,
                        match_condition=MatchConditions.IfNotModified,
                    ).readall()

        return pieces()

    def _list(self, prefix: str) -> list[str]:
        with self._op("list", prefix):
            blobs = self.container.list_blobs(name_starts_with=self._name(prefix))
            return sorted(self._rel(b.name) for b in blobs)

    def _delete_prefix(self, prefix: str) -> None:
        names = [self._name(key) for key in self._list(prefix)]
        with self._op("delete", prefix):
            for i in range(0, len(names), 256):  # a blob batch holds at most 256 requests
                # Already-deleted blobs (a concurrent cleanup) are not a failure.
                self.container.delete_blobs(*names[i : i + 256], raise_on_any_failure=False)
        # Failures inside a batch are not raised (see above), and some endpoints refuse
        # the batch as a whole (Azurite on a non-loopback address: 400 InvalidInput):
        # whatever is left goes one by one, where a real failure does raise.
        for key in self._list(prefix) if names else []:
            with self._op("delete", key), contextlib.suppress(ResourceNotFoundError):
                self.container.delete_blob(self._name(key))
