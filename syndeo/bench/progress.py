"""Run progress for humans (rich bar on a TTY) and for the launcher (a small JSON file).

The launcher polls ``$SYNDEO_PROGRESS_FILE``; we replace it atomically and at most
about twice a second so a slow shared filesystem never becomes the bottleneck.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from types import TracebackType

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

MIN_INTERVAL_S = 0.5


def write_atomic(path: Path, text: str) -> None:
    """Readers see the old or the new content, never a torn file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


class BenchProgress:
    """Counts samples of the current measurement; reports by file and/or bar."""

    def __init__(self, file: Path | None = None, tty: bool | None = None) -> None:
        env_file = os.environ.get("SYNDEO_PROGRESS_FILE")
        self.file = file or (Path(env_file) if env_file else None)
        self.tty = sys.stdout.isatty() if tty is None else tty
        self._bar: Progress | None = None
        self._task: TaskID | None = None
        self.env = ""
        self.samples = 0
        self.target = 0
        self._t0 = time.monotonic()
        self._last_write = 0.0

    def __enter__(self) -> BenchProgress:
        if self.tty:
            self._bar = Progress(
                TextColumn("{task.description:<28}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[rate]:>12} steps/s"),
                TimeElapsedColumn(),
            )
            self._bar.start()
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._write(force=True)
        if self._bar is not None:
            self._bar.stop()

    def start(self, label: str, env: str, target: int) -> None:
        """Begin a new measurement (one env/mode/size, all its repeats)."""
        self.env, self.samples, self.target = env, 0, target
        self._t0 = time.monotonic()
        if self._bar is not None:
            self._task = self._bar.add_task(label, total=target, rate="")
        self._write(force=True)

    def add(self, samples: int) -> None:
        self.samples += samples
        if self._bar is not None and self._task is not None:
            rate = f"{self.rate:,.0f}"
            self._bar.update(self._task, completed=self.samples, rate=rate)
        self._write()

    @property
    def rate(self) -> float:
        return self.samples / max(time.monotonic() - self._t0, 1e-9)

    def _write(self, force: bool = False) -> None:
        now = time.monotonic()
        if self.file is None or (not force and now - self._last_write < MIN_INTERVAL_S):
            return
        self._last_write = now
        doc = {
            "samples": self.samples,
            "samples_target": self.target,
            "steps_per_s": round(self.rate, 1),
            "env": self.env,
        }
        write_atomic(self.file, json.dumps(doc))
