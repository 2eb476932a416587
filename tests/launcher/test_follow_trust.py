"""``deploy`` follows only what the head signed: on a real 2-node local deploy, a done
record and a status naming a healthy rank lost, planted in the store with plain file
writes (by whoever can write the cluster's prefix), neither end the run nor start a
replacement, and the workers stay; the head's own done record then ends it, exit 0."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path

import pytest

from tests.support.helpers import assert_nothing_left, local_status, reap, start_syndeo

PROGRAM = """\
import os, time
deadline = time.monotonic() + 240
while not os.path.exists({go!r}) and time.monotonic() < deadline:
    time.sleep(0.2)
"""
CONFIG = """\
target = "local"
nodes = 2
cpus_per_node = 1
join_timeout_s = 240
run = "python prog.py"
[recovery]
replace_lost = true
max_replacements = 1
"""


UNSIGNED_STATUS = "a status record not signed by this cluster's head: ignored"
UNSIGNED_DONE = "a done record not signed by this cluster's head: ignored"


def _lines(proc: subprocess.Popen[str]) -> list[str]:
    """The launcher's stderr, line by line as it comes (a reader thread)."""
    lines: list[str] = []
    assert proc.stderr is not None
    stream = proc.stderr
    threading.Thread(target=lambda: lines.extend(iter(stream.readline, "")), daemon=True).start()
    return lines


def _wait_for(lines: list[str], said: str, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 60
    while not any(said in ln for ln in list(lines)):
        assert proc.poll() is None, "".join(lines[-40:])
        assert time.monotonic() < deadline, f"never said {said!r}: {''.join(lines[-40:])}"
        time.sleep(0.1)


@pytest.mark.cluster
def test_planted_done_and_lost_records_steer_no_deploy(tmp_path: Path, syndeo_home: Path) -> None:
    cid = "tfollow"
    work = tmp_path / "work"
    work.mkdir()
    go = tmp_path / "go"
    (work / "prog.py").write_text(PROGRAM.format(go=str(go)))
    cfg = tmp_path / "syndeo.toml"
    cfg.write_text(CONFIG)
    proc = start_syndeo("deploy", "--config", str(cfg), "--cluster-id", cid, cwd=work)
    try:
        deadline = time.monotonic() + 240
        while local_status(syndeo_home, cid).get("phase") != "running":
            assert proc.poll() is None and time.monotonic() < deadline, "deploy ended early"
            time.sleep(0.2)
        [records] = list(syndeo_home.rglob(f"{cid}/a0"))
        st = json.loads((records / "status.json").read_text())
        done = {"cluster_id": cid, "attempt": 0, "exit_code": 7, "finished_at": time.time()}
        (records / "done.json").write_text(json.dumps({**done, "message": "planted"}))
        lines = _lines(proc)
        # The head rewrites its status every few seconds and the follower, once nothing
        # moves, reads it less often: the forged status is planted again until the
        # follower has met it (and said so), as a forger would keep planting it.
        deadline = time.monotonic() + 60
        while not any(UNSIGNED_STATUS in ln for ln in list(lines)):
            assert proc.poll() is None, "".join(lines[-40:])
            assert time.monotonic() < deadline, f"never said {UNSIGNED_STATUS!r}"
            forged = {**st, "nodes_lost": [1], "phase": "running", "updated_at": time.time()}
            (records / "status.json").write_text(json.dumps(forged))
            time.sleep(0.2)
        _wait_for(lines, UNSIGNED_DONE, proc)
        assert proc.poll() is None, "a planted done record ended the deploy"
        assert local_status(syndeo_home, cid).get("phase") == "running"  # the head's again
        go.touch()
        assert proc.wait(timeout=240) == 0, "".join(lines[-40:])
        err = "".join(lines)
        assert "rank 1 lost" not in err, err[-3000:]
        summary = json.loads((work / "results" / cid / "deploy.json").read_text())
        assert summary["exit_code"] == 0 and summary.get("lost_ranks", []) == [], summary
        assert "planted" not in json.dumps(summary)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        reap(cid)
    assert_nothing_left(cid)
