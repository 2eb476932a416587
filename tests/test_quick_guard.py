"""The quick tier's guard (tests/support/quick.py) names what a test started that the
tier cannot have, with the marker the test lacks."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.support import quick


def test_a_switch_of_user_needs_the_root_marker(tmp_path: Path) -> None:
    """As root a quick-tier test may run `runuser` and pass; as any other user the same
    test fails.  The guard fails it under root too, naming the marker."""
    stand_in = tmp_path / "runuser"  # the process name the guard sees, without root
    stand_in.write_text("#!/bin/sh\nsleep 1\n")
    stand_in.chmod(0o755)
    watch = quick._Watch()
    watch.start()
    subprocess.run([str(stand_in)], check=True, timeout=30)
    assert watch.stop() == {"a command as another user (runuser)": "root"}
