"""Results are complete or absent, never half-written."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.helpers import assert_nothing_left, syndeo

WRITER = """
import sys
from pathlib import Path
from syndeo.launcher.state import write_atomic
path = Path(sys.argv[1])
payload = b'{"v": "' + b'x' * 50_000_000 + b'"}'
print('ready', flush=True)
write_atomic(path, payload)
"""


def test_a_writer_killed_mid_write_leaves_the_old_file_whole(tmp_path: Path) -> None:
    target = tmp_path / "result.json"
    target.write_text('{"v": "old"}')
    for delay in (0.0, 0.02, 0.05, 0.1):
        proc = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(target)], stdout=subprocess.PIPE, text=True
        )
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        data = json.loads(target.read_text())  # parses: never a prefix
        assert data["v"] in ("old", "x" * 50_000_000)
        for tmp in tmp_path.glob(".result.json.*"):
            tmp.unlink()  # a killed writer may leave its temp file; the result is intact


@pytest.mark.cluster
def test_a_workload_that_writes_broken_json_gets_no_result_but_keeps_it(
    syndeo_home: Path, tmp_path: Path
) -> None:
    script = tmp_path / "broken.py"
    script.write_text(
        "import os\nprint('private', flush=True)\n"
        "open(os.environ['SYNDEO_RESULT_PATH'], 'w').write('{\"half\": ')\n"
    )
    cid = "tbroken"
    proc = syndeo(
        "deploy",
        "--nodes",
        "1",
        "--cluster-id",
        cid,
        "--run",
        f"python {script}",
        "--results-dir",
        str(tmp_path / "res"),
        cwd=tmp_path,
    )
    assert proc.returncode == 1
    assert "not valid JSON" in proc.stderr
    # Not discarded: kept outside the node's scratch (which teardown deletes), and named.
    kept = tmp_path / "syndeo-kept-results" / f"{cid}-a0-r0-result.json"
    assert f"at {kept}" in proc.stderr, proc.stderr
    assert kept.read_text() == '{"half": '
    assert kept.stat().st_mode & 0o777 == 0o600 and kept.parent.stat().st_mode & 0o777 == 0o700
    assert not (tmp_path / "res" / cid / "result.json").exists()
    assert json.loads((tmp_path / "res" / cid / "deploy.json").read_text())["exit_code"] == 1
    assert_nothing_left(cid)
    # No result.json: the summary, the bring-up timeline and what the workload printed.
    files = sorted(os.listdir(tmp_path / "res" / cid))
    assert files == ["deploy.json", "timeline.json", "workload.log"]
    # A run's files are for the user alone (other users of the machine read none).
    for name in files:
        assert (tmp_path / "res" / cid / name).stat().st_mode & 0o777 == 0o600, name
    for directory in (tmp_path / "res", tmp_path / "res" / cid):
        assert directory.stat().st_mode & 0o777 == 0o700, directory
