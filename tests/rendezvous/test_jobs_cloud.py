"""Jobs on an ``up`` cluster whose rendezvous is an object store (S3 emulator): the
launcher and the head share nothing but the bucket, and ``down`` leaves it empty."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from testbeds.objectstores import Server, list_keys
from tests.rendezvous.conftest import cloud_backend
from tests.support.helpers import assert_nothing_left, one_line_error, reap, syndeo

pytestmark = [pytest.mark.objectstore, pytest.mark.slow]

PRINTER = "import time\nfor i in range(3):\n    print('line', i, flush=True); time.sleep(0.3)\n"


def test_a_job_over_s3_runs_follows_and_leaves_nothing(
    shared_server: Callable[[str], Server],
    monkeypatch: pytest.MonkeyPatch,
    syndeo_home: Path,
    tmp_path: Path,
) -> None:
    server = shared_server("s3")
    backend = cloud_backend("s3", server, monkeypatch)
    bucket = backend.uri.split("/")[2]
    cid = "tjobs-s3"
    work = tmp_path / "work"
    work.mkdir()
    (work / "printer.py").write_text(PRINTER)
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
        job = syndeo(
            "submit",
            "--workdir",
            str(work),
            "--follow",
            "--",
            "python",
            "printer.py",
            cwd=tmp_path,
            env=backend.env,
            timeout=300,
        )
        assert job.returncode == 0, job.stdout[-2000:] + job.stderr[-2000:]
        assert [ln for ln in job.stdout.splitlines() if ln.startswith("line")] == [
            "line 0",
            "line 1",
            "line 2",
        ]
        job_id = job.stdout.splitlines()[0]
        again = syndeo("logs", "--job", job_id, cwd=tmp_path, env=backend.env)
        assert "line 2" in again.stdout
        empty = syndeo("submit", "--", cwd=tmp_path, env=backend.env)
        assert "nothing to run" in one_line_error(empty)
        down = syndeo("down", "--cluster-id", cid, cwd=tmp_path, env=backend.env)
        assert down.returncode == 0, down.stderr[-2000:]
        assert_nothing_left(cid)
        assert list_keys(server, bucket) == []  # job records and the work dir included
    finally:
        syndeo("down", "--cluster-id", cid, cwd=tmp_path, env=backend.env)
        reap(cid)
