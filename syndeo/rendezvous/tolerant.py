"""Rendezvous calls a *running* cluster can do without for a while.

Bring-up fails fast when the store is unreachable (nothing is running yet).
Once a workload runs, the store only carries status, the stop flag and, at the
end, the result and the done record: an outage of minutes must not kill hours of
work.  :class:`Tolerant` turns a failing call into its default, says so once,
and retries later with backoff; :func:`retry_until` keeps delivering what must
not be lost (the result, the done record) until a generous deadline.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TypeVar

from syndeo.core.errors import RendezvousError

T = TypeVar("T")

# While the store is down, try again after 1, 2, 4, ... seconds, at most this often.
MAX_BACKOFF_S = 30.0


class Tolerant:
    """Degrade, don't die: wrap rendezvous calls whose failure can wait."""

    def __init__(self, log: Callable[[str], None], max_backoff_s: float = MAX_BACKOFF_S) -> None:
        self.log = log
        self.max_backoff_s = max_backoff_s
        self.down_since: float | None = None
        self._next_try = 0.0
        self._backoff = 0.0

    @property
    def down(self) -> bool:
        return self.down_since is not None

    def call(self, fn: Callable[[], T], default: T) -> T:
        """``fn()``, or ``default`` while the store fails (not even tried during backoff)."""
        now = time.monotonic()
        if now < self._next_try:
            return default
        try:
            value = fn()
        except RendezvousError as exc:
            now = time.monotonic()
            if self.down_since is None:
                self.down_since = now
                self._backoff = 1.0
                self.log(f"rendezvous unreachable, carrying on without it: {exc}")
            else:
                self._backoff = min(self._backoff * 2, self.max_backoff_s)
            self._next_try = now + self._backoff * random.uniform(0.8, 1.2)
            return default
        if self.down_since is not None:
            self.log(f"rendezvous reachable again after {time.monotonic() - self.down_since:.0f} s")
            self.down_since = None
            self._next_try = 0.0
        return value


def retry_until(fn: Callable[[], T], deadline_s: float, log: Callable[[str], None], what: str) -> T:
    """``fn()``, retried on :class:`RendezvousError` with backoff until ``deadline_s`` passes.

    The last error propagates once the deadline has passed.
    """
    end = time.monotonic() + deadline_s
    delay = 1.0
    logged = False
    while True:
        try:
            value = fn()
        except RendezvousError as exc:
            left = end - time.monotonic()
            if left <= 0:
                raise
            if not logged:
                log(f"cannot {what} yet, retrying for up to {deadline_s:.0f} s: {exc}")
                logged = True
            time.sleep(min(delay * random.uniform(0.8, 1.2), left))
            delay = min(delay * 2, MAX_BACKOFF_S)
            continue
        if logged:
            log(f"{what}: done after the rendezvous came back")
        return value
