"""The watcher acts only on the head's status records that are signed for this cluster
and attempt, never older than one it has taken, and fresh (syndeo/launcher/statusgate.py)."""

from __future__ import annotations

from syndeo.launcher.statusgate import MAX_AGE_S, StatusGate
from syndeo.rendezvous import StatusRecord
from syndeo.rendezvous.base import CLOCK_SKEW_S

KEY = "cd" * 32
NOW = 1_000_000.0


def _st(seq: int, at: float = NOW, **fields: object) -> StatusRecord:
    base = {"phase": "serving", "nodes_expected": 1, "cluster_id": "c", "attempt": 0}
    return StatusRecord.model_validate({**base, "seq": seq, "updated_at": at, **fields})


def test_the_sequence_never_goes_back_and_old_records_are_not_taken() -> None:
    said: list[str] = []
    gate = StatusGate(KEY, "c", 0, said.append)
    first, second = _st(5).signed(KEY), _st(9).signed(KEY)
    assert gate.take(first, NOW) == first
    assert gate.take(second, NOW) == second
    assert gate.take(second, NOW + 2) == second  # the same record read again
    assert gate.take(first, NOW + 2) is None  # the head's own, played back
    assert gate.take(first, NOW + 4) is None
    assert said == ["a status record older than one already read (sequence 5 < 9): ignored"]
    # Never taken, whatever its sequence: written too long ago (a watcher started again).
    fresh = StatusGate(KEY, "c", 0, said.append)
    old = _st(99, at=NOW - MAX_AGE_S - CLOCK_SKEW_S - 1).signed(KEY)
    assert fresh.take(old, NOW) is None
    assert said[-1].startswith("a status record stale: written")
    assert fresh.take(_st(99, at=NOW - MAX_AGE_S).signed(KEY), NOW) is not None


def test_unsigned_altered_and_other_attempts_records_are_not_taken() -> None:
    said: list[str] = []
    gate = StatusGate(KEY, "c", 0, said.append)
    assert gate.take(_st(1), NOW) is None  # unsigned
    altered = _st(2).signed(KEY).model_copy(update={"nodes_lost": [1]})
    assert gate.take(altered, NOW) is None
    assert gate.take(_st(3, attempt=1).signed(KEY), NOW) is None  # another attempt's
    assert gate.take(_st(4, cluster_id="d").signed(KEY), NOW) is None
    assert gate.take(_st(5).signed("ef" * 32), NOW) is None  # another launch's key
    assert StatusGate(None, "c", 0, said.append).take(_st(6).signed(KEY), NOW) is None
    assert len(said) == 6 and all(line.endswith(": ignored") for line in said)
    assert gate.seq == -1  # nothing taken
