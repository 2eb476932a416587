"""Rendezvous load of a running cluster: store requests per node-hour, as JSON.

    python -m benchmarks.rendezvous_load --backend s3 [--workers 1000] [--seconds 150]
                                     [--policy after|before] [--out x.json]

A threaded simulation: one head and W workers, each a thread with the real
rendezvous calls of ``syndeo node`` against a real store (without ``--uri``: the
local wire-protocol server of ``testbeds/objectstores.py``, as in ``bench.py``).  Ray is
not started: "the head's Ray is up" is an in-process flag, so the figure is the
store's load alone.  Every backend primitive call (one HTTP request on an object
store, one file operation on a shared filesystem) is counted.

Policies:

* ``after`` -- this checkout's code: workers run :func:`syndeo.node.leaving.wait_until_done`
  (Ray-side checks every second, ``done`` read with backoff to 30 s); the head uses
  the cadences of :mod:`syndeo.node.workload`.
* ``before`` -- the loops of commit a01a1f1, reproduced here to measure them:
  every worker read ``done`` with backoff 0.1 s -> 1 s for the whole run; the head
  read the stop flag every 0.25 s and wrote status every second.

Phases are counted separately: *join* (until every worker registered), *run*
(``--seconds`` of a running workload), *leave* (head done -> every worker gone).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.rendezvous_latency import _head, _target
from syndeo.core.errors import SyndeoError
from syndeo.node import leaving, workload
from syndeo.rendezvous import (
    DoneRecord,
    NodeRecord,
    Phase,
    Rendezvous,
    StatusRecord,
    open_rendezvous,
)

PRIMITIVES = ("_create", "_write", "_read", "_list", "_delete_prefix")


class Tally:
    """Thread-safe request counts by phase and primitive."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.phase = "join"
        self.counts: dict[str, Counter[str]] = {p: Counter() for p in ("join", "run", "leave")}
        self.run_half: Counter[str] = Counter()  # the second half of the run phase
        self.half_started = False

    def add(self, op: str) -> None:
        with self.lock:
            self.counts[self.phase][op] += 1
            if self.phase == "run" and self.half_started:
                self.run_half[op] += 1

    def counted(self, rv: Rendezvous) -> Rendezvous:
        """Wrap ``rv``'s primitives (instance attributes shadow the class's methods)."""
        for name in PRIMITIVES:
            inner = getattr(rv, name)

            def wrapper(*args: Any, _inner: Any = inner, _op: str = name.lstrip("_")) -> Any:
                self.add(_op)
                return _inner(*args)

            setattr(rv, name, wrapper)
        return rv


def _worker_before(rv: Rendezvous, head_gone: threading.Event) -> None:
    # a01a1f1 node.py run_worker: poll done, backoff 0.1 -> 1.0 s (x1.5), whole run.
    delay = 0.1
    while rv.read_done() is None:
        time.sleep(delay)
        delay = min(delay * 1.5, 1.0)


def _worker_after(rv: Rendezvous, head_gone: threading.Event) -> None:
    # Counts the store's requests only: any done record ends the wait (the real one
    # checks the head's signature, which costs no request).
    leaving.wait_until_done(
        rv, lambda: True, lambda: not head_gone.is_set(), lambda _m: None, lambda _d: True
    )


def _status(phase: Phase, workers: int) -> StatusRecord:
    return StatusRecord(phase=phase, nodes_expected=workers + 1, updated_at=time.time())


def _head_loop(rv: Rendezvous, policy: str, seconds: float, workers: int) -> None:
    end = time.monotonic() + seconds
    if policy == "before":
        # a01a1f1 workload.py run_workload: stop flag every 0.25 s, status every 1 s.
        last = 0.0
        while time.monotonic() < end:
            rv.stop_requested()
            if time.monotonic() - last >= 1.0:
                last = time.monotonic()
                rv.publish_status(_status(Phase.RUNNING, workers))
            time.sleep(0.25)
        return
    next_stop = next_status = 0.0
    while time.monotonic() < end:
        now = time.monotonic()
        if now >= next_stop:
            next_stop = now + workload.STOP_EVERY_S
            rv.stop_requested()
        if now >= next_status:
            next_status = now + workload.STATUS_EVERY_S
            rv.publish_status(_status(Phase.RUNNING, workers))
        time.sleep(workload.TICK_S)


def simulate(
    opener: Callable[[str], Rendezvous], workers: int, seconds: float, policy: str, clients: int
) -> dict[str, Any]:
    tally = Tally()
    cluster = f"load-{uuid.uuid4().hex[:8]}"
    head_rv = tally.counted(opener(cluster))
    rvs = [tally.counted(opener(cluster)) for _ in range(clients)]
    head_gone = threading.Event()
    registered = threading.Semaphore(0)
    errors: list[BaseException] = []
    follow = _worker_before if policy == "before" else _worker_after

    def worker(rank: int) -> None:
        rv = rvs[rank % len(rvs)]
        try:
            rv.wait_for_head(timeout_s=600)
            if rv.get_secret("token") is None:
                raise RuntimeError("no token")
            rv.register_node(
                NodeRecord(
                    cluster_id=cluster,
                    rank=rank,
                    hostname=f"n{rank}",
                    ip="10.0.0.2",
                    pid=rank,
                    joined_at=time.time(),
                )
            )
            registered.release()
            follow(rv, head_gone)
        except BaseException as exc:
            errors.append(exc)
            registered.release()

    threads = [threading.Thread(target=worker, args=(r,), daemon=True) for r in range(workers)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    time.sleep(0.5)  # workers are waiting for the head, as when nodes start together
    head_rv.put_secret("token", b"sim-token")
    head_rv.publish_head(_head(cluster))
    for _ in range(workers):
        registered.acquire()
    join_s = time.monotonic() - t0
    with tally.lock:
        tally.phase = "run"
    half = threading.Timer(seconds / 2, lambda: setattr(tally, "half_started", True))
    half.start()
    _head_loop(head_rv, policy, seconds, workers)
    with tally.lock:
        tally.phase = "leave"
    t_leave = time.monotonic()
    head_rv.mark_done(DoneRecord(exit_code=0, finished_at=time.time()))
    head_gone.set()  # the head stops its Ray right after writing done
    for t in threads:
        t.join(timeout=120)
    leave_s = time.monotonic() - t_leave
    head_rv.cleanup(all_attempts=True)
    if errors:
        raise SystemExit(f"{len(errors)} simulated workers failed; first: {errors[0]!r}")
    nodes = workers + 1
    run = sum(tally.counts["run"].values())
    run_half = sum(tally.run_half.values())
    return {
        "policy": policy,
        "workers": workers,
        "run_seconds": seconds,
        "join_seconds": round(join_s, 1),
        "leave_seconds": round(leave_s, 1),
        "requests": {p: dict(c) for p, c in tally.counts.items()},
        "join_requests_per_node": round(sum(tally.counts["join"].values()) / nodes, 1),
        "leave_requests_per_node": round(sum(tally.counts["leave"].values()) / nodes, 1),
        # Whole run phase (includes the backoff ramp), and its second half (steady state).
        "run_requests_per_node_hour": round(run / nodes / (seconds / 3600)),
        "steady_requests_per_node_hour": round(run_half / nodes / (seconds / 2 / 3600)),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--backend", choices=["file", "s3", "gs", "az"], required=True)
    ap.add_argument("--uri", help="location to use (default: a local server / temp dir)")
    ap.add_argument("--workers", type=int, default=1000)
    ap.add_argument("--seconds", type=float, default=150.0, help="length of the run phase")
    ap.add_argument("--policy", choices=["after", "before"], default="after")
    ap.add_argument("--clients", type=int, default=32, help="rendezvous clients shared by workers")
    ap.add_argument("--out", type=Path, help="also write the JSON here")
    args = ap.parse_args(argv)
    threading.stack_size(512 * 1024)  # 1,000 threads on a small machine
    # A timeout's TERM must unwind through _target, which stops the emulator it started.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        with _target(args.backend, args.uri) as uri:
            report = {
                "backend": args.backend,
                "uri": uri,
                "local_server": args.uri is None,
                "host": {"cpus": os.cpu_count(), "python": platform.python_version()},
                "leaving": {
                    "done_poll_max_s": leaving.DONE_POLL_MAX_S,
                    "probe_every_s": leaving.PROBE_EVERY_S,
                },
                **simulate(
                    lambda c: open_rendezvous(uri, c),
                    args.workers,
                    args.seconds,
                    args.policy,
                    args.clients,
                ),
            }
    except SyndeoError as err:
        print(f"error: {err}", file=sys.stderr)
        return err.exit_code
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
