"""OSS rendezvous (``oss://bucket/prefix``): Alibaba Cloud Object Storage Service through
its S3-compatible API, with the S3 backend's client (boto3).

- Endpoint: ``SYNDEO_OSS_ENDPOINT`` (terraform/alibaba gives the nodes the region's
  internal one), else the public ``https://s3.oss-<ALIBABA_CLOUD_REGION>.aliyuncs.com``
  (the S3-compatible endpoints of OSS's "Use AWS SDKs to access OSS").
- Addressing: virtual-hosted only (``https://<bucket>.s3.oss-<region>.aliyuncs.com/<key>``):
  OSS refuses path-style requests.  Signed with AWS Signature Version 4 over the region
  id (cn-hangzhou), without aws-chunked uploads: that guide says boto3's V4 uploads fail
  on OSS (InvalidArgument) because they are chunked, which they are only when botocore
  adds a trailing checksum: ``request_checksum_calculation="when_required"`` keeps
  PutObject a plain body (tests/rendezvous/test_oss.py checks the headers sent).
- Credentials: Alibaba Cloud's chain (:mod:`syndeo.rendezvous.alicreds`): environment,
  CLI profile, else the ECS instance's RAM role (STS, refreshed before it expires).
- Atomic create: one ``PutObject`` carrying both ``If-None-Match: *`` (S3's conditional
  create: 412 PreconditionFailed) and ``x-oss-forbid-overwrite: true`` (OSS's own: 409
  FileAlreadyExists); either refusal means the object exists.  OSS ignores its header
  on a versioned bucket (terraform/alibaba leaves versioning off).
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from typing import Any, ClassVar

import boto3
import botocore.session
from botocore.config import Config
from botocore.credentials import CredentialProvider, CredentialResolver, RefreshableCredentials
from botocore.credentials import Credentials as BotoCredentials
from botocore.exceptions import ClientError

from syndeo.core.errors import RendezvousError
from syndeo.rendezvous import _cloud, alicreds
from syndeo.rendezvous.s3 import PART, S3Rendezvous

ENDPOINT_ENV = "SYNDEO_OSS_ENDPOINT"
REGION_ENV = "ALIBABA_CLOUD_REGION"
# OSS's own create-if-absent answer (the S3 one is PreconditionFailed).
_EXISTS = ("PreconditionFailed", "FileAlreadyExists")


class _AlibabaChain(CredentialProvider):  # type: ignore[misc]
    """botocore's credentials from Alibaba Cloud's chain, and from nothing else (an AWS
    key in the environment would only be refused by OSS)."""

    METHOD = "alibaba-cloud"

    def load(self) -> BotoCredentials | None:
        found = alicreds.from_env_or_profile()
        if found is not None:
            return BotoCredentials(
                found.access_key_id, found.access_key_secret, found.security_token
            )
        role = os.environ.get(alicreds.ROLE_ENV)
        if not role:
            return None
        metadata = alicreds.EcsMetadata()

        def fetch() -> dict[str, Any]:
            c = metadata.role_credentials(role)
            expiry = datetime.fromtimestamp(c.expires or 0, UTC)
            return {
                "access_key": c.access_key_id,
                "secret_key": c.access_key_secret,
                "token": c.security_token,
                "expiry_time": expiry.isoformat(),
            }

        return RefreshableCredentials.create_from_metadata(fetch(), fetch, self.METHOD)


class OSSRendezvous(S3Rendezvous):
    scheme = "oss"
    max_object = 10_000 * PART  # a multipart upload (S3Rendezvous._create_stream)
    service = "OSS"
    env_passthrough: ClassVar[tuple[str, ...]] = (  # type: ignore[misc]
        *alicreds.KEY_ENV,
        *alicreds.SECRET_ENV,
        *alicreds.TOKEN_ENV,
        *alicreds.PROFILE_ENV,
        alicreds.ROLE_ENV,
        alicreds.METADATA_ENV,
        REGION_ENV,
        ENDPOINT_ENV,
        *_cloud.NETWORK_ENV,
    )
    env_secrets: ClassVar[tuple[str, ...]] = (  # type: ignore[misc,assignment]
        *alicreds.KEY_ENV,
        *alicreds.SECRET_ENV,
        *alicreds.TOKEN_ENV,
    )

    def __init__(self, uri: str, cluster_id: str, attempt: int = 0) -> None:
        # The S3 backend's primitives, not its client: this one is OSS's.
        _cloud.CloudRendezvous.__init__(self, uri, cluster_id, attempt)
        region = os.environ.get(REGION_ENV)
        endpoint = os.environ.get(ENDPOINT_ENV) or (
            f"https://s3.oss-{region}.aliyuncs.com" if region else None
        )
        if endpoint is None:
            raise RendezvousError(
                f"OSS rendezvous: set {ENDPOINT_ENV} (https://s3.oss-<region>.aliyuncs.com) "
                f"or {REGION_ENV}"
            )
        config = Config(
            s3={"addressing_style": "virtual"},
            signature_version="s3v4",
            retries={"mode": "standard", "max_attempts": _cloud.MAX_ATTEMPTS},
            connect_timeout=_cloud.CONNECT_TIMEOUT_S,
            read_timeout=_cloud.READ_TIMEOUT_S,
            max_pool_connections=64,
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
        )
        core = botocore.session.Session()
        core.register_component("credential_provider", CredentialResolver([_AlibabaChain()]))
        with self._op("connect to"):
            self.client: Any = boto3.session.Session(botocore_session=core).client(
                "s3", endpoint_url=endpoint, region_name=region or "oss", config=config
            )
        self.client.meta.events.register("before-sign.s3.PutObject", self._forbid_overwrite)

    def _forbid_overwrite(self, request: Any, **_: Any) -> None:
        # Only on a create (If-None-Match set): plain writes replace on purpose.
        if request.headers.get("If-None-Match") == "*":
            request.headers["x-oss-forbid-overwrite"] = "true"

    def _cause(self, exc: Exception) -> str | None:
        if isinstance(exc, alicreds.MetadataError):
            return f"no STS credentials from the ECS metadata service ({exc})"
        cause = super()._cause(exc)
        if cause is not None and cause.startswith("no AWS credentials"):
            return (
                "no Alibaba Cloud credentials (ALIBABA_CLOUD_ACCESS_KEY_ID/_SECRET, a profile "
                f"of ~/.aliyun/config.json, or {alicreds.ROLE_ENV} on an ECS instance)"
            )
        if cause is not None and cause.startswith("wrong region"):
            return f"wrong region for the bucket: set {ENDPOINT_ENV} to its region's endpoint"
        return cause

    def _put_if_absent(self, name: str, data: bytes) -> bool:
        try:
            self.client.put_object(Bucket=self.bucket, Key=name, Body=data, IfNoneMatch="*")
        except ClientError as exc:
            if self._code(exc) in _EXISTS:
                return False
            raise
        return True
