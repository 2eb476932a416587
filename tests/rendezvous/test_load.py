"""A running cluster leaves the rendezvous alone: counted in the store's own request log.

While a cluster serves, each worker learns from Ray whether the head is there
(the head's GCS accepts connections, its own raylet runs) and reads ``done``
only with backoff to 30 s; the head lists its control prefix every 2 s (one request
that carries the stop flag and the job agent's doorbells: an idle agent adds nothing).  Before, each
worker read ``done`` every second and the head read ``stop`` four times a second
for the whole run -- 3,600 requests per worker-hour.  The counts come from
moto's access log (one line per request), over 20 s of an idle ``up`` cluster,
so the launcher's own polling (it has returned) is not in them.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from testbeds.objectstores import Server
from tests.rendezvous.conftest import cloud_backend
from tests.support.helpers import assert_nothing_left, reap, syndeo

WINDOW_S = 20.0


def _gets(log: str, bucket: str, cid: str, name: str) -> int:
    pattern = re.compile(rf'"(?:\x1b\[[0-9;]*m)?GET /{bucket}/\S*/{cid}/a0/{re.escape(name)} ')
    return sum(1 for line in log.splitlines() if pattern.search(line))


def _lists(log: str, bucket: str, cid: str, prefix: str) -> int:
    """LIST requests (``GET /bucket?list-type=2&prefix=…``) of ``a0/<prefix>``."""
    wanted = f"/{cid}/a0/{prefix}&"
    return sum(1 for line in log.splitlines() if f"GET /{bucket}?" in line and wanted in line)


@pytest.mark.objectstore
@pytest.mark.slow
def test_a_serving_cluster_barely_polls_the_store(
    shared_server: Callable[[str], Server],
    monkeypatch: pytest.MonkeyPatch,
    syndeo_home: Path,
    tmp_path: Path,
) -> None:
    server = shared_server("s3")
    backend = cloud_backend("s3", server, monkeypatch)
    bucket = backend.uri.split("/")[2]
    cid = "tload-s3"
    try:
        up = syndeo(
            "up",
            "--target",
            "local",
            "--nodes",
            "2",
            "--cluster-id",
            cid,
            "--rendezvous",
            backend.uri,
            "--join-timeout",
            "240",
            cwd=tmp_path,
            env=backend.env,
            timeout=400,
        )
        assert up.returncode == 0, up.stderr[-3000:]
        start = len(server.log.read_text(errors="replace"))
        time.sleep(WINDOW_S)
        window = server.log.read_text(errors="replace")[start:]
        done_gets = _gets(window, bucket, cid, "done.json")
        control_lists = _lists(window, bucket, cid, "ctl/")
        other = [line for line in window.splitlines() if f"{cid}/a0/jobs" in line]
        # One worker: reads at ~1, 3, 7, 15 s (backoff with jitter) -- not 20 (once a
        # second, as before).
        assert 1 <= done_gets <= 6, window[-3000:]
        # The head: every 2 s -- not 80; its job agent, idle, adds no request at all.
        assert 3 <= control_lists <= 14, window[-3000:]
        assert _gets(window, bucket, cid, "ctl/stop") == 0 and other == []
        # Spot notices: the head learns of a drained node from Ray, not by asking the store.
        assert f"{cid}/a0/interrupted" not in window
        down = syndeo("down", "--cluster-id", cid, cwd=tmp_path, env=backend.env)
        assert down.returncode == 0, down.stderr[-3000:]
        assert_nothing_left(cid)
    finally:
        # A failed assertion must not leave the cluster up (a no-op after a clean down).
        syndeo("down", "--cluster-id", cid, cwd=tmp_path, env=backend.env)
        reap(cid)
