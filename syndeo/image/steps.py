"""Running a build's external commands: progress line, full log, clean stop on a signal."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import psutil
from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from syndeo.core.errors import ImageError

SBIN_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
console = Console(stderr=True)


class Step:
    """Runs one external command, streaming its output to a log and the progress line."""

    def __init__(self, progress: Progress, log: IO[str], log_path: Path) -> None:
        self.progress, self.log, self.log_path = progress, log, log_path
        self.task = progress.add_task("starting", total=None)

    def run(self, phase: str, argv: Sequence[str], env: dict[str, str] | None = None) -> None:
        console.log(f"[bold]{phase}[/bold]")
        self.log.write(f"\n### {phase}: {' '.join(argv)}\n")
        tail: list[str] = []
        try:
            proc = subprocess.Popen(
                list(argv),
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                errors="replace",
                env=env,
                start_new_session=True,
            )
        except FileNotFoundError as err:
            raise ImageError(f"{phase} failed: {argv[0]} is not installed") from err
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                self.log.write(line)
                if line.strip():
                    tail = [*tail[-40:], line.strip()]
                    self.progress.update(self.task, description=f"{phase}: {line.strip()[:70]}")
            proc.wait()
        except BaseException:
            # Ctrl-C, TERM or any error: the build's whole process group goes with us;
            # TERM first so apptainer can remove its multi-GB temp rootfs.
            _stop_group(proc)
            raise
        self.log.flush()
        if proc.returncode != 0:
            raise ImageError(
                f"{phase} failed (exit {proc.returncode}): {failure_cause(tail)}; "
                f"log: {self.log_path}"
            )


def _stop_group(proc: subprocess.Popen[str], grace_s: float = 20.0) -> None:
    if proc.returncode is not None:  # reaped: its number may name someone else's group
        return
    try:  # listed while the leader is unreaped; psutil checks identity before it signals
        family = psutil.Process(proc.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        family = []
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        # Still unreaped, so the group's number is still ours.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    for child in family:  # what outlived the leader; once it is reaped, not by group
        with contextlib.suppress(psutil.NoSuchProcess):
            child.kill()


def failure_cause(tail: list[str]) -> str:
    for marker in ("FATAL", "ERROR", "Error", "error"):
        for line in reversed(tail):
            if marker in line:
                return line[:300]
    return tail[-1][:300] if tail else "no output"


@contextmanager
def steps(log_path: Path) -> Iterator[Step]:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    columns = (SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn())
    # TERM (CI timeout, `kill`) must also stop the build's process group: turn it into
    # an exception so Step.run's cleanup runs (only possible from the main thread).
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, _raise_interrupted)
    try:
        with log_path.open("w") as log, Progress(*columns, console=console, transient=True) as bar:
            yield Step(bar, log, log_path)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _raise_interrupted(signum: int, _frame: object) -> None:
    raise ImageError(f"image build interrupted by signal {signum}", exit_code=128 + signum)


def build_user() -> str | None:
    """Who runs apptainer: None = the current (non-root) user."""
    if os.geteuid() != 0:
        return None
    user = os.environ.get("SYNDEO_BUILD_USER", "syndeo-ci")
    if subprocess.run(["id", "-u", user], capture_output=True, check=False).returncode != 0:
        raise ImageError(
            f"apptainer cannot run as root here and build user {user!r} does not exist: "
            "run scripts/setup.d/apptainer.sh or set SYNDEO_BUILD_USER"
        )
    return user


def as_user(user: str | None, argv: Sequence[str]) -> list[str]:
    """argv run as ``user`` with a clean PATH (debootstrap needs /usr/sbin) and its HOME."""
    if user is None:
        return ["env", f"PATH={SBIN_PATH}", *argv]
    home = os.path.expanduser(f"~{user}")
    return ["runuser", "-u", user, "--", "env", f"HOME={home}", f"PATH={SBIN_PATH}", *argv]
