"""Whether a cluster's watcher runs, as ``status`` and ``watch restart`` ask it: a watcher
that died while the process that started it (a script using the Python API) still runs is
that process's zombie, with its pid and start time unchanged; it counts as dead, and is
reaped."""

from __future__ import annotations

import subprocess
import sys
import time

import psutil

from syndeo.launcher import watch
from syndeo.launcher.spec import Launched, ProcWatcher
from tests.support.launched import make_launched


def _launched(proc: psutil.Process) -> Launched:
    entry = ProcWatcher(pid=proc.pid, create_time=proc.create_time())
    return make_launched("local", "walive", "file:///nonexistent", watcher=entry)


def test_a_watcher_that_ended_as_this_processs_zombie_is_not_alive() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    proc = psutil.Process(child.pid)
    launched = _launched(proc)
    try:
        assert watch.alive(launched)
        child.kill()
        deadline = time.monotonic() + 30
        while proc.status() != psutil.STATUS_ZOMBIE:  # ended, not yet reaped by anyone
            assert time.monotonic() < deadline, proc.status()
            time.sleep(0.05)
        assert not watch.alive(launched)
        assert not proc.is_running()  # reaped (psutil counts a zombie as running)
    finally:
        if child.poll() is None:  # (reaped already: its pid is no longer ours to signal)
            child.kill()
            child.wait()
