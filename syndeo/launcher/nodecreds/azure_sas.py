"""A user-delegation SAS for the nodes of an ``az://`` rendezvous when the launcher signs in
with an Azure AD (Entra) identity (a service principal, ``az login``, a managed identity:
DefaultAzureCredential) rather than an account key.

The launcher asks the blob service for a user delegation key (Get User Delegation Key,
``POST ?restype=service&comp=userdelegationkey``, Bearer authentication only) and signs a
container SAS with it.  The nodes get that SAS and nothing of the identity: a service
principal's secret or a managed identity's endpoint would let any process of any node act
as the launcher's identity on everything it may reach.  What the SAS allows is the
intersection of its permissions with the identity's own RBAC data permissions, and Azure
revokes it with the key (or when the identity loses its role).

Azure bounds the key to seven days from the service's clock; the SAS cannot outlive it.
"""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from syndeo.core.errors import ConfigError

# Get User Delegation Key: "the expiry must be within seven days of the current time".
UDK_MAX_S = 7 * 24 * 3600
# The service checks the bounds on its own clock: a few minutes of ours to spare both ways.
SKEW_S = 300
URL_VAR = "SYNDEO_AZURE_ACCOUNT_URL"
# What the rendezvous client would sign in with instead of a token (syndeo/rendezvous/az.py).
_NOT_A_TOKEN = ("AZURE_STORAGE_CONNECTION_STRING", "AZURE_STORAGE_KEY", "AZURE_STORAGE_SAS_TOKEN")


@dataclass(frozen=True)
class DelegatedSas:
    """A container SAS signed with a user delegation key."""

    token: str
    expires: datetime
    capped: bool  # shorter than the life asked for (the key's seven days)


def identity_endpoint(env: Mapping[str, str]) -> str | None:
    """The blob endpoint when the launcher's rendezvous client signs in with a token
    credential (no connection string, account key or SAS; azure-identity installed), as
    syndeo/rendezvous/az.py chooses; else None."""
    if any(env.get(k) for k in _NOT_A_TOKEN):
        return None
    account = env.get("AZURE_STORAGE_ACCOUNT")
    url = env.get(URL_VAR) or (account and f"https://{account}.blob.core.windows.net")
    if not url or importlib.util.find_spec("azure.identity") is None:
        return None  # the rendezvous itself says what is missing
    return url


def launcher_credential() -> Any:
    """The launcher's own token credential: the one its rendezvous client uses."""
    from azure.identity import DefaultAzureCredential

    # Its failed attempts are logged as multi-line warnings; our refusal is one line.
    logging.getLogger("azure.identity").setLevel(logging.ERROR)
    return DefaultAzureCredential()


def user_delegation_sas(
    url: str, container: str, lifetime_s: float, credential: Any, now: datetime | None = None
) -> DelegatedSas:
    """A SAS of ``container`` (read, add, create, write, delete, list) for ``lifetime_s``
    (at most the key's seven days), signed with a user delegation key that the blob service
    at ``url`` gives ``credential``."""
    from azure.core.exceptions import AzureError, ClientAuthenticationError, HttpResponseError
    from azure.storage.blob import (
        BlobServiceClient,
        ContainerSasPermissions,
        generate_container_sas,
    )

    now = now or datetime.now(UTC)
    longest = UDK_MAX_S - SKEW_S
    life = max(lifetime_s, 900)  # as the account-key SAS: never less than 15 minutes
    expires = now + timedelta(seconds=min(life, longest))
    # A refusal is not worth retrying, and an unreachable endpoint should not hold the
    # launcher for storage's default backoff (minutes).
    svc = BlobServiceClient(url, credential=credential, retry_total=1, connection_timeout=10)
    try:
        key = svc.get_user_delegation_key(now - timedelta(seconds=SKEW_S), expires)
    except ClientAuthenticationError as exc:
        if exc.response is None:  # raised by azure-identity: no token to ask with
            raise ConfigError(
                f"azure: cannot make the nodes' credentials: no usable Azure AD credential "
                f"({_first_line(exc)}); sign in (az login, a service principal, a managed "
                'identity), or set node_credentials = "forward"'
            ) from None
        raise _refused(url, exc) from None
    except HttpResponseError as exc:
        raise _refused(url, exc) from None
    except AzureError as exc:
        raise ConfigError(
            f"azure: cannot make the nodes' credentials: {url} unreachable "
            f"({type(exc).__name__}: {_first_line(exc)})"
        ) from None
    token = generate_container_sas(
        account_name=str(svc.account_name),
        container_name=container,
        user_delegation_key=key,
        permission=ContainerSasPermissions(
            read=True, add=True, create=True, write=True, delete=True, list=True
        ),
        expiry=expires,
        protocol="https" if url.startswith("https:") else "https,http",
    )
    return DelegatedSas(token, expires, capped=life > longest)


def _first_line(exc: Exception) -> str:
    text = str(getattr(exc, "message", None) or exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _refused(url: str, exc: Exception) -> ConfigError:
    """The service's refusal of Get User Delegation Key, on one line."""
    status = getattr(exc, "status_code", None)
    code = getattr(exc, "error_code", None)  # set by azure-storage, not declared by azure-core
    code = getattr(code, "value", code)  # a StorageErrorCode member: its wire name
    what = " ".join(str(p) for p in (status, code) if p)
    return ConfigError(
        f"azure: cannot make the nodes' credentials: {url} refused a user delegation key "
        f"({what}: {_first_line(exc)}); the identity needs a role with generateUserDelegationKey "
        "on the account (Storage Blob Delegator, or Storage Blob Data Contributor, which the "
        'rendezvous needs anyway), or set node_credentials = "forward"'
    )
