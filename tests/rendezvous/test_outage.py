"""A rendezvous outage while a workload runs degrades status, never the run.

Bring-up may fail fast, but once a workload runs the store only carries status,
the stop flag, the result and the done record: the workload goes on through an
outage of minutes, the result waits on the head's disk and is uploaded when the
store returns, and the launcher keeps following (the target says the cluster runs).
The outage is real: the S3 server process (moto) is frozen with SIGSTOP, so
requests hang exactly as they do when a store stops answering.  It lasts until
the head has logged the store unreachable (a frozen server costs one call ~50 s, the
SDK's read timeout times its retries, before that call fails); the test then lets the
workload end, while the store is still down, so its result has to wait on the head's
disk, and the store comes back once the workload's last line is in the head's log.
Events, not fixed times.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from syndeo.core.errors import RendezvousError
from syndeo.rendezvous import open_rendezvous
from testbeds.objectstores import Server
from tests.rendezvous.conftest import cloud_backend
from tests.support.helpers import PROBE, assert_nothing_left, read_json, reap, start_syndeo

OUTAGE_LIMIT_S = 600.0  # only a bound on a broken run: the outage ends on events


def _words(log: Path) -> set[str]:
    """Which of the events this test waits for the head's log shows so far."""
    text = log.read_text(errors="replace") if log.exists() else ""
    return {w for w in ("rendezvous unreachable", "PROBE ") if w in text}


def test_file_backend_turns_raw_os_errors_into_rendezvous_errors(tmp_path: Path) -> None:
    # ESTALE/EIO cannot be produced on demand; EISDIR takes the same path through _read.
    rdv = open_rendezvous(f"file://{tmp_path}/rv", "c1")
    rdv.check()
    (tmp_path / "rv" / "c1" / "a0" / "done.json").mkdir(parents=True)
    with pytest.raises(RendezvousError, match="cannot read"):
        rdv.read_done()


@pytest.mark.objectstore
@pytest.mark.slow
def test_running_workload_survives_a_store_outage(
    shared_server: Callable[[str], Server],
    monkeypatch: pytest.MonkeyPatch,
    syndeo_home: Path,
    tmp_path: Path,
) -> None:
    server = shared_server("s3")
    backend = cloud_backend("s3", server, monkeypatch)
    cid = "toutage-s3"
    proc: subprocess.Popen[str] | None = None
    stopped = False
    ready = tmp_path / "pinned-tasks-ran"
    go = tmp_path / "end-the-workload"
    head_log_path = syndeo_home / "clusters" / cid / "node-0.log"
    try:
        proc = start_syndeo(
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
            f"python {PROBE} 0 {OUTAGE_LIMIT_S} {ready} {go}",
            cwd=tmp_path,
            env=backend.env,
        )
        watcher = backend.open(cid)
        deadline = time.monotonic() + 300
        while True:
            st = watcher.read_status()
            if st is not None and st.phase == "running" and ready.exists():
                break  # the workload is under way: its Ray tasks ran on both nodes
            assert proc.poll() is None, proc.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "the workload never started"
            time.sleep(0.5)
        os.kill(server.pid, signal.SIGSTOP)
        stopped = True
        # Down until the head said the store is unreachable; then the workload ends and
        # the store stays down until its PROBE line (printed last) is in the head's log:
        # its result now waits on the head's disk.
        deadline = time.monotonic() + OUTAGE_LIMIT_S
        for words in ({"rendezvous unreachable"}, {"PROBE "}):
            while not words <= _words(head_log_path):
                assert proc.poll() is None, proc.communicate()[1][-3000:]
                assert time.monotonic() < deadline, head_log_path.read_text()[-3000:]
                time.sleep(0.5)
            go.touch()  # after the first event: the workload may end now
        os.kill(server.pid, signal.SIGCONT)
        stopped = False
        _out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err[-3000:]
        result = read_json(tmp_path / "res" / cid / "result.json")
        assert result["nodes"] == 2 and result["task_nodes"] == 2
        assert read_json(tmp_path / "res" / cid / "deploy.json")["exit_code"] == 0
        head_log = head_log_path.read_text()
        # The outage really reached the head, and the head said so instead of dying.
        assert "rendezvous unreachable" in head_log, head_log[-3000:]
        assert_nothing_left(cid)
    finally:
        if stopped:
            os.kill(server.pid, signal.SIGCONT)
        if proc is not None and proc.poll() is None:
            proc.terminate()
            proc.communicate(timeout=120)
        reap(cid)
