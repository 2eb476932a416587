"""What a node's teardown sweeps up after its Ray (syndeo/node/raynode.py ``_sweep``):
orphans of its own `ray start` session, never the processes of a session whose leader's
pid the machine has handed out again (a busy machine recycles pids within seconds, and
another node's fresh `ray start` was once killed that way: "Ray exited while starting")."""

from __future__ import annotations

import subprocess
import sys

import psutil

from syndeo.node.raynode import _sweep

# A session leader that leaves a child behind in its session and exits.
ORPHANING = (
    "import subprocess, sys; "
    "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
    "print(c.pid, flush=True)"
)


def test_an_orphan_of_the_dead_session_is_swept() -> None:
    leader = subprocess.Popen(
        [sys.executable, "-c", ORPHANING], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    assert leader.stdout is not None
    orphan = psutil.Process(int(leader.stdout.readline()))
    leader.wait(10)  # reaped, as RayProcess.stop reaps `ray start`
    try:
        _sweep("/nonexistent-scratch", leader.pid, settle_s=1.0)
        orphan.wait(10)  # psutil.TimeoutExpired if the sweep left it
        assert not orphan.is_running()
    finally:
        if orphan.is_running():
            orphan.kill()


def test_a_session_whose_number_is_a_live_leaders_again_is_left_alone() -> None:
    # A live session leader with that pid: the number is someone else's now.
    other = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True
    )
    try:
        _sweep("/nonexistent-scratch", other.pid, settle_s=0.5)
        assert other.poll() is None, "another session's leader was killed"
    finally:
        other.kill()
        other.wait(10)
