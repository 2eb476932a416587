"""Alibaba Cloud's credential chain and its RPC-style API, in plain HTTP (no SDK).

The launcher's credentials come from the chain every Alibaba Cloud tool reads
(:mod:`syndeo.rendezvous.alicreds`: environment, then a profile of the CLI's
``~/.aliyun/config.json``).  Terraform's alicloud provider reads the same variables and
file, so what ``check`` proves is what the apply uses.

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
from datetime import UTC, datetime
from typing import Any

from syndeo.core.errors import ConfigError
from syndeo.rendezvous import alicreds
from syndeo.rendezvous.alicreds import Credentials

ECS_URL = "https://ecs.aliyuncs.com"
ECS_VERSION = "2014-05-26"


def credentials(env: Mapping[str, str] | None = None) -> Credentials:
    """The launcher's credentials; one line naming the ways to give them if none."""
    found = alicreds.from_env_or_profile(env)
    if found is None:
        raise ConfigError(
            "alibaba: no Alibaba Cloud credentials found (ALIBABA_CLOUD_ACCESS_KEY_ID and "
            "ALIBABA_CLOUD_ACCESS_KEY_SECRET, or `aliyun configure` for ~/.aliyun/config.json)"
        )
    return found


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
