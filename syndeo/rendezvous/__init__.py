"""Rendezvous backends, chosen by URI scheme and imported lazily.

``open_rendezvous("s3://bucket/prefix", cluster_id)`` imports boto3 only then;
importing :mod:`syndeo` never imports a cloud SDK.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping
from urllib.parse import urlparse

from syndeo.core.errors import RendezvousError
from syndeo.core.poll import Poller
from syndeo.rendezvous.base import (
    ClaimRecord,
    Control,
    DoneRecord,
    HeadCheck,
    HeadRecord,
    InterruptRecord,
    JobPhase,
    JobSpec,
    JobState,
    NodeRecord,
    PayloadRefused,
    Phase,
    ReadyRecord,
    Rendezvous,
    StatusRecord,
    WantedRecord,
)

# scheme -> (module, class).  Cloud backends live in their own modules so that
# their SDKs load only when such a URI is used.
BACKENDS: dict[str, tuple[str, str]] = {
    "file": ("syndeo.rendezvous.file", "FileRendezvous"),
    "s3": ("syndeo.rendezvous.s3", "S3Rendezvous"),
    "gs": ("syndeo.rendezvous.gs", "GCSRendezvous"),
    "az": ("syndeo.rendezvous.az", "AzureRendezvous"),
    "oss": ("syndeo.rendezvous.oss", "OSSRendezvous"),
}


def backend_class(uri: str) -> type[Rendezvous]:
    """The backend class for ``uri`` (imports its SDK); one clear line if unusable."""
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
    return cls


def open_rendezvous(
    uri: str, cluster_id: str, attempt: int = 0, launch_key: str | None = None
) -> Rendezvous:
    """The cluster's rendezvous; with the cluster's ``launch_key``, which seals and opens
    its payloads (work dirs, wheels, output, results, last words), or without: then it
    stores and hands out none."""
    rdv = backend_class(uri)(uri, cluster_id, attempt)
    rdv.launch_key = launch_key
    return rdv


def passthrough_env(uri: str, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables (credentials, endpoints) a node needs to reach ``uri``, from ``environ``.

    Launchers add these to a node's environment when it starts with a clean one
    (``apptainer --cleanenv``, a fresh cloud VM).
    """
    env = os.environ if environ is None else environ
    return {k: env[k] for k in backend_class(uri).env_passthrough if k in env}


def without_secrets(uri: str, environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` without the credentials of ``uri``'s backend: what a node hands to
    processes that need no store (Ray's, the workload's; any task can read its env)."""
    secrets = set(backend_class(uri).env_secrets)
    return {k: v for k, v in environ.items() if k not in secrets}


__all__ = [
    "BACKENDS",
    "ClaimRecord",
    "Control",
    "DoneRecord",
    "HeadCheck",
    "HeadRecord",
    "InterruptRecord",
    "JobPhase",
    "JobSpec",
    "JobState",
    "NodeRecord",
    "PayloadRefused",
    "Phase",
    "Poller",
    "ReadyRecord",
    "Rendezvous",
    "StatusRecord",
    "WantedRecord",
    "backend_class",
    "open_rendezvous",
    "passthrough_env",
    "without_secrets",
]
