"""Slurm and ssh nodes of a gs:// rendezvous get a downscoped token for their cluster's
prefix, renewed by the launcher through the store, never the launcher's own Google
credentials.

Against a local fake of Google's STS and OAuth token endpoints (http.server on
127.0.0.1: it records each request and answers with made-up tokens) and the test bed's
fake-gcs-server.  Neither checks tokens: that Google enforces the boundary (other
prefixes, other buckets, listing elsewhere refused) is verified only against real Google.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import pytest

from syndeo.core.errors import ConfigError, RendezvousError
from syndeo.core.launchkey import new_key
from syndeo.launcher.nodecreds import gcs_tokens, node_credentials
from syndeo.rendezvous import open_rendezvous, without_secrets
from syndeo.rendezvous.gstoken import (
    EXPIRY_VAR,
    FILE_NAME,
    FILE_VAR,
    TOKEN_VAR,
    seal_token,
    unseal_token,
)
from testbeds.objectstores import Server, make_bucket, running
from tests.launcher.conftest import StandInSbatch
from tests.support.helpers import environ
from tests.support.launched import make_launched

LAUNCHER_ACCESS = "launcher-access-token"
URI = "gs://team-bucket/team"


@dataclass
class FakeGoogle:
    """Google's OAuth token endpoint (the launcher's ADC refresh) and STS, on 127.0.0.1."""

    url: str = ""
    sts: list[dict[str, str]] = field(default_factory=list)
    refreshes: int = 0
    refuse: bool = False


@pytest.fixture(scope="module")
def google() -> Iterator[FakeGoogle]:
    fake = FakeGoogle()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            form = {
                k: v[0]
                for k, v in parse_qs(
                    self.rfile.read(int(self.headers["Content-Length"])).decode()
                ).items()
            }
            body: dict[str, Any]
            status = 200
            if self.path == "/oauth/token":
                fake.refreshes += 1
                body = {"access_token": LAUNCHER_ACCESS, "expires_in": 3599, "token_type": "Bearer"}
            elif self.path == "/v1/token" and fake.refuse:
                status = 400
                body = {"error": "invalid_request", "error_description": "bad boundary\nmore"}
            elif self.path == "/v1/token":
                fake.sts.append(form)
                body = {
                    "access_token": f"downscoped-{len(fake.sts)}",
                    "expires_in": 3599,
                    "issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
                    "token_type": "Bearer",
                }
            else:
                status, body = 404, {"error": "not_found"}
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *_args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield fake
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def gcs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with running("gs", tmp_path_factory.mktemp("gcs")) as server:
        make_bucket(server, "team-bucket")
        yield server


@pytest.fixture(scope="module")
def sa_key() -> str:
    """The launcher's service account key (PEM): recognisable wherever it would leak."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()


@pytest.fixture
def launcher_env(
    google: FakeGoogle, gcs: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sa_key: str
) -> dict[str, str]:
    """A launcher signed in with a service account key (ADC), its token and STS at the
    fake."""
    google.refuse = False
    google.sts.clear()
    # A service account key (its token_uri is honoured, unlike an authorized user's).
    adc = tmp_path / "adc.json"
    adc.write_text(
        json.dumps(
            {
                "type": "service_account",
                "project_id": "syndeo-test",
                "private_key_id": "k1",
                "private_key": sa_key,
                "client_email": "launcher@syndeo-test.iam.gserviceaccount.com",
                "client_id": "1",
                "token_uri": f"{google.url}/oauth/token",
            }
        )
    )
    for k in [k for k in os.environ if k.startswith(("GOOGLE_", "CLOUDSDK_", "SYNDEO_GCS"))]:
        monkeypatch.delenv(k)
    env = {
        "GOOGLE_APPLICATION_CREDENTIALS": str(adc),
        "GOOGLE_CLOUD_PROJECT": "syndeo-test",
        "CLOUDSDK_CONFIG": str(tmp_path / "gcloud"),
        "NO_GCE_CHECK": "True",
        "STORAGE_EMULATOR_HOST": gcs.endpoint,
        gcs_tokens.STS_URL_VAR: f"{google.url}/v1/token",
    }
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    return env


@pytest.mark.objectstore
def test_nodes_get_a_token_bounded_to_their_prefix(
    launcher_env: dict[str, str], google: FakeGoogle
) -> None:
    before = time.time()
    creds = node_credentials(URI, "gc-1", 7200)
    assert creds.kind.startswith("scoped to the cluster's prefix")
    assert sorted(creds.names) == sorted([TOKEN_VAR, EXPIRY_VAR])
    assert creds.env[TOKEN_VAR] == "downscoped-1"
    assert before + 3500 < float(creds.env[EXPIRY_VAR]) < time.time() + 3700
    # Neither the launcher's credentials nor where they are; the endpoint and project are.
    assert "GOOGLE_APPLICATION_CREDENTIALS" not in creds.env
    assert "PRIVATE KEY" not in json.dumps(creds.env)
    assert creds.env["STORAGE_EMULATOR_HOST"] == launcher_env["STORAGE_EMULATOR_HOST"]
    # The exchange: RFC 8693 form fields, the launcher's fresh access token as subject.
    [form] = google.sts
    assert form["grant_type"] == "urn:ietf:params:oauth:grant-type:token-exchange"
    assert form["subject_token_type"] == "urn:ietf:params:oauth:token-type:access_token"
    assert form["requested_token_type"] == "urn:ietf:params:oauth:token-type:access_token"
    assert form["subject_token"] == LAUNCHER_ACCESS
    [rule] = json.loads(form["options"])["accessBoundary"]["accessBoundaryRules"]
    assert rule["availableResource"] == "//storage.googleapis.com/projects/_/buckets/team-bucket"
    assert rule["availablePermissions"] == ["inRole:roles/storage.objectUser"]
    expr = rule["availabilityCondition"]["expression"]
    # Objects under its own prefix (with the trailing "/": not those of cluster gc-10),
    # and listing only with that prefix.
    assert expr == (
        "resource.name.startsWith('projects/_/buckets/team-bucket/objects/team/gc-1/') || "
        "api.getAttribute('storage.googleapis.com/objectListPrefix', '').startsWith('team/gc-1/')"
    )


@pytest.mark.objectstore
def test_a_refused_exchange_or_no_credentials_is_one_line(
    launcher_env: dict[str, str], google: FakeGoogle, monkeypatch: pytest.MonkeyPatch
) -> None:
    google.refuse = True
    with pytest.raises(ConfigError) as refused:
        node_credentials(URI, "gc-1", 7200)
    assert "STS refused" in str(refused.value) and "HTTP 400: bad boundary" in str(refused.value)
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", "/nonexistent/adc.json")
    with pytest.raises(ConfigError) as missing:
        node_credentials(URI, "gc-1", 7200)
    for exc in (refused.value, missing.value):
        assert "\n" not in str(exc) and str(exc).startswith("gcs: ")


def _node_env(gcs: Server, token: str, expires_at: float, key: str) -> dict[str, str]:
    """A node's whole environment: the store's endpoint, its token, its launch key."""
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("GOOGLE_", "SYNDEO_"))}
    return keep | {
        "STORAGE_EMULATOR_HOST": gcs.endpoint,
        "GOOGLE_CLOUD_PROJECT": "syndeo-test",
        TOKEN_VAR: token,
        EXPIRY_VAR: f"{expires_at:.0f}",
        "SYNDEO_LAUNCH_KEY": key,
    }


@pytest.mark.objectstore
def test_the_node_renews_from_the_sealed_token_and_refuses_a_planted_one(
    gcs: Server, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    for k, v in gcs.env.items():  # the launcher's side: the emulator, anonymous
        monkeypatch.setenv(k, v)
    import requests

    reads: list[str] = []
    real_get = requests.get

    def spy(url: str, **kw: Any) -> Any:
        reads.append(kw["headers"]["Authorization"])
        return real_get(url, **kw)

    monkeypatch.setattr(requests, "get", spy)
    key = new_key()
    launcher = open_rendezvous(URI, "gc-node")
    launcher.put_store_token(seal_token("renewed-1", time.time() + 3600, key, "gc-node"))
    # Its token ends within google-auth's refresh threshold: the first request renews.
    with environ(_node_env(gcs, "initial", time.time() + 60, key)):
        node = open_rendezvous(URI, "gc-node")
        creds = node.client._credentials  # type: ignore[attr-defined]
        assert creds.token == "initial"
        node.put_secret("probe", b"x")
        assert creds.token == "renewed-1" and node.get_secret("probe") == b"x"
    # Read with the token it still held (not through the client being refreshed).
    assert reads and set(reads) == {"Bearer initial"}
    # A token sealed with another key (someone who can write the prefix) is refused.
    launcher.put_store_token(seal_token("planted", time.time() + 3600, new_key(), "gc-node"))
    with (
        environ(_node_env(gcs, "initial", time.time() + 60, key)),
        caplog.at_level(logging.WARNING),
    ):
        node = open_rendezvous(URI, "gc-node")
        with pytest.raises(RendezvousError, match="could not be refreshed"):
            node.get_secret("probe")
        assert node.client._credentials.token == "initial"  # type: ignore[attr-defined]
    assert "refused the GCS token" in caplog.text
    # And one whose bytes were changed.
    good = seal_token("changed", time.time() + 3600, key, "gc-node")
    launcher.put_store_token(good[:-1] + bytes([good[-1] ^ 1]))
    changed = _node_env(gcs, "initial", time.time() + 60, key)
    with environ(changed), pytest.raises(RendezvousError, match="could not be refreshed"):
        open_rendezvous(URI, "gc-node").get_secret("probe")
    launcher.cleanup(all_attempts=True)


@pytest.mark.objectstore
def test_an_older_token_of_the_same_launch_put_back_is_refused(
    launcher_env: dict[str, str], gcs: Server, caplog: pytest.LogCaptureFixture
) -> None:
    """Sealed blobs carry their expiry: a prefix writer who kept an earlier token of this
    launch and puts it back cannot make a node take it (nor an expired one)."""
    key = new_key()
    launcher = open_rendezvous(URI, "gc-fresh")
    now = time.time()
    launcher.put_store_token(seal_token("newer", now + 3000, key, "gc-fresh"))
    with environ(_node_env(gcs, "initial", now + 60, key)):
        node = open_rendezvous(URI, "gc-fresh")
        node.put_secret("probe", b"x")  # renews at once: takes "newer"
        creds = node.client._credentials  # type: ignore[attr-defined]
        assert creds.token == "newer"
        refresher = creds._refresh_handler
        for blob, why in (
            (seal_token("older", now + 2000, key, "gc-fresh"), "ends before the token"),
            (seal_token("expired", now - 10, key, "gc-fresh"), "it has expired"),
        ):
            launcher.put_store_token(blob)
            caplog.clear()
            with caplog.at_level(logging.WARNING), pytest.raises(Exception, match=why):
                refresher(None)
            assert "refused the GCS token" in caplog.text
        launcher.put_store_token(seal_token("newest", now + 3500, key, "gc-fresh"))
        assert refresher(None)[0] == "newest"
    launcher.cleanup(all_attempts=True)


@pytest.mark.objectstore
def test_the_renewer_writes_before_expiry_and_the_teardown_removes_it(
    launcher_env: dict[str, str], google: FakeGoogle
) -> None:
    key, said = new_key(), []
    renewer = gcs_tokens.Renewer(URI, "gc-renew", key, said.append)
    rdv = open_rendezvous(URI, "gc-renew")
    t0 = time.time()
    assert renewer.tick(t0)  # at once: a node that started late gets a full hour
    blob = rdv.get_store_token()
    assert blob is not None
    token, expires_at = unseal_token(blob, key, "gc-renew")
    assert token == "downscoped-1" and expires_at > t0 + 3500
    # The next one comes well before this one ends (20 min of a 60-min token).
    assert renewer.next_at <= t0 + gcs_tokens.RENEW_EVERY_S < expires_at - 30 * 60
    assert not renewer.tick(t0 + 60) and len(google.sts) == 1
    assert renewer.tick(renewer.next_at)
    assert unseal_token(rdv.get_store_token() or b"", key, "gc-renew")[0] == "downscoped-2"
    # The boundary of every renewal is this cluster's.
    assert "team/gc-renew/" in google.sts[-1]["options"] and said == []
    # A failed renewal is said and retried, never fatal.
    google.refuse = True
    assert not renewer.tick(renewer.next_at) and "could not renew" in said[0]
    rdv.cleanup(all_attempts=True)  # the teardown of every verb
    assert rdv.get_store_token() is None


@pytest.mark.objectstore
def test_deploy_renews_only_clusters_whose_nodes_got_a_token(
    launcher_env: dict[str, str],
    google: FakeGoogle,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """The thread a following launcher runs: started only for a cluster it made a token
    for; it writes the store and a Slurm job dir; stopped before the teardown."""
    monkeypatch.setattr(gcs_tokens.Renewal, "CHECK_S", 0.05)
    key = new_key()
    launched = make_launched(
        "slurm", "gc-thread", URI, time.time(), part={"job_dir": str(tmp_path)}
    )
    idle = gcs_tokens.Renewal(URI, "gc-none", key, print)
    idle.start(launched)
    assert idle._thread is None
    node_credentials(URI, "gc-thread", 7200)
    renewal = gcs_tokens.Renewal(URI, "gc-thread", key, print)
    renewal.start(launched)
    rdv = open_rendezvous(URI, "gc-thread")
    deadline = time.monotonic() + 10
    shared = tmp_path / FILE_NAME
    while not shared.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert unseal_token(rdv.get_store_token() or b"", key, "gc-thread")[0] == "downscoped-2"
    assert unseal_token(shared.read_bytes(), key, "gc-thread")[0] == "downscoped-2"
    assert shared.stat().st_mode & 0o077 == 0
    renewal.stop()  # the teardown: the job dir's copy goes, the store's with the records
    assert not shared.exists()
    rdv.cleanup(all_attempts=True)


@pytest.mark.objectstore
def test_a_node_that_queued_past_its_token_renews_from_the_job_dir(
    gcs: Server,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Its own token ended long ago (nothing to read the store with): the sealed token
    the launcher keeps in the shared job dir is taken; a changed one is refused."""
    import requests

    reads: list[str] = []
    real_get = requests.get
    monkeypatch.setattr(requests, "get", lambda url, **kw: reads.append(url) or real_get(url, **kw))
    key, shared = new_key(), tmp_path / FILE_NAME
    shared.parent.mkdir(mode=0o700, exist_ok=True)  # the launcher makes it at submit
    shared.write_bytes(seal_token("from-the-job-dir", time.time() + 3000, key, "gc-queued"))
    node = _node_env(gcs, "long-expired", time.time() - 7200, key) | {FILE_VAR: str(shared)}
    with environ(node):
        rdv = open_rendezvous(URI, "gc-queued")
        rdv.put_secret("probe", b"x")
        assert rdv.client._credentials.token == "from-the-job-dir"  # type: ignore[attr-defined]
    assert reads == []  # not the store: the file was enough
    blob = seal_token("changed", time.time() + 3000, key, "gc-queued")
    shared.write_bytes(blob[:-1] + bytes([blob[-1] ^ 1]))
    with environ(node), caplog.at_level(logging.WARNING), pytest.raises(RendezvousError):
        open_rendezvous(URI, "gc-queued").get_secret("probe")
    assert "refused the GCS token in" in caplog.text and reads  # then the store was asked
    with environ(gcs.env):
        open_rendezvous(URI, "gc-queued").cleanup(all_attempts=True)


@pytest.mark.objectstore
def test_a_slurm_job_gets_the_token_and_none_of_the_launchers_credentials(
    launcher_env: dict[str, str], fake_sbatch: StandInSbatch, tmp_path: Path
) -> None:
    sb = fake_sbatch.submit(URI, "gc-slurm")
    env, said = sb.env, sb.said
    assert env[TOKEN_VAR] == "downscoped-1" and float(env[EXPIRY_VAR]) > time.time() + 3000
    assert "GOOGLE_APPLICATION_CREDENTIALS" not in env
    assert "PRIVATE KEY" not in json.dumps(env)
    script = sb.script
    assert env[TOKEN_VAR] not in script and f'"${{{TOKEN_VAR}}}"' in script
    assert "GOOGLE_APPLICATION_CREDENTIALS" not in script
    # Where the launcher's renewals reach a job that queued past the token's hour.
    assert sb.job_dir is not None and str(sb.job_dir / FILE_NAME) in script
    [line] = [s for s in said if "node credentials" in s]
    assert "scoped to the cluster's prefix" in line
    # On the node, the token stays out of Ray's and the workload's environment.
    assert TOKEN_VAR not in without_secrets(URI, env) and EXPIRY_VAR not in without_secrets(
        URI, env
    )
    assert gcs_tokens.issued(URI, "gc-slurm")  # so the following launcher renews it


@pytest.mark.objectstore
def test_forward_passes_the_launchers_own_by_reference(
    launcher_env: dict[str, str],
    fake_sbatch: StandInSbatch,
    tmp_path: Path,
    google: FakeGoogle,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``node_credentials = "forward"``: the job inherits the launcher's own, as before."""
    env = fake_sbatch.submit(URI, "gc-fwd", time=None, node_credentials="forward").env
    assert env["GOOGLE_APPLICATION_CREDENTIALS"] == launcher_env["GOOGLE_APPLICATION_CREDENTIALS"]
    assert TOKEN_VAR not in env and google.sts == []
    # Where nothing is to be had but the launcher's own (an emulator, no STS named), and
    # in contrast, the same launcher's scoped default.
    monkeypatch.delenv(gcs_tokens.STS_URL_VAR)
    emulated = node_credentials(URI, "gc-fwd", 7200)
    assert emulated.names == [] and TOKEN_VAR not in emulated.env
    assert "GOOGLE_APPLICATION_CREDENTIALS" in emulated.env
    monkeypatch.setenv(gcs_tokens.STS_URL_VAR, launcher_env[gcs_tokens.STS_URL_VAR])
    assert node_credentials(URI, "gc-fwd", 7200).names == [TOKEN_VAR, EXPIRY_VAR]
