"""The workload's output as the launcher receives it through the rendezvous.

Kept in ``results/<cluster-id>/workload.log`` on every target, and shown live where
the target does not already stream the head's own log (ssh and the clouds: the head's
log lives on a machine that is destroyed with the cluster).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from syndeo.launcher.state import private_dirs
from syndeo.rendezvous import Rendezvous


class WorkloadLog:
    def __init__(self, path: Path, show: Callable[[str], None] | None) -> None:
        self.path = path
        self.show = show  # None: the target shows the head's output itself
        self.seq = 0
        self.attempt: int | None = None
        self.bytes = 0
        self._partial = ""
        self._fh: BinaryIO | None = None

    def poll(self, rdv: Rendezvous) -> bool:
        """Take what is new (one store read when nothing is); True if there was any."""
        if rdv.attempt != self.attempt:
            if self.attempt is not None:
                self._emit(f"\n[syndeo: the cluster restarted as attempt {rdv.attempt}]\n".encode())
            self.attempt, self.seq = rdv.attempt, 0
        before = self.seq
        self.seq = rdv.read_output(self.seq, self._emit)
        return self.seq != before

    def _emit(self, data: bytes) -> None:
        if self._fh is None:
            # The workload's own output: for the user alone, like every file of a run.
            private_dirs(self.path.parent)
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            self._fh = os.fdopen(fd, "ab")
        self._fh.write(data)
        self._fh.flush()
        self.bytes += len(data)
        if self.show is not None:
            # Whole lines only: a chunk may end mid-line.
            text = self._partial + data.decode(errors="replace")
            *lines, self._partial = text.split("\n")
            for line in lines:
                self.show(line)

    def close(self) -> None:
        if self.show is not None and self._partial:
            self.show(self._partial)
            self._partial = ""
        if self._fh is not None:
            with contextlib.suppress(OSError):
                self._fh.close()
            self._fh = None
