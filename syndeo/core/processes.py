"""Whether processes have ended, and waiting for them to, as the node, the local target
and the watcher's owner need it."""

from __future__ import annotations

import contextlib
import os
import time

import psutil


def wait_gone(procs: list[psutil.Process], timeout_s: float) -> list[psutil.Process]:
    """Wait until every process has exited; those still running after ``timeout_s``.

    An exited process counts as gone while still a zombie: once ``ray start`` is
    KILLed its children's parent is PID 1, which reaps when it pleases (psutil's
    wait_procs waited out its whole timeout for them).
    """
    deadline = time.monotonic() + timeout_s
    while True:
        alive = []
        for p in procs:
            with contextlib.suppress(psutil.NoSuchProcess):
                if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                    alive.append(p)
        if not alive or time.monotonic() >= deadline:
            return alive
        procs = alive
        time.sleep(0.05)


def ended(proc: psutil.Process) -> bool:
    """Whether ``proc`` has ended.  A process started by this very one (the Python API's
    ``up``, then ``down`` or ``status`` in one script) stays a zombie until it is reaped,
    and a zombie still has its pid and start time: reap it here, or it would pass for
    running (``down`` waiting its whole timeout for a head that has long ended)."""
    try:
        if proc.status() != psutil.STATUS_ZOMBIE:
            return False
    except psutil.NoSuchProcess:
        return True
    with contextlib.suppress(ChildProcessError):  # someone else's child: theirs to reap
        os.waitpid(proc.pid, os.WNOHANG)
    return True
