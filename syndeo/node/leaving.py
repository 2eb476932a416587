"""How a joined worker learns that its cluster is over, without loading the rendezvous.

While a cluster runs, Ray itself says whether the head is there: the head's GCS
accepts connections on the address every worker joined, and this node's own
``ray start --block`` exits when its raylet gives up on the GCS.  Both are
checked every second at no cost to the store.  The store's ``done`` record is
what tells a normal end from a lost head, so it is read right away once the head
is gone, and otherwise only rarely (backing off to :data:`DONE_POLL_MAX_S`) as a
fallback for a head that is alive but hung.  At 1,000 workers this is the
difference between ~3,600 and ~120 store requests per worker-hour
(``python -m benchmarks.rendezvous_load``, run from a checkout).
"""

from __future__ import annotations

import os
import random
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from syndeo.core.errors import RendezvousError
from syndeo.core.poll import Poller
from syndeo.rendezvous import DoneRecord, Rendezvous
from syndeo.rendezvous.tolerant import Tolerant

PROBE_EVERY_S = 1.0  # Ray-side checks: free for the store
DONE_POLL_START_S = 1.0
DONE_POLL_MAX_S = 30.0
# Consecutive refused probes before the head counts as gone (a busy GCS may drop one).
HEAD_GONE_AFTER = 3
# After the head is gone, how long its done record may take to become readable.
LEAVE_GRACE_S = 15.0


GCS_TIMEOUT_S = 10.0


class Released(Exception):
    """Ray's autoscaler let this node go (idle): its end is no failure."""


def released_by_ray(info: Any) -> bool:
    """Whether ``info`` (a node's ``GcsNodeInfo``) is of a node Ray's autoscaler let go:
    dead, with the reason its drain leaves -- AUTOSCALER_DRAIN_IDLE (the idle drain that a
    busy node refuses, which Syndeo's provider asks for in v1's place; autoscaler v2,
    ``ray drain-node``), or EXPECTED_TERMINATION with Ray's message "Terminated by
    autoscaler." (v1's own ``drain_nodes``).  A crash, a lost machine, a spot preemption
    or ``ray stop`` is none of these."""
    from ray.core.generated.gcs_pb2 import GcsNodeInfo  # type: ignore[attr-defined]

    if info.state != GcsNodeInfo.GcsNodeState.DEAD:
        return False
    death = info.death_info
    reason = type(death).Reason
    if death.reason == reason.Value("AUTOSCALER_DRAIN_IDLE"):
        return True
    by_autoscaler = "autoscaler" in death.reason_message.lower()
    return bool(death.reason == reason.Value("EXPECTED_TERMINATION") and by_autoscaler)


def own_entry(gcs: Any, temp_dir: Path) -> Any:
    """This node's newest entry in Ray's GCS, alive or dead (the one started with our
    ``--temp-dir``, which is in this node's own scratch); None if there is none."""
    want = os.path.realpath(temp_dir)
    mine = [
        info
        for info in gcs.get_all_node_info(timeout=GCS_TIMEOUT_S).values()
        if info.temp_dir and os.path.realpath(info.temp_dir) == want
    ]
    return max(mine, key=lambda info: info.start_time_ms, default=None)


def let_go(address: str, token_path: Path, temp_dir: Path) -> bool:
    """Asked once this node's Ray has ended while the head's GCS is there: was that Ray's
    autoscaler letting it go?  Any failure to ask is "no" (the node then fails, as before)."""
    os.environ["RAY_AUTH_MODE"] = "token"
    os.environ["RAY_AUTH_TOKEN_PATH"] = str(token_path)
    from ray._raylet import GcsClient  # type: ignore[attr-defined]

    try:
        info = own_entry(GcsClient(address=address), temp_dir)
    except Exception:  # a GCS that does not answer: not known to be a release
        return False
    return info is not None and released_by_ray(info)


def gcs_reachable(address: str, timeout_s: float = 2.0) -> bool:
    """True if the head's GCS accepts a TCP connection (nothing is sent)."""
    host, port = address.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s):
            return True
    except OSError:
        return False


def wait_until_done(
    rdv: Rendezvous,
    ray_alive: Callable[[], bool],
    head_alive: Callable[[], bool],
    log: Callable[[str], None],
    signed: Callable[[DoneRecord], bool],
    released: Callable[[], bool] = lambda: False,
) -> DoneRecord | None:
    """Block until the cluster is over; its done record, or None if the head vanished without one.

    Returns early (with the record) if the head is done while this node's Ray still
    runs.  An unreachable store is tolerated: the Ray-side checks go on.  Only a done
    record for which ``signed`` holds (the head's own, for this cluster and attempt) is
    one: whoever can write the store cannot send every worker away.  Raises
    :class:`Released` when this node's Ray ended, the head is there and ``released``
    says Ray's autoscaler let this node go.
    """
    store = _SignedDone(Tolerant(log), signed, log)
    next_done = time.monotonic() + DONE_POLL_START_S
    done_every = DONE_POLL_START_S
    refused = 0
    while True:
        if time.monotonic() >= next_done:
            done = store.read(rdv)
            if done is not None:
                return done
            done_every = min(done_every * 2, DONE_POLL_MAX_S)
            next_done = time.monotonic() + done_every * random.uniform(0.8, 1.2)
        if not ray_alive():
            break
        refused = 0 if head_alive() else refused + 1
        if refused == 1:
            # Most often the head stopping at the end of a run: one read says so at
            # once, so this node leaves in parallel with the head's own teardown.
            done = store.read(rdv)
            if done is not None:
                return done
        if refused >= HEAD_GONE_AFTER:
            break
        time.sleep(PROBE_EVERY_S)
    # Our Ray ended under a head that is there: most often Ray's autoscaler letting
    # this idle node go, which Ray's GCS says (one query, once).
    if refused == 0 and released():
        raise Released("Ray's autoscaler let this node go (idle)")
    # The head (or our Ray) is gone: the done record says whether that was the end.
    return _read_done_soon(rdv, store)


class _SignedDone:
    """Reads of the done record through ``store`` (tolerant of outages), keeping only one
    the head signed; any other is said once and is no done record."""

    def __init__(
        self, store: Tolerant, signed: Callable[[DoneRecord], bool], log: Callable[[str], None]
    ) -> None:
        self.store, self.signed, self.log, self.refused = store, signed, log, False

    def read(self, rdv: Rendezvous) -> DoneRecord | None:
        return self.check(self.store.call(rdv.read_done, None))

    def check(self, done: DoneRecord | None) -> DoneRecord | None:
        if done is None or self.signed(done):
            return done
        if not self.refused:
            self.refused = True
            self.log("ignoring a done record the head did not sign: staying")
        return None


def _read_done_soon(rdv: Rendezvous, store: _SignedDone) -> DoneRecord | None:
    # Straight to the store, not through its tolerant wrapper: the backoff from an
    # earlier outage must not skip the reads that decide how this node ends.

    def read() -> DoneRecord | None:
        try:
            return store.check(rdv.read_done())
        except RendezvousError as exc:
            store.log(f"cannot read the done record yet: {exc}")
            return None

    return Poller(start_s=0.2, max_s=2.0).until(read, time.monotonic() + LEAVE_GRACE_S)
