"""Alibaba Cloud's credential chain and its RPC-style API, in plain HTTP (no SDK).

The launcher's credentials come from the chain every Alibaba Cloud tool reads, in this
order: ``ALIBABA_CLOUD_ACCESS_KEY_ID`` / ``ALIBABA_CLOUD_ACCESS_KEY_SECRET`` (with
``ALIBABA_CLOUD_SECURITY_TOKEN`` for STS credentials; the older ``ALICLOUD_ACCESS_KEY``
/ ``ALICLOUD_SECRET_KEY`` / ``ALICLOUD_SECURITY_TOKEN`` that the Terraform provider also
reads), then a profile of the CLI's ``~/.aliyun/config.json`` (``ALIBABA_CLOUD_PROFILE``,
else its current one; modes AK and StsToken).  Terraform's alicloud provider reads the
same variables and file, so what ``check`` proves is what the apply uses.

RPC requests are signed with signature version 1.0 (HMAC-SHA1 over the sorted,
RFC 3986-encoded query; Alibaba Cloud API reference, "Request signatures").
``SYNDEO_ALIBABA_ECS_URL`` points the calls at a local fake in tests.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from syndeo.core.errors import ConfigError

ECS_URL = "https://ecs.aliyuncs.com"
ECS_VERSION = "2014-05-26"


@dataclass(frozen=True)
class Credentials:
    access_key_id: str
    access_key_secret: str
    security_token: str | None
    source: str  # where they came from, for `check`


def _first(env: Mapping[str, str], *names: str) -> str | None:
    return next((env[n] for n in names if env.get(n)), None)


def credentials(env: Mapping[str, str] | None = None) -> Credentials:
    """The launcher's credentials; one line naming the ways to give them if none."""
    env = os.environ if env is None else env
    key = _first(env, "ALIBABA_CLOUD_ACCESS_KEY_ID", "ALICLOUD_ACCESS_KEY")
    secret = _first(env, "ALIBABA_CLOUD_ACCESS_KEY_SECRET", "ALICLOUD_SECRET_KEY")
    token = _first(env, "ALIBABA_CLOUD_SECURITY_TOKEN", "ALICLOUD_SECURITY_TOKEN")
    if key and secret:
        return Credentials(key, secret, token, "environment")
    found = _profile(env)
    if found is not None:
        return found
    raise ConfigError(
        "alibaba: no Alibaba Cloud credentials found (ALIBABA_CLOUD_ACCESS_KEY_ID and "
        "ALIBABA_CLOUD_ACCESS_KEY_SECRET, or `aliyun configure` for ~/.aliyun/config.json)"
    )


def _profile(env: Mapping[str, str]) -> Credentials | None:
    path = Path(env.get("HOME", str(Path.home()))) / ".aliyun" / "config.json"
    try:
        config = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    wanted = _first(env, "ALIBABA_CLOUD_PROFILE", "ALICLOUD_PROFILE") or config.get("current")
    for p in config.get("profiles", []) if isinstance(config, dict) else []:
        if not isinstance(p, dict) or p.get("name") != wanted:
            continue
        key, secret = p.get("access_key_id"), p.get("access_key_secret")
        if p.get("mode", "AK") in ("AK", "StsToken") and key and secret:
            token = p.get("sts_token") or None
            return Credentials(str(key), str(secret), token, f"profile {wanted} of {path}")
    return None


def _encode(value: str) -> str:
    return urllib.parse.quote(value, safe="~")


def signed_query(params: Mapping[str, str], creds: Credentials, method: str = "GET") -> str:
    """``params`` with the common parameters and their signature 1.0, as a query."""
    full = {
        **params,
        "Format": "JSON",
        "AccessKeyId": creds.access_key_id,
        "SignatureMethod": "HMAC-SHA1",
        "SignatureVersion": "1.0",
        "SignatureNonce": secrets.token_hex(16),
        "Timestamp": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    if creds.security_token:
        full["SecurityToken"] = creds.security_token
    canonical = "&".join(f"{_encode(k)}={_encode(v)}" for k, v in sorted(full.items()))
    to_sign = f"{method}&{_encode('/')}&{_encode(canonical)}"
    key = (creds.access_key_secret + "&").encode()
    digest = hmac.new(key, to_sign.encode(), hashlib.sha1).digest()
    full["Signature"] = base64.b64encode(digest).decode()
    return urllib.parse.urlencode(full, quote_via=urllib.parse.quote)


class ApiError(Exception):
    def __init__(self, code: str, message: str, status: int) -> None:
        super().__init__(f"{code}: {message}")
        self.code, self.status = code, status


def call(action: str, params: Mapping[str, str], creds: Credentials) -> dict[str, Any]:
    """One ECS API call; ApiError with the service's code, or ConfigError if unreachable."""
    base = os.environ.get("SYNDEO_ALIBABA_ECS_URL", ECS_URL).rstrip("/")
    query = signed_query({"Action": action, "Version": ECS_VERSION, **params}, creds)
    try:
        with urllib.request.urlopen(f"{base}/?{query}", timeout=30) as reply:
            return dict(json.loads(reply.read() or b"{}"))
    except urllib.error.HTTPError as exc:
        try:
            body = json.loads(exc.read() or b"{}")
        except ValueError:
            body = {}
        code, message = str(body.get("Code", exc.code)), str(body.get("Message", ""))
        raise ApiError(code, message, exc.code) from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise ConfigError(f"alibaba: cannot reach the ECS API at {base} ({exc})") from None
