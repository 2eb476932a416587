"""Small process helpers for the test beds: run a command, wait without sleeping blindly.

Everything here is for root-only test-bed management (the local Slurm cluster, the
SSH hosts); failures become one-line :class:`~syndeo.core.errors.TargetError` messages
naming the command that failed.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

from syndeo.core.errors import TargetError

T = TypeVar("T")


def run(
    argv: Sequence[str],
    *,
    check: bool = True,
    timeout: float = 60,
    env: Mapping[str, str] | None = None,
) -> str:
    """Run ``argv`` (``env`` added to ours); stdout, or a TargetError with its stderr."""
    try:
        proc = subprocess.run(
            list(argv),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            env={**os.environ, **env} if env else None,
        )
    except FileNotFoundError as exc:
        raise TargetError(f"{argv[0]} not found: run scripts/setup --all (as root) first") from exc
    except subprocess.TimeoutExpired as exc:
        raise TargetError(f"`{' '.join(argv)}` did not finish within {timeout:.0f} s") from exc
    if check and proc.returncode != 0:
        err = (proc.stderr or proc.stdout).strip().splitlines()
        raise TargetError(f"`{' '.join(argv)}` failed: {err[-1] if err else proc.returncode}")
    return proc.stdout


def wait_until(
    probe: Callable[[], T | None], timeout: float, what: str, interval: float = 0.05
) -> T:
    """Poll ``probe`` (backing off to 0.5 s) until it returns non-None; TargetError on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value is not None:
            return value
        if time.monotonic() >= deadline:
            raise TargetError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)
        interval = min(interval * 1.5, 0.5)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie is dead for our purposes; /proc tells us.
    with contextlib.suppress(OSError):
        if Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z"):
            return False
    return True


def read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def terminate(pids: Sequence[int], grace: float = 10.0) -> None:
    """TERM, wait up to ``grace`` seconds for them to go, then KILL the rest.

    Never pid 1 or below: kill(0) is our own group, kill(-1) every process we may
    signal, and pids may come from files; such a pid is a bug or a plant, not a target."""
    live = [p for p in pids if p > 1 and pid_alive(p)]
    for pid in live:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    with contextlib.suppress(TargetError):
        wait_until(lambda: True if not any(pid_alive(p) for p in live) else None, grace, "exit")
    for pid in live:
        with contextlib.suppress(ProcessLookupError):
            if pid_alive(pid):
                os.kill(pid, signal.SIGKILL)
