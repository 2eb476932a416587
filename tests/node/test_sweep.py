"""How a node's teardown finds what is left of its Ray (syndeo/node/raynode.py): by
`ray start`'s process group and session, and only while that `ray start` is unreaped.

A reaped process's number is free: a busy machine (pid_max 32768) hands it to a new
process within seconds, and a new `ray start` leads a session and group of that number.
Signals sent by the number then killed another node's `ray start` at birth ("Ray exited
while starting" with nothing in its log, seen in CI).  These tests make that reuse
happen on purpose: a live session leader stands where a reaped `ray start` was.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from syndeo.core import launchkey
from syndeo.core.errors import NodeError
from syndeo.core.nodeconfig import NodeSettings
from syndeo.node.raynode import RayProcess, _running, _sweep

# A session leader that leaves a child behind in its session and exits.
ORPHANING = (
    "import subprocess, sys; "
    "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
    "print(c.pid, flush=True)"
)
SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)"]


@pytest.fixture
def ray_process(tmp_path: Path) -> Iterator[RayProcess]:
    scratch = Path(tempfile.mkdtemp(prefix="sysweep-"))  # short: NodeSettings checks it
    settings = NodeSettings(
        cluster_id="sweep",
        rank=0,
        nodes=1,
        rendezvous=(tmp_path / "rdv").as_uri(),
        scratch=scratch,
        workdir=tmp_path / "work",
        launch_key=launchkey.new_key(),
    )
    yield RayProcess(settings, tmp_path / "token", None)
    shutil.rmtree(scratch, ignore_errors=True)


@pytest.fixture
def other_session() -> Iterator[subprocess.Popen[bytes]]:
    """Someone else's live session (and group) leader, with a child of its own."""
    other = subprocess.Popen(
        [sys.executable, "-c", f"import subprocess; subprocess.run({SLEEPER!r})"],
        start_new_session=True,
    )
    yield other
    for p in psutil.Process(other.pid).children(recursive=True):
        p.kill()
    other.kill()
    other.wait(10)


def _exited_unreaped(proc: subprocess.Popen[bytes] | subprocess.Popen[str]) -> None:
    os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)  # blocks until it exits


def test_an_orphan_of_the_unreaped_leaders_session_is_swept() -> None:
    leader = subprocess.Popen(
        [sys.executable, "-c", ORPHANING], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    assert leader.stdout is not None
    orphan = psutil.Process(int(leader.stdout.readline()))
    _exited_unreaped(leader)  # as RayProcess.stop leaves `ray start` until the sweep is done
    try:
        _sweep("/nonexistent-scratch", leader.pid, settle_s=1.0)
        orphan.wait(10)  # psutil.TimeoutExpired if the sweep left it
        assert not orphan.is_running()
    finally:
        if orphan.is_running():
            orphan.kill()
        leader.wait(10)


def test_asking_whether_ray_runs_does_not_free_its_number() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)
    _exited_unreaped(proc)
    assert not _running(proc)
    assert psutil.Process(proc.pid).status() == psutil.STATUS_ZOMBIE, "reaped: number freed"
    proc.wait(10)


def test_a_reaped_ray_starts_number_reused_by_another_session_is_left_alone(
    ray_process: RayProcess, other_session: subprocess.Popen[bytes]
) -> None:
    # Our `ray start` ended and was reaped; the machine gave its number to another
    # session's leader.  Stopping our node must not touch that session.
    ours = subprocess.Popen([sys.executable, "-c", "pass"])
    ours.wait(10)
    ours.pid = other_session.pid  # the reuse, made certain
    ray_process.proc = ours
    time.sleep(0.5)  # the other leader has started its child
    children = psutil.Process(other_session.pid).children()
    ray_process.stop()
    assert other_session.poll() is None, "another session's leader was killed"
    assert all(c.is_running() for c in children), "another session's child was killed"


def test_stopping_a_ray_start_that_exited_leaves_its_number_taken_until_the_end(
    ray_process: RayProcess,
) -> None:
    leader = subprocess.Popen(
        [sys.executable, "-c", ORPHANING], stdout=subprocess.PIPE, start_new_session=True
    )
    assert leader.stdout is not None
    orphan = psutil.Process(int(leader.stdout.readline()))
    ray_process.proc = leader
    _exited_unreaped(leader)
    assert not ray_process.alive()  # asked as the node's loop asks: still unreaped
    try:
        ray_process.stop()
        orphan.wait(10)  # its session's orphan went with it
        assert leader.returncode == 0  # and `ray start` was reaped last
    finally:
        if orphan.is_running():
            orphan.kill()


def test_ray_killed_at_start_is_reported_with_its_signal(ray_process: RayProcess) -> None:
    # What the CI failure said was only "Ray exited while starting: " (an empty log).
    ray_process.proc = subprocess.Popen(SLEEPER, start_new_session=True)
    ray_process.proc.kill()
    _exited_unreaped(ray_process.proc)
    with pytest.raises(NodeError, match=r"exited while starting \(killed by SIGKILL\): nothing in"):
        ray_process.wait_started(5)
    ray_process.stop()
