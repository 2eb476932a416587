"""A node that fails leaves its last words in the rendezvous (``logs/rank-N``), where
every launcher can read them -- also those that cannot reach the node's own log
(a cloud VM, a host behind SSH)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from syndeo.core import launchkey
from syndeo.rendezvous import open_rendezvous


def test_a_worker_that_finds_no_head_says_why_in_the_rendezvous(tmp_path: Path) -> None:
    uri = (tmp_path / "rdv").as_uri()
    key = launchkey.new_key()
    env = {
        **os.environ,
        "SYNDEO_CLUSTER_ID": "lastwords",
        "SYNDEO_RANK": "2",
        "SYNDEO_NODES": "3",
        "SYNDEO_RENDEZVOUS": uri,
        "SYNDEO_SCRATCH": f"/tmp/sy-lw{os.getpid()}",
        "SYNDEO_JOIN_TIMEOUT": "1",
        "SYNDEO_NOT_BEFORE": str(time.time()),
        "SYNDEO_LAUNCH_KEY": key,
    }
    try:
        out = subprocess.run(
            [sys.executable, "-m", "syndeo", "node"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        shutil.rmtree(env["SYNDEO_SCRATCH"], ignore_errors=True)  # what this test made
    assert out.returncode != 0
    logs = open_rendezvous(uri, "lastwords", launch_key=key).read_logs()
    assert list(logs) == [2], logs
    # The same one line the node printed, with the host it ran on.
    printed = out.stderr.strip().splitlines()[-1].removeprefix("syndeo: error: ")
    assert logs[2].endswith(printed), (logs, out.stderr)
    assert "head" in logs[2].lower()


def test_a_head_that_fails_before_its_end_is_recorded_leaves_a_signed_done(
    tmp_path: Path,
) -> None:
    """A VM launcher ends a run on the head's signed done record only: a head that fails
    during bring-up leaves one beside its log (a worker leaves its log alone)."""
    from syndeo.core.nodeconfig import NodeSettings
    from syndeo.node.main import _last_words

    uri, key = (tmp_path / "rdv").as_uri(), "ab" * 32
    env = {
        "SYNDEO_CLUSTER_ID": "lastwords",
        "SYNDEO_NODES": "2",
        "SYNDEO_RENDEZVOUS": uri,
        "SYNDEO_SCRATCH": "/tmp/sy-lw-unused",  # named, never made: no node runs
        "SYNDEO_LAUNCH_KEY": key,
    }
    rdv = open_rendezvous(uri, "lastwords", launch_key=key)  # last words are sealed with it
    _last_words(NodeSettings.from_env({**env, "SYNDEO_RANK": "1"}), rdv, "worker failed", 1)
    assert rdv.read_done() is None and rdv.read_logs()[1].endswith("worker failed")
    _last_words(NodeSettings.from_env({**env, "SYNDEO_RANK": "0"}), rdv, "ray failed", 3)
    done = rdv.read_done()
    assert done is not None and done.verified(key, "lastwords", 0)
    assert (done.exit_code, done.message) == (3, "ray failed")
