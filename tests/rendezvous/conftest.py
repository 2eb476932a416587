"""Fixtures: one contract suite, five backends (file, s3, gs, az, oss).

Cloud backends run against real wire-protocol servers (``testbeds/objectstores.py``),
one per kind for the whole session, started on first use.  Every test gets a
fresh bucket/container, and the client configuration reaches the backend only
through environment variables, exactly as a launcher forwards it to a node.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from syndeo.core import launchkey
from syndeo.rendezvous import Rendezvous, open_rendezvous
from testbeds.objectstores import Server, make_bucket, start_server
from testbeds.osshost import VirtualHosts, virtual_hosted

# The launch key the suite's clients hold (payloads are sealed with it).
LAUNCH_KEY = launchkey.new_key()
# The wire-protocol servers' kinds (testbeds/objectstores.py).
CLOUD = ("s3", "gs", "az")
# The contract suite's cloud backends: those, and oss, OSS's S3-compatible API as the OSS
# backend uses it (virtual-hosted addressing, Alibaba credentials) against moto_server
# behind testbeds/osshost.py.
CLOUD_BACKENDS = (*CLOUD, "oss")


@dataclass
class Backend:
    kind: str
    uri: str
    env: dict[str, str] = field(default_factory=dict)
    server: Server | None = None

    def open(
        self, cluster_id: str = "c1", attempt: int = 0, launch_key: str | None = LAUNCH_KEY
    ) -> Rendezvous:
        return open_rendezvous(self.uri, cluster_id, attempt, launch_key)


def fresh_name(tag: str = "t") -> str:
    return f"{tag}{uuid.uuid4().hex[:12]}"


@pytest.fixture(scope="session")
def server_log_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("object-store-logs")


@pytest.fixture(scope="session")
def shared_server(server_log_dir: Path) -> Iterator[Callable[[str], Server]]:
    """``shared_server("s3")``: the session's server of that kind (started on first use)."""
    started: dict[str, Server] = {}

    def get(kind: str) -> Server:
        server = started.get(kind)
        if server is None or not server.alive():
            server = started[kind] = start_server(kind, server_log_dir)
        return server

    yield get
    for server in started.values():
        server.stop()


@pytest.fixture(scope="session")
def oss_hosts(shared_server: Callable[[str], Server]) -> Iterator[VirtualHosts]:
    with virtual_hosted(shared_server("s3").port) as hosts:
        yield hosts


def oss_backend(
    server: Server, hosts: VirtualHosts, monkeypatch: pytest.MonkeyPatch, create: bool = True
) -> Backend:
    """An oss:// backend: the bucket made on the S3 server, the client told only the
    Alibaba names (no AWS_* variable reaches it)."""
    bucket = fresh_name("b")
    if create:
        make_bucket(server, bucket)
    for name in server.env:
        monkeypatch.delenv(name, raising=False)
    for name in ("NO_PROXY", "no_proxy", "AWS_PROFILE", "AWS_ACCESS_KEY_ID"):
        monkeypatch.delenv(name, raising=False)
    env = hosts.env()
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return Backend("oss", f"oss://{bucket}/syndeo/rv", env, server)


def cloud_backend(
    kind: str, server: Server, monkeypatch: pytest.MonkeyPatch, create: bool = True
) -> Backend:
    bucket = fresh_name("b")
    if create:
        make_bucket(server, bucket)
    for name, value in server.env.items():
        monkeypatch.setenv(name, value)
    return Backend(kind, f"{kind}://{bucket}/syndeo/rv", dict(server.env), server)


# The cloud kinds need their servers: not in the quick tier (tests/support/quick.py).
@pytest.fixture(
    params=["file", *(pytest.param(k, marks=pytest.mark.objectstore) for k in CLOUD_BACKENDS)]
)
def backend(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    shared_server: Callable[[str], Server],
    monkeypatch: pytest.MonkeyPatch,
) -> Backend:
    kind: str = request.param
    if kind == "file":
        return Backend(kind, f"file://{tmp_path}/rendezvous")
    if kind == "oss":
        hosts: VirtualHosts = request.getfixturevalue("oss_hosts")
        return oss_backend(shared_server("s3"), hosts, monkeypatch)
    return cloud_backend(kind, shared_server(kind), monkeypatch)
