"""A local cluster whose nodes meet through each object store forms and runs a workload.

Real everything: ``syndeo deploy --target local`` starts separate ``syndeo node``
processes (real Ray), they find the head through the S3/GCS/Azure server, a
small Ray program spreads tasks over both nodes (the core suite's probe: the
built-in benchmark takes minutes on a loaded 2-core box and exercises the
rendezvous no differently), and teardown leaves no key in the bucket.
The node processes reach the store only through the standard environment
variables (endpoint + credentials) they inherit from the launcher, and hand none of
the credentials on to Ray's processes or the workload.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from testbeds.objectstores import Server, list_keys
from tests.rendezvous.conftest import CLOUD, cloud_backend
from tests.support.helpers import PROBE, assert_nothing_left, read_json, reap, syndeo

pytestmark = pytest.mark.objectstore


@pytest.mark.parametrize("kind", CLOUD)
def test_local_cluster_meets_through_object_store(
    kind: str,
    shared_server: Callable[[str], Server],
    monkeypatch: pytest.MonkeyPatch,
    syndeo_home: Path,
    tmp_path: Path,
) -> None:
    server = shared_server(kind)
    backend = cloud_backend(kind, server, monkeypatch)
    bucket = backend.uri.split("/")[2]
    cid = f"tcloud-{kind}"
    try:
        proc = syndeo(
            "deploy",
            "--target",
            "local",
            "--nodes",
            "2",
            "--cluster-id",
            cid,
            "--rendezvous",
            backend.uri,
            "--results-dir",
            str(tmp_path / "res"),
            "--join-timeout",
            "240",
            "--run",
            f"python {PROBE}",
            cwd=tmp_path,
            env=backend.env,
            timeout=600,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert read_json(tmp_path / "res" / cid / "deploy.json")["exit_code"] == 0
        result = read_json(tmp_path / "res" / cid / "result.json")
        assert result["nodes"] == 2
        assert result["node_ips"] == ["127.0.0.10", "127.0.0.11"]
        # The store's credentials stayed with the nodes: no task, nor the workload, saw any.
        assert result["secrets_seen"] == [], result
        assert_nothing_left(cid)
        # Teardown removed every record, the Ray token included.
        assert list_keys(server, bucket) == []
    finally:
        reap(cid)
