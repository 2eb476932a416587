"""The one way Syndeo waits for something: poll, backing off, until a deadline.

Fast right after a wait starts, then slower up to ``max_s``, with jitter so that
hundreds of nodes polling one bucket or one scheduler do not move in lockstep.  Every
wait loop in the package goes through :class:`Poller` (or tenacity, for retrying a call
that raises): the delays are tuned per use, the loop is written once.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TypeVar

from syndeo.core.errors import RendezvousTimeout

T = TypeVar("T")


class Poller:
    """Adaptive polling: ``start_s`` after the first look, times ``factor`` each time, at
    most ``max_s``; never sleeping past the deadline."""

    def __init__(self, start_s: float = 0.05, max_s: float = 1.0, factor: float = 1.5) -> None:
        self.start_s, self.max_s, self.factor = start_s, max_s, factor

    def until(self, probe: Callable[[], T | None], deadline: float) -> T | None:
        """``probe()``'s first value that is not None, or None once ``deadline`` (a
        ``time.monotonic()``) has passed; ``probe`` runs at least once."""
        delay = self.start_s
        while True:
            value = probe()
            if value is not None:
                return value
            now = time.monotonic()
            if now >= deadline:
                return None
            time.sleep(min(delay * random.uniform(0.8, 1.2), max(deadline - now, 0.0)))
            delay = min(delay * self.factor, self.max_s)

    def wait(
        self, probe: Callable[[], T | None], deadline: float, on_timeout: Callable[[], str]
    ) -> T:
        """As :meth:`until`, but a wait that times out raises :class:`RendezvousTimeout`
        with ``on_timeout()``'s message."""
        value = self.until(probe, deadline)
        if value is None:
            raise RendezvousTimeout(on_timeout())
        return value
