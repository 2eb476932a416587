"""Fixtures: one contract suite, four backends (file, s3, gs, az).

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

from syndeo.rendezvous import Rendezvous, open_rendezvous
from testbeds.objectstores import Server, make_bucket, start_server

CLOUD = ("s3", "gs", "az")


@dataclass
class Backend:
    kind: str
    uri: str
    env: dict[str, str] = field(default_factory=dict)
    server: Server | None = None

    def open(self, cluster_id: str = "c1", attempt: int = 0) -> Rendezvous:
        return open_rendezvous(self.uri, cluster_id, attempt)


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
@pytest.fixture(params=["file", *(pytest.param(k, marks=pytest.mark.objectstore) for k in CLOUD)])
def backend(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    shared_server: Callable[[str], Server],
    monkeypatch: pytest.MonkeyPatch,
) -> Backend:
    kind: str = request.param
    if kind == "file":
        return Backend(kind, f"file://{tmp_path}/rendezvous")
    return cloud_backend(kind, shared_server(kind), monkeypatch)
