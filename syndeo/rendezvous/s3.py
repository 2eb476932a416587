"""S3 rendezvous (``s3://bucket/prefix``) with boto3; also MinIO, Ceph and other S3 stores.

Credentials come from boto3's standard chain (env, profile, SSO, web identity,
instance role).  The endpoint is AWS unless ``AWS_ENDPOINT_URL_S3`` /
``AWS_ENDPOINT_URL`` (read by boto3 itself) or ``SYNDEO_S3_ENDPOINT_URL`` is set.
Atomic create is ``PutObject`` with ``If-None-Match: *`` (412 when it exists).
"""

from __future__ import annotations

import contextlib
import os
import random
import time
from collections.abc import Iterable, Iterator
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    HTTPClientError,
    NoCredentialsError,
)
from botocore.exceptions import ConnectionError as BotoConnectionError

from syndeo.rendezvous import _cloud

_ENDPOINT_ENV = "SYNDEO_S3_ENDPOINT_URL"
# A wheelhouse goes up in parts of this size (S3 takes 10,000 parts of one upload).
PART = 8 * 2**20

_DENIED = {
    "AccessDenied": "access denied (check the bucket policy and the IAM permissions)",
    "AllAccessDisabled": "access to the bucket is disabled",
    "InvalidAccessKeyId": "access denied: the access key id is unknown to this endpoint",
    "SignatureDoesNotMatch": "access denied: the secret access key is wrong",
    "ExpiredToken": "the credentials have expired (refresh the session token)",
    "TokenRefreshRequired": "the credentials have expired (refresh the session token)",
    "RequestExpired": "the credentials have expired or the clock is badly skewed",
    "InvalidToken": "the session token is invalid",
}
_WRONG_REGION = (
    "PermanentRedirect",
    "AuthorizationHeaderMalformed",
    "IllegalLocationConstraintException",
)


class S3Rendezvous(_cloud.CloudRendezvous):
    scheme = "s3"
    max_object = 10_000 * PART  # a multipart upload of 8 MiB parts
    service = "S3"
    env_passthrough = (
        *("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"),
        *("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"),
        *("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_CA_BUNDLE", _ENDPOINT_ENV),
        *("AWS_ROLE_ARN", "AWS_ROLE_SESSION_NAME", "AWS_WEB_IDENTITY_TOKEN_FILE"),
        *("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI"),
        *("AWS_CONTAINER_AUTHORIZATION_TOKEN", "AWS_EC2_METADATA_DISABLED"),
        *_cloud.NETWORK_ENV,
    )
    env_secrets = (
        *("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"),
        *("AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_WEB_IDENTITY_TOKEN_FILE"),
        *("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI"),
        "AWS_CONTAINER_AUTHORIZATION_TOKEN",
    )

    def __init__(self, uri: str, cluster_id: str, attempt: int = 0) -> None:
        super().__init__(uri, cluster_id, attempt)
        config = Config(
            retries={"mode": "standard", "max_attempts": _cloud.MAX_ATTEMPTS},
            connect_timeout=_cloud.CONNECT_TIMEOUT_S,
            read_timeout=_cloud.READ_TIMEOUT_S,
            max_pool_connections=64,  # many threads share one client in the launcher
            # Newer botocore adds CRC checksums that some S3-compatible stores reject.
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
        )
        with self._op("connect to"):
            # A session per object: boto3's default session is not thread-safe.
            self.client: Any = boto3.session.Session().client(
                "s3", endpoint_url=os.environ.get(_ENDPOINT_ENV) or None, config=config
            )

    def _denied(self, exc: Exception) -> bool:
        if isinstance(exc, NoCredentialsError):
            return True
        return isinstance(exc, ClientError) and str(exc.response.get("Error", {}).get("Code")) in (
            _DENIED
        )

    def _cause(self, exc: Exception) -> str | None:
        if isinstance(exc, NoCredentialsError):
            return (
                "no AWS credentials found (set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or "
                "AWS_PROFILE, or run with an instance role)"
            )
        if isinstance(exc, ClientError):
            err = exc.response.get("Error", {})
            code = str(err.get("Code", ""))
            meta = exc.response.get("ResponseMetadata", {})
            if code == "NoSuchBucket":
                return "the bucket does not exist"
            if code in _DENIED:
                return _DENIED[code]
            status = meta.get("HTTPStatusCode")
            if code in _WRONG_REGION or status == 301:
                region = meta.get("HTTPHeaders", {}).get("x-amz-bucket-region")
                where = f"it is in {region}" if region else "S3 redirected the request"
                return f"wrong region for the bucket ({where}): set AWS_REGION"
            return f"{code or status}: {err.get('Message', '') or 'request failed'}"
        if isinstance(exc, BotoConnectionError | HTTPClientError):
            client = getattr(self, "client", None)
            where = client.meta.endpoint_url if client else "S3"
            return f"endpoint {where} unreachable ({type(exc).__name__})"
        if isinstance(exc, BotoCoreError):
            return str(exc)  # ProfileNotFound, PartialCredentialsError, ...
        return None

    @staticmethod
    def _code(exc: ClientError) -> str:
        return str(exc.response.get("Error", {}).get("Code", ""))

    # ------------------------------------------------------------------ primitives
    def check(self) -> None:
        with self._op("list", ""):
            self.client.list_objects_v2(Bucket=self.bucket, Prefix=self.base, MaxKeys=1)

    def _put_if_absent(self, name: str, data: bytes) -> bool:
        for _ in range(_cloud.MAX_ATTEMPTS):
            try:
                self.client.put_object(Bucket=self.bucket, Key=name, Body=data, IfNoneMatch="*")
                return True
            except ClientError as exc:
                if self._code(exc) == "PreconditionFailed":
                    return False
                if self._code(exc) != "ConditionalRequestConflict":
                    raise
                # 409: a concurrent conditional write is in flight; AWS says retry.
                time.sleep(random.uniform(0.05, 0.2))
        return False

    def _write(self, key: str, data: bytes) -> None:
        with self._op("write", key):
            self.client.put_object(Bucket=self.bucket, Key=self._name(key), Body=data)

    def _get(self, key: str) -> Any:
        """The object's GetObject answer, or None where there is none."""
        try:
            return self.client.get_object(Bucket=self.bucket, Key=self._name(key))
        except ClientError as exc:
            if self._code(exc) == "NoSuchKey":
                return None
            raise

    def _read(self, key: str, limit: int | None = None) -> bytes | None:
        with self._op("read", key):
            obj = self._get(key)
            if obj is None:
                return None
            body = obj["Body"]
            if limit is None:
                return bytes(body.read())
            # The length is known before the body is read: a larger blob is not read.
            if int(obj.get("ContentLength", 0)) > limit:
                body.close()
                raise self._too_large(key, limit)
            data = bytes(body.read(limit + 1))
            body.close()
        if len(data) > limit:
            raise self._too_large(key, limit)
        return data

    def _create_stream(self, key: str, pieces: Iterable[bytes]) -> bool:
        """A wheelhouse, in parts of :data:`PART` bytes (at most one part in memory).  Not
        conditional: it is stored by its content's digest, so a racing writer stores the
        same packages (sealed apart, each whole and valid)."""
        name, buf, upload = self._name(key), bytearray(), None
        parts: list[dict[str, Any]] = []
        with self._op("write", key):
            try:
                for piece in pieces:
                    buf += piece
                    while len(buf) >= PART:
                        upload = (
                            upload
                            or self.client.create_multipart_upload(Bucket=self.bucket, Key=name)[
                                "UploadId"
                            ]
                        )
                        parts.append(
                            self._part(name, upload, len(parts) + 1, bytes(memoryview(buf)[:PART]))
                        )
                        del buf[:PART]
                if upload is None:
                    self.client.put_object(Bucket=self.bucket, Key=name, Body=bytes(buf))
                    return True
                if buf:
                    parts.append(self._part(name, upload, len(parts) + 1, bytes(buf)))
                self.client.complete_multipart_upload(
                    Bucket=self.bucket, Key=name, UploadId=upload, MultipartUpload={"Parts": parts}
                )
            except BaseException:
                if upload is not None:
                    with contextlib.suppress(Exception):
                        self.client.abort_multipart_upload(
                            Bucket=self.bucket, Key=name, UploadId=upload
                        )
                raise
        return True

    def _part(self, name: str, upload: str, number: int, data: bytes) -> dict[str, Any]:
        out = self.client.upload_part(
            Bucket=self.bucket, Key=name, UploadId=upload, PartNumber=number, Body=data
        )
        return {"PartNumber": number, "ETag": out["ETag"]}

    def _read_stream(self, key: str) -> Iterator[bytes] | None:
        """The object's body 1 MiB at a time (a wheelhouse: never whole in memory)."""
        with self._op("read", key):
            obj = self._get(key)
        if obj is None:
            return None
        body = obj["Body"]

        def pieces() -> Iterator[bytes]:
            with self._op("read", key):
                try:
                    yield from body.iter_chunks(1 << 20)
                finally:
                    body.close()

        return pieces()

    def _list(self, prefix: str) -> list[str]:
        with self._op("list", prefix):
            pages = self.client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=self._name(prefix)
            )
            return sorted(self._rel(o["Key"]) for page in pages for o in page.get("Contents", []))

    def _delete_prefix(self, prefix: str) -> None:
        names = [self._name(key) for key in self._list(prefix)]
        with self._op("delete", prefix):
            if len(names) == 1:
                # One key (a job's doorbell, a cancel request): a plain DELETE, which a
                # node's role may do on its cluster's keys.  The batch call is authorized
                # as an action on the bucket by some S3 implementations (moto), where a
                # role scoped to a prefix has no right.
                self.client.delete_object(Bucket=self.bucket, Key=names[0])
                return
            for i in range(0, len(names), 1000):  # DeleteObjects takes at most 1000 keys
                batch = [{"Key": n} for n in names[i : i + 1000]]
                out = self.client.delete_objects(
                    Bucket=self.bucket, Delete={"Objects": batch, "Quiet": True}
                )
                if out.get("Errors"):
                    first = out["Errors"][0]
                    raise ClientError({"Error": first}, "DeleteObjects")
