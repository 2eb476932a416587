"""Waiting for processes to end, as the node and the local target both need it."""

from __future__ import annotations

import contextlib
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
