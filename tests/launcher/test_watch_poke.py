"""A ``submit`` pokes the watcher through a local file: the watcher's nap between two
status reads ends at the poke (it then reads at once), and only then."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from syndeo.launcher.watch import _nap


def test_a_poke_ends_the_nap_and_nothing_else_does(tmp_path: Path) -> None:
    poke = tmp_path / "watch.poke"
    assert _nap(poke, 0.6) is False  # no poke file at all: the whole nap
    poke.touch()
    assert _nap(poke, 0.6) is False  # a poke from before the nap is not a new one
    timer = threading.Timer(0.3, lambda: poke.touch())
    began = time.monotonic()
    timer.start()
    try:
        assert _nap(poke, 60) is True
    finally:
        timer.cancel()
    assert time.monotonic() - began < 30  # woken by the poke, not by the end of the nap
