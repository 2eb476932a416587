"""What the S3, GCS and Azure Blob backends share: URI layout, error wording, retry budget.

``<scheme>://<bucket>/<prefix>`` stores cluster ``c`` under ``<prefix>/c/``; keys
handed to the primitives are relative to that.  SDK exceptions never escape: a
backend maps each to a short cause and :meth:`CloudRendezvous._op` turns it into
one :class:`RendezvousError` line naming the object and the cause.
"""

from __future__ import annotations

import contextlib
import re
from abc import abstractmethod
from collections.abc import Iterator
from typing import ClassVar
from urllib.parse import urlparse

from syndeo.core.errors import RendezvousDenied, RendezvousError
from syndeo.rendezvous.base import Rendezvous

# Retry budget, the same for every SDK: a few attempts with exponential backoff
# and jitter (the SDKs add the jitter), short timeouts.  A dead endpoint thus
# fails within ~10 s instead of the SDK defaults (minutes), and hundreds of
# polling workers cannot turn a hiccup into a retry storm.
MAX_ATTEMPTS = 4
CONNECT_TIMEOUT_S = 3.0
READ_TIMEOUT_S = 10.0
RETRY_BUDGET_S = 8.0  # GCS bounds retries by total time rather than attempts

# Read by every SDK's HTTP stack; forwarded into containers with the credentials.
NETWORK_ENV: tuple[str, ...] = (
    "HTTPS_PROXY",
    "HTTP_PROXY",
    "NO_PROXY",
    "https_proxy",
    "http_proxy",
    "no_proxy",
    "REQUESTS_CA_BUNDLE",
    "SSL_CERT_FILE",
)

_BUCKET_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]$")


def parse_bucket_uri(uri: str, scheme: str) -> tuple[str, str]:
    """``s3://bucket/a/b/`` -> ``("bucket", "a/b")``; bad input -> one clear line."""
    parsed = urlparse(uri)
    if parsed.scheme != scheme:
        raise RendezvousError(f"not a {scheme}:// URI: {uri!r}")
    bucket = parsed.netloc
    if not _BUCKET_RE.match(bucket):
        raise RendezvousError(
            f"invalid bucket/container {bucket!r} in {uri!r}: expected {scheme}://NAME/PREFIX "
            "with a lowercase name of 3+ characters (a-z, 0-9, '.', '-', '_')"
        )
    if parsed.query or parsed.fragment or parsed.params:
        raise RendezvousError(f"{uri!r}: query strings and fragments are not supported")
    prefix = parsed.path.strip("/")
    if any(part in ("", ".", "..") for part in prefix.split("/")) and prefix:
        raise RendezvousError(f"invalid prefix {parsed.path!r} in {uri!r}")
    return bucket, prefix


class CloudRendezvous(Rendezvous):
    """Base of the object-store backends; subclasses implement the ``_obj_*`` calls."""

    service: ClassVar[str]  # "S3", "GCS", "Azure Blob": used in messages

    def __init__(self, uri: str, cluster_id: str, attempt: int = 0) -> None:
        super().__init__(uri, cluster_id, attempt)
        self.bucket, self.prefix = parse_bucket_uri(uri, self.scheme)
        # Trailing "/" so that cluster "a" never lists the records of cluster "ab".
        self.base = f"{self.prefix}/{cluster_id}/" if self.prefix else f"{cluster_id}/"

    # ------------------------------------------------------------------ naming
    def _name(self, key: str) -> str:
        if key.startswith("/") or ".." in key.split("/"):
            raise RendezvousError(f"invalid rendezvous key {key!r}")
        return self.base + key

    def _rel(self, name: str) -> str:
        return name[len(self.base) :]

    def _where(self, key: str | None = None) -> str:
        return f"{self.scheme}://{self.bucket}/" + (self._name(key) if key is not None else "")

    # ------------------------------------------------------------------ errors
    @abstractmethod
    def _cause(self, exc: Exception) -> str | None:
        """A short human cause for an SDK exception; None = not ours (a bug): re-raise."""

    @abstractmethod
    def _denied(self, exc: Exception) -> bool:
        """Whether ``exc`` is the store refusing us (denied, no or bad credentials)."""

    @contextlib.contextmanager
    def _op(self, action: str, key: str | None = None) -> Iterator[None]:
        try:
            yield
        except RendezvousError:
            raise
        except Exception as exc:
            cause = self._cause(exc)
            if cause is None:
                raise
            kind = RendezvousDenied if self._denied(exc) else RendezvousError
            raise kind(
                f"{self.service} rendezvous: cannot {action} {self._where(key)}: {cause}"
            ) from exc

    # ------------------------------------------------------------------ create
    @abstractmethod
    def _put_if_absent(self, name: str, data: bytes) -> bool:
        """Conditional create of object ``name``; False if it already exists."""

    def _create(self, key: str, data: bytes) -> bool:
        with self._op("create", key):
            if self._put_if_absent(self._name(key), data):
                return True
        # The SDK retries a create whose reply was lost; the retry then finds the
        # object that its own first attempt wrote.  Records created this way carry
        # a random nonce or token, so identical bytes mean the object is ours.
        return self._read(key) == data
