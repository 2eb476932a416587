"""The ``syndeo`` command line as the benchmarks drive it: one user command, timed."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path


def syndeo(
    *args: str, cwd: Path, env: dict[str, str] | None = None, argv: list[str] | None = None
) -> tuple[float, str]:
    """Run ``syndeo ARGS`` to the end; its wall time (s) and its output.  A failure ends
    the benchmark with the command's last words (a figure of a failed run means nothing).
    ``argv``: the whole command line instead (the same command as another user)."""
    began = time.monotonic()
    proc = subprocess.run(
        argv or [sys.executable, "-m", "syndeo", *args],
        env={**os.environ, **(env or {})},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"syndeo {args[0]} failed: {proc.stderr[-2000:]}")
    return round(time.monotonic() - began, 2), proc.stdout + proc.stderr
