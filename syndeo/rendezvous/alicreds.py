"""Alibaba Cloud credentials for the OSS rendezvous and the launcher, without an SDK.

The chain, in the order Alibaba Cloud's own tools read it:

1. ``ALIBABA_CLOUD_ACCESS_KEY_ID`` / ``ALIBABA_CLOUD_ACCESS_KEY_SECRET`` (and
   ``ALIBABA_CLOUD_SECURITY_TOKEN`` for STS credentials), or the older ``ALICLOUD_*``
   names the Terraform provider also reads;
2. a profile of the CLI's ``~/.aliyun/config.json`` (``ALIBABA_CLOUD_PROFILE``, else its
   current one; modes AK and StsToken);
3. on an ECS instance, the STS credentials of its RAM role (``ALIBABA_CLOUD_ECS_METADATA``
   names the role) from the metadata service in hardened mode: a token from
   ``PUT /latest/api/token`` (header ``X-aliyun-ecs-metadata-token-ttl-seconds``), then
   ``GET /latest/meta-data/ram/security-credentials/<role>`` with the token in
   ``X-aliyun-ecs-metadata-token``: ``{"Code": "Success", "AccessKeyId",
   "AccessKeySecret", "SecurityToken", "Expiration": "<UTC ISO>"}``.

``SYNDEO_ALIBABA_METADATA_URL`` points step 3 at a local fake (tests).
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

METADATA_URL = "http://100.100.100.200"
METADATA_ENV = "SYNDEO_ALIBABA_METADATA_URL"
ROLE_ENV = "ALIBABA_CLOUD_ECS_METADATA"
TOKEN_TTL_S = 21600
TIMEOUT_S = 2.0
KEY_ENV = ("ALIBABA_CLOUD_ACCESS_KEY_ID", "ALICLOUD_ACCESS_KEY")
SECRET_ENV = ("ALIBABA_CLOUD_ACCESS_KEY_SECRET", "ALICLOUD_SECRET_KEY")
TOKEN_ENV = ("ALIBABA_CLOUD_SECURITY_TOKEN", "ALICLOUD_SECURITY_TOKEN")
PROFILE_ENV = ("ALIBABA_CLOUD_PROFILE", "ALICLOUD_PROFILE")


@dataclass(frozen=True)
class Credentials:
    access_key_id: str
    access_key_secret: str
    security_token: str | None
    source: str  # where they came from (for `check` and error lines)
    expires: float | None = None  # epoch seconds (STS credentials)


class MetadataError(Exception):
    """The metadata service refused or did not answer."""


def _first(env: Mapping[str, str], names: tuple[str, ...]) -> str | None:
    return next((env[n] for n in names if env.get(n)), None)


def from_env_or_profile(env: Mapping[str, str] | None = None) -> Credentials | None:
    """Steps 1 and 2 of the chain (None: neither gives credentials)."""
    env = os.environ if env is None else env
    key, secret = _first(env, KEY_ENV), _first(env, SECRET_ENV)
    if key and secret:
        return Credentials(key, secret, _first(env, TOKEN_ENV), "environment")
    path = Path(env.get("HOME", str(Path.home()))) / ".aliyun" / "config.json"
    try:
        config = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(config, dict):
        return None
    wanted = _first(env, PROFILE_ENV) or config.get("current")
    for p in config.get("profiles", []):
        if not isinstance(p, dict) or p.get("name") != wanted:
            continue
        key, secret = p.get("access_key_id"), p.get("access_key_secret")
        if p.get("mode", "AK") in ("AK", "StsToken") and key and secret:
            token = p.get("sts_token") or None
            return Credentials(str(key), str(secret), token, f"profile {wanted} of {path}")
    return None


class EcsMetadata:
    """The ECS metadata service in hardened mode: every read carries a session token."""

    def __init__(self, base_url: str | None = None) -> None:
        self.base = (base_url or os.environ.get(METADATA_ENV) or METADATA_URL).rstrip("/")
        self._token: str | None = None
        self._token_until = 0.0

    def _request(self, path: str, headers: dict[str, str], method: str) -> tuple[int, bytes]:
        req = urllib.request.Request(f"{self.base}{path}", headers=headers, method=method)
        try:
            with urllib.request.urlopen(req, timeout=TIMEOUT_S) as resp:
                return int(resp.status), resp.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()
        except (urllib.error.URLError, OSError) as exc:
            raise MetadataError(f"{self.base}{path}: {getattr(exc, 'reason', exc)}") from None

    def _session_token(self) -> str:
        if self._token is None or time.monotonic() >= self._token_until:
            headers = {"X-aliyun-ecs-metadata-token-ttl-seconds": str(TOKEN_TTL_S)}
            code, body = self._request("/latest/api/token", headers, "PUT")
            if code != 200:
                raise MetadataError(f"the metadata service refused a token (HTTP {code})")
            self._token = body.decode().strip()
            self._token_until = time.monotonic() + TOKEN_TTL_S / 2
        return self._token

    def get(self, path: str) -> tuple[int, bytes]:
        """``GET /latest/meta-data/<path>`` with the token: (status, body)."""
        headers = {"X-aliyun-ecs-metadata-token": self._session_token()}
        code, body = self._request(f"/latest/meta-data/{path}", headers, "GET")
        if code in (401, 403):  # the token expired early: a new one next time
            self._token = None
            raise MetadataError(f"the metadata service refused the token (HTTP {code})")
        return code, body

    def role_credentials(self, role: str) -> Credentials:
        code, body = self.get(f"ram/security-credentials/{role}")
        if code != 200:
            raise MetadataError(f"no STS credentials for RAM role {role!r} (HTTP {code})")
        try:
            data = json.loads(body)
            expires = datetime.fromisoformat(str(data["Expiration"]).replace("Z", "+00:00"))
            creds = Credentials(
                str(data["AccessKeyId"]),
                str(data["AccessKeySecret"]),
                str(data["SecurityToken"]),
                f"RAM role {role} (ECS metadata)",
                expires.timestamp(),
            )
        except (ValueError, KeyError, TypeError):
            raise MetadataError(f"RAM role {role!r}: not a credentials document") from None
        if data.get("Code", "Success") != "Success":
            raise MetadataError(f"RAM role {role!r}: {data.get('Code')}")
        return creds
