"""A program's output, carried through the rendezvous while it runs.

The head streams what its workload (``deploy --run``, the benchmark) or a submitted
job prints into numbered chunks in the store, so a launcher anywhere can show it live
and keep it after the machines are gone.  Costs: at most one write per
:data:`FLUSH_S` while output flows, none while the program is quiet; a program that
prints more than its cap keeps running, its output is cut there and the cut is said.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import IO

from syndeo.rendezvous.base import MAX_OUTPUT_CHUNK

# Latency goal: a line printed on the head shows at the launcher within ~2 s (one flush
# plus one follower poll).
FLUSH_S = 0.5
CHUNK_MAX = MAX_OUTPUT_CHUNK  # one store object (the rendezvous takes none larger)
MAX_BYTES = 64 * 1024 * 1024  # per program: a runaway log cannot fill the bucket
TRUNCATED = b"\n[syndeo: output cut here after %d MiB; the program kept running]\n"


class OutputStream:
    """Buffers output and writes it as chunks ``0, 1, 2 …`` through ``write_chunk``.

    ``write_chunk(seq, data)`` raising is an outage of the store: the chunk stays
    buffered and is retried at the next flush (bounded by ``max_bytes``), so a short
    outage loses nothing and a long one cannot exhaust the node's memory.
    """

    def __init__(
        self,
        write_chunk: Callable[[int, bytes], None],
        *,
        echo: IO[bytes] | None = None,
        max_bytes: int = MAX_BYTES,
        flush_s: float = FLUSH_S,
        on_error: Callable[[str], None] | None = None,
    ) -> None:
        self._write_chunk = write_chunk
        self._echo = echo
        self._max = max_bytes
        self._flush_s = flush_s
        self._on_error = on_error or (lambda msg: print(msg, file=sys.stderr, flush=True))
        self._lock = threading.Lock()
        self._buf = bytearray()
        self._taken = 0  # bytes accepted into the stream (the cap counts these)
        self._truncated = False
        self._seq = 0
        self._failing = False
        self._closed = threading.Event()
        self._flusher = threading.Thread(target=self._flush_loop, daemon=True)
        self._flusher.start()

    @property
    def bytes_taken(self) -> int:
        return self._taken

    @property
    def truncated(self) -> bool:
        return self._truncated

    def feed(self, data: bytes) -> None:
        if self._echo is not None:
            self._echo.write(data)
            self._echo.flush()
        with self._lock:
            if self._truncated:
                return
            room = self._max - self._taken
            if len(data) > room:
                data = data[:room] + TRUNCATED % (self._max // (1024 * 1024))
                self._truncated = True
            self._taken += len(data)
            self._buf += data

    def pump(self, pipe: IO[bytes]) -> threading.Thread:
        """Feed everything ``pipe`` yields, in a thread, until it closes."""

        def run() -> None:
            while chunk := pipe.read1(65536) if hasattr(pipe, "read1") else pipe.read(65536):
                self.feed(chunk)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        return thread

    def _flush_loop(self) -> None:
        while not self._closed.wait(self._flush_s):
            self.flush()

    def flush(self) -> bool:
        """Write what is buffered; False if the store refused (it stays buffered)."""
        with self._lock:
            while self._buf:
                data = bytes(self._buf[:CHUNK_MAX])
                try:
                    self._write_chunk(self._seq, data)
                except Exception as exc:  # the store's outage: retried next flush
                    if not self._failing:
                        self._on_error(f"output not delivered yet, will retry: {exc}")
                    self._failing = True
                    return False
                self._failing = False
                del self._buf[: len(data)]
                self._seq += 1
        return True

    def close(self, deadline_s: float = 30.0) -> bool:
        """Stop the flusher and deliver the rest (retrying up to ``deadline_s``)."""
        self._closed.set()
        self._flusher.join()
        end = time.monotonic() + deadline_s
        while not self.flush():
            if time.monotonic() >= end:
                return False
            time.sleep(1.0)
        return True
