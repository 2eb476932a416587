"""Checkpoint and continue: a run warned of its time limit stops and resumes later.

Under a scheduler (Slurm: ``slurm.signal_before``) the benchmark gets SIGUSR1 before
its job's time limit.  It then stops at once; everything measured so far (every whole
repeat: each one's sample count is exact) is already in ``$SYNDEO_CHECKPOINT_DIR``
(written after every repeat), and the next run of the same configuration -- the
requeued job -- continues from there: a repeat cut short is measured again, never
counted in part.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from pathlib import Path
from types import FrameType

from syndeo.bench.errors import BenchError
from syndeo.bench.models import BenchConfig, BenchResult

# sysexits.h EX_TEMPFAIL: stopped to continue later (not finished, not failed).
CHECKPOINTED_EXIT = 75
FILE_NAME = "bench-checkpoint.json"
STOP = threading.Event()


class Checkpointed(BenchError):
    """Stopped at the time-limit warning; the checkpoint holds every whole repeat."""

    exit_code = CHECKPOINTED_EXIT


def _on_warning(_signum: int, _frame: FrameType | None) -> None:
    STOP.set()  # seen by the sampling loop within a second (nodewatch.WATCH_EVERY_S)


def install() -> None:
    """SIGUSR1 ends the run at the next check, checkpoint kept (main thread only)."""
    signal.signal(signal.SIGUSR1, _on_warning)


def check() -> None:
    if STOP.is_set():
        raise Checkpointed("time-limit warning: stopped; the measured repeats are checkpointed")


def path() -> Path | None:
    """Where the checkpoint lives: the dir the scheduler keeps across requeues, if any."""
    base = os.environ.get("SYNDEO_CHECKPOINT_DIR")
    return Path(base) / FILE_NAME if base else None


def load(cfg: BenchConfig) -> BenchResult | None:
    """The checkpoint of an earlier run of this same configuration, if any."""
    p = path()
    if p is None or not p.is_file():
        return None
    try:
        prior = BenchResult.model_validate_json(p.read_bytes())
    except ValueError as exc:
        raise BenchError(f"checkpoint {p} is not a benchmark result: {exc}") from None
    if prior.config != cfg:
        return None  # another run's: this one starts afresh (and overwrites it)
    return prior


def remove() -> None:
    p = path()
    if p is not None:
        with contextlib.suppress(FileNotFoundError):
            p.unlink()
