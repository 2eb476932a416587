"""Which of the head's status records the launcher's watcher acts on.

Whoever can write the cluster's store (a deployer, a task of a cluster whose nodes hold
a credential for the whole bucket) can write its status record too.  The watcher ends,
replaces, adds and removes machines on what that record says, so it takes a record only
if all of these hold:

- the head signed it whole with a key derived from the launch key
  (``StatusRecord.verified``), for this cluster and this attempt;
- its sequence number is not lower than that of the last record taken: a copy of an
  earlier record of the head's own (idle, or from before the autoscaler's nodes joined)
  cannot be played back;
- it is fresh: written at most ``MAX_AGE_S`` (plus the clock skew tolerated between
  the machines) before it is read, so a watcher that starts again, with no record
  taken yet, does not act on an old one either.

Each record turned away is said once in the watcher's log.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from syndeo.rendezvous import StatusRecord
from syndeo.rendezvous.base import CLOCK_SKEW_S

# The head writes its status every 2 s (when the store answers): a record this much
# older than that is no longer what the head says.
MAX_AGE_S = 60.0


class StatusGate:
    def __init__(
        self, key: str | None, cluster_id: str, attempt: int, say: Callable[[str], None]
    ) -> None:
        self.key, self.cluster_id, self.attempt, self.say = key, cluster_id, attempt, say
        self.seq = -1  # the last record taken
        self._said: set[tuple[str, int, str | None]] = set()

    def take(self, st: StatusRecord | None, now: float | None = None) -> StatusRecord | None:
        """``st`` if the watcher may act on it, else None (and why, once per record)."""
        if st is None:
            return None
        why = self.refusal(st, time.time() if now is None else now)
        if why is None:
            self.seq = st.seq
            return st
        kind = why.split()[0]  # the rule: "not", "of", "older" or "stale"
        if (kind, st.seq, st.signature) not in self._said:
            self._said.add((kind, st.seq, st.signature))
            self.say(f"a status record {why}: ignored")
        return None

    def refusal(self, st: StatusRecord, now: float) -> str | None:
        """Why ``st`` is not taken (its first word names the rule), or None."""
        if self.key is None:
            return "not signed by this cluster's head (the cluster has no launch key)"
        if (st.cluster_id, st.attempt) != (self.cluster_id, self.attempt):
            return f"of cluster {st.cluster_id!r} attempt {st.attempt}, not this one's"
        if not st.verified(self.key, self.cluster_id, self.attempt):
            return "not signed by this cluster's head"
        if st.seq < self.seq:
            return f"older than one already read (sequence {st.seq} < {self.seq})"
        age = now - st.updated_at
        if age > MAX_AGE_S + CLOCK_SKEW_S:
            return f"stale: written {age:.0f} s ago"
        return None
