"""Nodes of an ``az://`` rendezvous whose launcher signs in with an Azure AD (Entra)
identity get a container SAS signed with a user delegation key, never the identity
(syndeo/launcher/azure_sas.py).

Against Azurite with ``--oauth basic`` over HTTPS (testbeds.objectstores.azurite_oauth),
which serves Get User Delegation Key to a Bearer token of the storage audience.  The
launcher's identity is a managed identity (App Service's ``IDENTITY_ENDPOINT``, served
here on 127.0.0.1) taken by the real DefaultAzureCredential, or a stand-in credential
where a service principal would talk to login.microsoftonline.com.

Azurite 3.35 checks a user-delegation SAS against the 2025-07-05 string-to-sign;
azure-storage-blob 12.31 signs for 2026-10-06, which adds two lines (signed request
headers and query parameters, empty here), so Azurite refuses the SDK's SAS as it is
(403 AuthorizationFailure).  The tests check the SDK's signature against the key Azurite
gives (the same key value Azurite derives), then sign the same fields in Azurite's
layout to have Azurite judge what the SAS allows (its container, not another).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode

import pytest

from syndeo.core.errors import ConfigError
from syndeo.launcher.nodecreds import azure_sas, node_credentials
from syndeo.rendezvous import open_rendezvous
from testbeds.objectstores import AZURITE_ACCOUNT, Server, azurite_admin, azurite_oauth
from tests.launcher.conftest import StandInSbatch
from tests.support.helpers import environ

OID, TID = "5f0c7a52-0d1e-4e53-9e0b-0a1b2c3d4e5f", "72f988bf-86f1-41af-91ab-2d7cd011db47"
IDENTITY_SECRET = "identity-header-0123456789"  # recognisable wherever it would leak
SP_SECRET = "sp-secret-0123456789"
# Azurite's fixed secret from which it derives user delegation keys (its
# src/blob/utils/constants.ts USERDELEGATIONKEY_BASIC_KEY; utils.ts getUserDelegationKeyValue).
AZURITE_UDK_SECRET = (
    b"I17GKLvcJUossaebtsEDZZ2RJ8GNLwLH4m7hRMxbVbkx6wNIRAABj4Rtw0FBhFuEAgmbL4gFMzUw+AStz9Sqdg=="
)


def _jwt(issuer: str = f"https://sts.windows.net/{TID}/") -> str:
    """An Azure AD access token's shape, as Azurite's ``--oauth basic`` checks it: the
    storage audience, an issuer of Azure AD, a time window; oid/tid name the identity."""

    def part(d: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(d).encode()).rstrip(b"=").decode()

    now = int(time.time())
    claims = {
        "aud": "https://storage.azure.com",
        "iss": issuer,
        "iat": now - 60,
        "nbf": now - 60,
        "exp": now + 3600,
        "oid": OID,
        "tid": TID,
    }
    return f"{part({'alg': 'none', 'typ': 'JWT'})}.{part(claims)}.c2ln"


class TokenCredential:
    """A stand-in azure-core TokenCredential (what DefaultAzureCredential is)."""

    def __init__(self, token: str) -> None:
        self.token = token

    def get_token(self, *scopes: str, **_: Any) -> Any:
        from azure.core.credentials import AccessToken

        assert scopes == ("https://storage.azure.com/.default",)
        return AccessToken(self.token, int(time.time()) + 3600)


@pytest.fixture(scope="module")
def azurite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with azurite_oauth(tmp_path_factory.mktemp("az-oauth")) as server:
        admin = azurite_admin(server)
        admin.create_container("rdv")
        admin.create_container("other")
        yield server


@pytest.fixture
def identity(azurite: Server, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The launcher as a managed identity (App Service style: IDENTITY_ENDPOINT and its
    secret header, here a server on 127.0.0.1); the paths it was asked for."""
    asked: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            asked.append(self.path)
            ok = self.headers.get("X-IDENTITY-HEADER") == IDENTITY_SECRET
            body = json.dumps(
                {
                    "access_token": _jwt(),
                    "expires_on": str(int(time.time()) + 3600),
                    "resource": "https://storage.azure.com",
                    "token_type": "Bearer",
                }
            )
            self.send_response(200 if ok else 401)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body.encode())

        def log_message(self, *_: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    for k in [k for k in os.environ if k.startswith(("AZURE_", "IDENTITY_", "MSI_"))]:
        monkeypatch.delenv(k)
    env = {
        **azurite.env,
        "IDENTITY_ENDPOINT": f"http://127.0.0.1:{server.server_port}/msi/token",
        "IDENTITY_HEADER": IDENTITY_SECRET,
    }
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    try:
        yield asked
    finally:
        server.shutdown()
        thread.join()


def _fields(sas: str) -> dict[str, str]:
    return dict(parse_qsl(sas))


def _sign(key_b64: str, fields: list[str]) -> str:
    mac = hmac.new(base64.b64decode(key_b64), "\n".join(fields).encode(), hashlib.sha256)
    return base64.b64encode(mac.digest()).decode()


def _azurite_key(q: dict[str, str]) -> str:
    """The user delegation key's value, as Azurite derives it from the key's fields."""
    text = "\n".join([q["skoid"], q["sktid"], q["skt"], q["ske"], q["sks"], q["skv"]])
    return base64.b64encode(
        hmac.new(AZURITE_UDK_SECRET, text.encode(), hashlib.sha256).digest()
    ).decode()


def _for_azurite(sas: str, container: str) -> str:
    """``sas`` checked as signed by the key Azurite gave (the SDK's 2026-10-06 layout),
    then signed again in the 2025-07-05 layout Azurite checks, fields unchanged."""
    q = _fields(sas)
    key = _azurite_key(q)
    head = [
        q["sp"],
        q.get("st", ""),
        q["se"],
        f"/blob/{AZURITE_ACCOUNT}/{container}",
        q["skoid"],
        q["sktid"],
        q["skt"],
        q["ske"],
        q["sks"],
        q["skv"],
        "",
        "",
        "",
        "",
        "",
        q.get("sip", ""),
        q["spr"],
        q["sv"],
        q["sr"],
        "",
        "",
    ]
    content = ["", "", "", "", ""]  # rscc, rscd, rsce, rscl, rsct
    assert q["sig"] == _sign(key, [*head, "", "", *content]), "not signed with Azurite's key"
    q["sig"] = _sign(key, [*head, *content])
    return urlencode(q, quote_via=quote, safe="")


def _reach(uri: str, cluster_id: str, node_env: dict[str, str]) -> None:
    """What a node does with ``node_env`` as its whole environment: check the store, then
    write, read, list and remove its records."""
    with environ(node_env):
        rdv = open_rendezvous(uri, cluster_id)
        rdv.check()
        rdv.put_secret("probe", b"x")
        assert rdv.get_secret("probe") == b"x"
        rdv.cleanup(all_attempts=True)


@pytest.mark.objectstore
def test_an_identity_gives_nodes_a_user_delegation_sas_and_nothing_of_its_own(
    azurite: Server, identity: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from azure.core.exceptions import HttpResponseError
    from azure.storage.blob import ContainerClient

    monkeypatch.setenv("AZURE_CLIENT_ID", "user-assigned-identity")  # which identity, not a secret
    before = time.time()
    creds = node_credentials("az://rdv/team", "nc-udk", 3600)
    env = creds.env
    assert identity, "the launcher's DefaultAzureCredential was not asked"
    assert creds.kind == "a user-delegation SAS of container rdv"
    assert creds.names == ["AZURE_STORAGE_SAS_TOKEN"]
    q = _fields(env["AZURE_STORAGE_SAS_TOKEN"])
    assert (q["skoid"], q["sktid"], q["sks"], q["sr"], q["sp"]) == (OID, TID, "b", "c", "racwdl")
    assert q["spr"] == "https"
    assert creds.expires_at is not None and before + 3500 < creds.expires_at < time.time() + 3700
    # The identity stays with the launcher; the endpoint and the CA to trust go along.
    assert not {k for k in env if k.startswith(("AZURE_CLIENT", "AZURE_TENANT", "IDENTITY_"))}
    assert IDENTITY_SECRET not in json.dumps(env)
    assert env["SYNDEO_AZURE_ACCOUNT_URL"] == azurite.env["SYNDEO_AZURE_ACCOUNT_URL"]
    assert env["REQUESTS_CA_BUNDLE"] == azurite.env["REQUESTS_CA_BUNDLE"]
    sas = _for_azurite(env["AZURE_STORAGE_SAS_TOKEN"], "rdv")
    node = {k: v for k, v in os.environ.items() if not k.startswith(("AZURE_", "IDENTITY_"))}
    _reach("az://rdv/team", "nc-udk", node | env | {"AZURE_STORAGE_SAS_TOKEN": sas})
    # Another container of the account is out of its reach.
    other = ContainerClient(env["SYNDEO_AZURE_ACCOUNT_URL"], "other", credential=sas)
    with pytest.raises(HttpResponseError) as denied:
        other.upload_blob("x", b"x")
    assert denied.value.status_code == 403
    with pytest.raises(HttpResponseError) as denied:
        next(iter(other.list_blobs()), None)
    assert denied.value.status_code == 403


@pytest.mark.objectstore
def test_a_cluster_that_may_outlive_the_key_is_told(azurite: Server, identity: list[str]) -> None:
    creds = node_credentials("az://rdv/team", "nc-long", 10 * 86400)
    week = time.time() + azure_sas.UDK_MAX_S
    assert creds.expires_at is not None and week - 600 < creds.expires_at <= week
    assert "user-delegation SAS of container rdv (Azure's 7-day limit" in creds.describe()
    assert "the cluster may outlive it" in creds.describe()


@pytest.mark.objectstore
def test_a_slurm_job_gets_the_sas_and_none_of_the_service_principal(
    azurite: Server,
    identity: list[str],
    fake_sbatch: StandInSbatch,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A service principal's secret would have the launcher ask login.microsoftonline.com:
    # its token comes from a stand-in instead.
    for k, v in {
        "AZURE_CLIENT_ID": "sp-app",
        "AZURE_TENANT_ID": TID,
        "AZURE_CLIENT_SECRET": SP_SECRET,
    }.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setattr(azure_sas, "launcher_credential", lambda: TokenCredential(_jwt()))
    sb = fake_sbatch.submit("az://rdv/team", "nc-az-slurm")
    env, said = sb.env, sb.said
    q = _fields(env["AZURE_STORAGE_SAS_TOKEN"])
    assert (q["skoid"], q["sktid"], q["sks"]) == (OID, TID, "b")
    assert not {"AZURE_CLIENT_ID", "AZURE_TENANT_ID", "AZURE_CLIENT_SECRET"} & set(env)
    assert not {"IDENTITY_ENDPOINT", "IDENTITY_HEADER"} & set(env)
    assert SP_SECRET not in json.dumps(env) and IDENTITY_SECRET not in json.dumps(env)
    script = sb.script
    assert env["AZURE_STORAGE_SAS_TOKEN"] not in script and SP_SECRET not in script
    assert '"${AZURE_STORAGE_SAS_TOKEN}"' in script and "AZURE_CLIENT_SECRET" not in script
    [line] = [s for s in said if "node credentials" in s]
    assert "a user-delegation SAS of container rdv until" in line


@pytest.mark.objectstore
def test_a_refused_key_request_is_one_clear_line(
    azurite: Server, identity: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A token Azure AD did not issue: the blob service refuses it (403).
    bad = TokenCredential(_jwt(issuer="https://login.example.com/"))
    monkeypatch.setattr(azure_sas, "launcher_credential", lambda: bad)
    with pytest.raises(ConfigError) as refused:
        node_credentials("az://rdv/team", "nc-refused", 3600)
    text = str(refused.value)
    assert "\n" not in text, text
    assert "refused a user delegation key (403 AuthenticationFailed: " in text
    assert "Storage Blob Delegator" in text and 'node_credentials = "forward"' in text
