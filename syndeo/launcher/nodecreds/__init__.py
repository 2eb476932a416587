"""Credentials for nodes that have no cloud identity of their own (ssh hosts, Slurm nodes).

Nodes on a cloud sign in as their instance's identity, scoped to the cluster's prefix by
the Terraform module.  Nodes on machines you already have (ssh, Slurm) reach an
``s3://``/``az://`` rendezvous with what the launcher forwards: before this module, the
launcher's own long-lived keys (readable by every process of every node).  Now:

* **S3** with long-term keys (an IAM user's): an STS federation token whose session
  policy allows only the cluster's prefix (``sts:GetFederationToken`` with ``Policy``;
  the effective permissions are the intersection with the user's own), for the cluster's
  expected life, at most STS's 36 h.  Temporary credentials (a role, SSO) cannot be
  federated: they are forwarded as the resolved key, secret and token (never a profile
  or a credentials file) and the launcher says they are not scoped.
* **Azure** with an account key: a container SAS (read, add, create, write, delete,
  list) that expires with the cluster, instead of the key that opens the whole account.
  A SAS cannot name a prefix in a flat namespace: it is the container's.  With an Azure AD
  (Entra) identity (a service principal, ``az login``, a managed identity): the same
  container SAS signed with a user delegation key the blob service gives that identity
  (syndeo/launcher/azure_sas.py), for the cluster's life but at most the key's seven days;
  the identity's own variables are not passed on.
* **GCS**: a downscoped token (Credential Access Boundary: objects under the cluster's
  prefix, listing with it only) from Google's STS.  It lives an hour and only its source
  credential can renew it, which a node must not hold: the launcher renews it while the
  cluster lives and hands it over sealed with the launch key (syndeo/launcher/gcs_tokens.py,
  syndeo/rendezvous/gstoken.py).  An emulator without an STS: forwarded as before.

The result replaces the forwarded credential variables; endpoints, region and proxy
settings are kept.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from syndeo.core.errors import ConfigError
from syndeo.launcher.nodecreds import azure_sas, gcs_tokens
from syndeo.rendezvous import passthrough_env
from syndeo.rendezvous._cloud import parse_bucket_uri
from syndeo.rendezvous.gstoken import EXPIRY_VAR, TOKEN_VAR

# STS GetFederationToken's bounds (its API reference: 900 s .. 129,600 s).
STS_MIN_S, STS_MAX_S = 900, 129_600
# Variables that name the launcher's own credentials (or where to find them): never
# forwarded once scoped ones replace them.
_AWS_OWN = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_CONFIG_FILE",
    "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_ROLE_ARN",
    "AWS_ROLE_SESSION_NAME",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_CONTAINER_AUTHORIZATION_TOKEN",
)
_AZ_OWN = (
    "AZURE_STORAGE_CONNECTION_STRING",
    "AZURE_STORAGE_KEY",
    "AZURE_STORAGE_SAS_TOKEN",
    "AZURE_CLIENT_ID",
    "AZURE_TENANT_ID",
    "AZURE_CLIENT_SECRET",
    "AZURE_CLIENT_CERTIFICATE_PATH",
    "AZURE_FEDERATED_TOKEN_FILE",
    "IDENTITY_ENDPOINT",
    "IDENTITY_HEADER",
    "MSI_ENDPOINT",
    "MSI_SECRET",
    "AZURE_AUTHORITY_HOST",
)


@dataclass
class NodeCredentials:
    """What nodes get instead of the launcher's variables, and what it is."""

    env: dict[str, str]
    kind: str  # "scoped", "container SAS", "temporary, not scoped", "forwarded", "none"
    expires_at: float | None = None
    # The credential variables in env when they are not the launcher's own (made for the
    # nodes, or resolved by value): empty means nodes get what the launcher forwards.
    names: list[str] = field(default_factory=list)

    def describe(self) -> str:
        until = (
            time.strftime(" until %Y-%m-%d %H:%M UTC", time.gmtime(self.expires_at))
            if self.expires_at
            else ""
        )
        return f"node credentials: {self.kind}{until}"


def session_policy(bucket: str, prefix: str, cluster_id: str) -> dict[str, Any]:
    """The S3 permissions of one cluster's nodes: its own records only (the same
    statements as the node role of terraform/aws)."""
    base = f"{prefix}/{cluster_id}/" if prefix else f"{cluster_id}/"
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "ListClusterPrefix",
                "Effect": "Allow",
                "Action": "s3:ListBucket",
                "Resource": f"arn:aws:s3:::{bucket}",
                "Condition": {"StringLike": {"s3:prefix": [f"{base}*"]}},
            },
            {
                "Sid": "ClusterRecords",
                "Effect": "Allow",
                "Action": ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"],
                "Resource": f"arn:aws:s3:::{bucket}/{base}*",
            },
        ],
    }


def node_credentials(
    uri: str, cluster_id: str, lifetime_s: float, environ: Mapping[str, str] | None = None
) -> NodeCredentials:
    """Credentials for nodes of ``cluster_id`` to reach the rendezvous ``uri`` for
    ``lifetime_s``; the variables of ``environ`` (default: this process's) they replace."""
    env = dict(os.environ if environ is None else environ)
    forwarded = passthrough_env(uri, env)
    if uri.startswith("s3://"):
        return _aws(uri, cluster_id, lifetime_s, env, forwarded)
    if uri.startswith("az://"):
        return _azure(uri, lifetime_s, env, forwarded)
    if uri.startswith("gs://") and not gcs_tokens.emulated(env):
        own = gcs_tokens.node_env(uri, cluster_id, env, forwarded)
        kind = "scoped to the cluster's prefix (1-hour tokens the launcher renews)"
        return NodeCredentials(own, kind, names=[TOKEN_VAR, EXPIRY_VAR])
    return NodeCredentials(forwarded, "forwarded" if forwarded else "none")


def _aws(
    uri: str, cluster_id: str, lifetime_s: float, env: dict[str, str], forwarded: dict[str, str]
) -> NodeCredentials:
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    keep = {k: v for k, v in forwarded.items() if k not in _AWS_OWN}
    session = boto3.session.Session(profile_name=env.get("AWS_PROFILE") or None)
    creds = session.get_credentials()
    if creds is None:
        return NodeCredentials(keep, "none")
    frozen = creds.get_frozen_credentials()
    if frozen.token:
        # STS federates only long-term keys: forward what was resolved, by value.
        own = {
            "AWS_ACCESS_KEY_ID": frozen.access_key,
            "AWS_SECRET_ACCESS_KEY": frozen.secret_key,
            "AWS_SESSION_TOKEN": frozen.token,
        }
        return NodeCredentials({**keep, **own}, "temporary, not scoped", names=sorted(own))
    if _sts_unknown(env):
        # An S3-compatible store of its own (MinIO, Ceph): STS is AWS's unless named.
        return NodeCredentials(
            forwarded,
            "forwarded, not scoped (a store at its own endpoint: set "
            "AWS_ENDPOINT_URL_STS if it offers STS GetFederationToken)",
        )
    bucket, prefix = parse_bucket_uri(uri, "s3")
    seconds = int(min(max(lifetime_s, STS_MIN_S), STS_MAX_S))
    try:
        token = session.client("sts").get_federation_token(
            # The name shows in CloudTrail as the federated user: which cluster it was.
            Name=f"syndeo-{cluster_id}"[:32],
            Policy=json.dumps(session_policy(bucket, prefix, cluster_id)),
            DurationSeconds=seconds,
        )["Credentials"]
    except (BotoCoreError, ClientError) as exc:
        raise ConfigError(
            f"aws: cannot make the nodes' credentials (sts:GetFederationToken): "
            f"{str(exc).splitlines()[0]}; allow it to your IAM user, or run the launcher with "
            "role credentials (they are forwarded unscoped)"
        ) from None
    own = {
        "AWS_ACCESS_KEY_ID": token["AccessKeyId"],
        "AWS_SECRET_ACCESS_KEY": token["SecretAccessKey"],
        "AWS_SESSION_TOKEN": token["SessionToken"],
    }
    expires = token["Expiration"]
    return NodeCredentials(
        {**keep, **own}, "scoped to the cluster's prefix", expires.timestamp(), sorted(own)
    )


def _sts_unknown(env: Mapping[str, str]) -> bool:
    """S3 at an endpoint of its own, and no STS endpoint named (nor one for every service)."""
    return bool(env.get("AWS_ENDPOINT_URL_S3") or env.get("SYNDEO_S3_ENDPOINT_URL")) and not (
        env.get("AWS_ENDPOINT_URL_STS") or env.get("AWS_ENDPOINT_URL")
    )


def _azure(
    uri: str, lifetime_s: float, env: dict[str, str], forwarded: dict[str, str]
) -> NodeCredentials:
    account, key, url = _azure_account_key(env)
    keep = {k: v for k, v in forwarded.items() if k not in _AZ_OWN and k != "AZURE_STORAGE_ACCOUNT"}
    container, _prefix = parse_bucket_uri(uri, "az")
    if key is None or account is None or url is None:
        if (endpoint := azure_sas.identity_endpoint(env)) is None:
            # A SAS of the user's own (forwarded as it is), or no credential at all.
            return NodeCredentials(forwarded, "forwarded" if forwarded else "none")
        # An Azure AD identity: a SAS signed with a key it is given, never the identity.
        made = azure_sas.user_delegation_sas(
            endpoint, container, lifetime_s, azure_sas.launcher_credential()
        )
        kind = f"a user-delegation SAS of container {container}" + (
            " (Azure's 7-day limit: the cluster may outlive it)" if made.capped else ""
        )
        own = {"SYNDEO_AZURE_ACCOUNT_URL": endpoint, "AZURE_STORAGE_SAS_TOKEN": made.token}
        return NodeCredentials(
            {**keep, **own}, kind, made.expires.timestamp(), ["AZURE_STORAGE_SAS_TOKEN"]
        )
    from datetime import UTC, datetime, timedelta

    from azure.storage.blob import ContainerSasPermissions, generate_container_sas

    expires = datetime.now(UTC) + timedelta(seconds=max(lifetime_s, STS_MIN_S))
    sas = generate_container_sas(
        account_name=account,
        container_name=container,
        account_key=key,
        permission=ContainerSasPermissions(
            read=True, add=True, create=True, write=True, delete=True, list=True
        ),
        expiry=expires,
        protocol="https" if url.startswith("https:") else "https,http",
    )
    own = {"SYNDEO_AZURE_ACCOUNT_URL": url, "AZURE_STORAGE_SAS_TOKEN": sas}
    return NodeCredentials(
        {**keep, **own},
        f"a SAS of container {container}",
        expires.timestamp(),
        ["AZURE_STORAGE_SAS_TOKEN"],
    )


def _azure_account_key(env: Mapping[str, str]) -> tuple[str | None, str | None, str | None]:
    """(account, key, blob endpoint) when the launcher holds an account key."""
    if conn := env.get("AZURE_STORAGE_CONNECTION_STRING"):
        parts = dict(p.split("=", 1) for p in conn.split(";") if "=" in p)
        account, key = parts.get("AccountName"), parts.get("AccountKey")
        url = parts.get("BlobEndpoint") or (
            account
            and f"{parts.get('DefaultEndpointsProtocol', 'https')}://{account}.blob."
            f"{parts.get('EndpointSuffix', 'core.windows.net')}"
        )
        return account, key, url
    account, key = env.get("AZURE_STORAGE_ACCOUNT"), env.get("AZURE_STORAGE_KEY")
    url = env.get("SYNDEO_AZURE_ACCOUNT_URL") or (
        account and f"https://{account}.blob.core.windows.net"
    )
    return account, key, url
