"""The quick tier's guard (tests/support/quick.py) names what a test started that the
tier cannot have, with the marker the test lacks."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import psutil

from tests.support import quick


def test_a_switch_of_user_needs_the_root_marker(tmp_path: Path) -> None:
    """As root a quick-tier test may run `runuser` and pass; as any other user the same
    test fails.  The guard fails it under root too, naming the marker."""
    stand_in = tmp_path / "runuser"  # the process name the guard sees, without root
    pid_file = tmp_path / "pid"
    stand_in.write_text(f"#!/bin/sh\necho $$ > {pid_file}\nsleep 30\n")
    stand_in.chmod(0o755)
    # Outside this test's process tree (setsid -f), or the guard of the quick tier this
    # test runs in would fail it for what it checks.
    subprocess.run(["setsid", "-f", str(stand_in)], check=True, timeout=30)
    deadline = time.monotonic() + 10
    while not pid_file.exists() or not pid_file.read_text().strip():
        assert time.monotonic() < deadline, "the stand-in did not start"
        time.sleep(0.05)
    proc = psutil.Process(int(pid_file.read_text()))
    try:
        assert quick._what(proc) == ("a command as another user (runuser)", "root")
    finally:
        proc.kill()
