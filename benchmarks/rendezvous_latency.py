"""Rendezvous benchmark: registration throughput and head-visibility latency, as JSON.

    python -m benchmarks.rendezvous_latency --backend s3 [--uri s3://bucket/prefix] [--out x.json]

Without ``--uri`` a cloud backend runs against its local wire-protocol server
(moto / fake-gcs-server / Azurite, started from ``testbeds/objectstores.py`` of a source
checkout, so numbers measure our code and the protocol, not a WAN).  Measured:

* ``registrations``: wall time for N nodes (threads) to ``register_node`` at once,
  and that none was lost;
* ``head_latency``: time from ``publish_head`` returning to a waiting worker's
  ``wait_for_head`` returning, with W workers polling (load), plus the probe rate
  those workers put on the store while they wait.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from syndeo.core.errors import SyndeoError
from syndeo.rendezvous import HeadRecord, NodeRecord, Rendezvous, open_rendezvous


def _summary(xs: list[float]) -> dict[str, float]:
    xs = sorted(xs)
    return {
        "median": round(statistics.median(xs), 4),
        "p90": round(xs[min(len(xs) - 1, int(0.9 * len(xs)))], 4),
        "min": round(xs[0], 4),
        "max": round(xs[-1], 4),
    }


def _head(cluster: str) -> HeadRecord:
    return HeadRecord(
        cluster_id=cluster,
        attempt=0,
        ip="10.0.0.1",
        gcs_port=6379,
        ray_version="-",
        syndeo_version="-",
        nonce=uuid.uuid4().hex,
        created_at=time.time(),
        hostname="bench",
    )


def bench_registrations(
    opener: Callable[[str], Rendezvous], nodes: int, clients: int, trials: int
) -> dict[str, Any]:
    times: list[float] = []
    for trial in range(trials):
        cluster = f"reg-{trial}-{uuid.uuid4().hex[:6]}"
        rvs = [opener(cluster) for _ in range(clients)]  # client setup is not timed
        barrier = threading.Barrier(nodes + 1)
        errors: list[BaseException] = []

        def register(
            rank: int,
            rvs: list[Rendezvous] = rvs,
            cluster: str = cluster,
            barrier: threading.Barrier = barrier,
            errors: list[BaseException] = errors,
        ) -> None:
            rec = NodeRecord(
                cluster_id=cluster,
                rank=rank,
                hostname=f"n{rank}",
                ip="10.0.0.2",
                pid=rank,
                joined_at=time.time(),
            )
            barrier.wait()
            try:
                rvs[rank % len(rvs)].register_node(rec)
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=register, args=(r,)) for r in range(nodes)]
        for t in threads:
            t.start()
        barrier.wait()
        start = time.perf_counter()
        for t in threads:
            t.join()
        times.append(time.perf_counter() - start)
        seen = len(rvs[0].list_nodes())
        rvs[0].cleanup(all_attempts=True)
        if errors or seen != nodes:
            raise SystemExit(f"registration trial {trial}: {len(errors)} errors, {seen}/{nodes}")
    return {
        "nodes": nodes,
        "clients": clients,
        "trials": trials,
        "seconds": _summary(times),
        "per_second_median": round(nodes / statistics.median(times), 1),
    }


def bench_head_latency(
    opener: Callable[[str], Rendezvous], waiters: int, trials: int, max_delay_s: float
) -> dict[str, Any]:
    latencies: list[float] = []
    probe_rates: list[float] = []
    for trial in range(trials):
        cluster = f"lat-{trial}-{uuid.uuid4().hex[:6]}"
        head_rv = opener(cluster)
        rvs = [opener(cluster) for _ in range(waiters)]
        probes = [0]
        lock = threading.Lock()
        seen_at: list[float] = []

        def wait(
            rv: Rendezvous,
            probes: list[int] = probes,
            seen_at: list[float] = seen_at,
            lock: threading.Lock = lock,
        ) -> None:
            read = rv.read_head

            def counted(not_before: float | None = None) -> HeadRecord | None:
                with lock:
                    probes[0] += 1
                return read(not_before)

            rv.read_head = counted  # type: ignore[method-assign]
            rv.wait_for_head(timeout_s=60)
            with lock:
                seen_at.append(time.perf_counter())

        threads = [threading.Thread(target=wait, args=(rv,)) for rv in rvs]
        for t in threads:
            t.start()
        # A random delay puts the waiters at varied points of their backoff.
        delay = random.uniform(0.2, max_delay_s)
        time.sleep(delay)
        head_rv.publish_head(_head(cluster))
        published = time.perf_counter()
        with lock:
            probes_before = probes[0]
        for t in threads:
            t.join()
        latencies.extend(s - published for s in seen_at)
        probe_rates.append(probes_before / delay)
        head_rv.cleanup(all_attempts=True)
    return {
        "waiters": waiters,
        "trials": trials,
        "publish_delay_s": [0.2, max_delay_s],
        "latency_s": _summary(latencies),
        "probes_per_second_while_waiting": _summary(probe_rates),
    }


@contextmanager
def _target(backend: str, uri: str | None) -> Iterator[str]:
    """The URI to benchmark; starts a local server (and bucket) when none is given."""
    if uri is not None:
        yield uri
        return
    if backend == "file":
        with tempfile.TemporaryDirectory(prefix="syndeo-bench-") as tmp:
            yield Path(tmp).as_uri()
        return
    try:
        from testbeds.objectstores import make_bucket, running
    except ModuleNotFoundError:
        msg = "no --uri given and testbeds/objectstores.py not found (needs a source checkout)"
        raise SystemExit(msg) from None
    with (
        tempfile.TemporaryDirectory(prefix="syndeo-bench-") as logs,
        running(backend, Path(logs)) as server,
    ):
        os.environ.update(server.env)
        make_bucket(server, "bench")
        yield f"{backend}://bench/rv"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--backend", choices=["file", "s3", "gs", "az"], required=True)
    ap.add_argument("--uri", help="location to use (default: a local server / temp dir)")
    ap.add_argument("--nodes", type=int, default=200, help="concurrent registrations")
    ap.add_argument("--clients", type=int, default=16, help="rendezvous clients shared by them")
    ap.add_argument("--waiters", type=int, nargs="+", default=[1, 50])
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--max-delay", type=float, default=3.0, help="max seconds before publish")
    ap.add_argument("--out", type=Path, help="also write the JSON here")
    args = ap.parse_args(argv)
    try:
        with _target(args.backend, args.uri) as uri:

            def opener(cluster: str) -> Rendezvous:
                return open_rendezvous(uri, cluster)

            opener("check").check()
            poller = opener("check").poller
            report = {
                "backend": args.backend,
                "uri": uri,
                "local_server": args.uri is None,
                "poller": {
                    "start_s": poller.start_s,
                    "max_s": poller.max_s,
                    "factor": poller.factor,
                },
                "host": {"cpus": os.cpu_count(), "python": platform.python_version()},
                "registrations": bench_registrations(opener, args.nodes, args.clients, args.trials),
                "head_latency": [
                    bench_head_latency(opener, w, args.trials, args.max_delay) for w in args.waiters
                ],
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
