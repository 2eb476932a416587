"""Rendezvous backends, chosen by URI scheme and imported lazily.

``open_rendezvous("s3://bucket/prefix", cluster_id)`` imports boto3 only then;
importing :mod:`syndeo` never imports a cloud SDK.
"""

from __future__ import annotations

import importlib
from urllib.parse import urlparse

from syndeo.errors import RendezvousError
from syndeo.rendezvous.base import (
    DoneRecord,
    HeadRecord,
    NodeRecord,
    Poller,
    Rendezvous,
    StatusRecord,
)

# scheme -> (module, class).  Cloud backends live in their own modules so that
# their SDKs load only when such a URI is used.
BACKENDS: dict[str, tuple[str, str]] = {
    "file": ("syndeo.rendezvous.file", "FileRendezvous"),
    "s3": ("syndeo.rendezvous.s3", "S3Rendezvous"),
    "gs": ("syndeo.rendezvous.gs", "GCSRendezvous"),
    "az": ("syndeo.rendezvous.az", "AzureRendezvous"),
}


def open_rendezvous(uri: str, cluster_id: str, attempt: int = 0) -> Rendezvous:
    scheme = urlparse(uri).scheme
    if scheme not in BACKENDS:
        known = ", ".join(f"{s}://" for s in BACKENDS)
        raise RendezvousError(f"unsupported rendezvous URI {uri!r}: use one of {known}")
    module_name, class_name = BACKENDS[scheme]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise RendezvousError(
            f"the {scheme}:// rendezvous needs {exc.name!r}: pip install 'syndeo[cloud]'"
        ) from exc
    cls: type[Rendezvous] = getattr(module, class_name)
    return cls(uri, cluster_id, attempt)


__all__ = [
    "BACKENDS",
    "DoneRecord",
    "HeadRecord",
    "NodeRecord",
    "Poller",
    "Rendezvous",
    "StatusRecord",
    "open_rendezvous",
]
