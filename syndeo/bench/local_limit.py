"""The "local limit": the same Sampler in W plain processes, no Ray.

This is what the hardware gives without any framework, measured the same way as
the Ray run (parent-side wall clock from "go" to the last result), so the ratio
between the two is Ray's overhead and nothing else.  Plain processes here reach
only 0.8-0.9 of W x one process (shared cores, noisy neighbours), which is why
the limit is measured rather than extrapolated.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import statistics
import time
from multiprocessing.connection import Connection, wait
from types import TracebackType

from syndeo.bench.errors import BenchError
from syndeo.bench.models import Repeat, Series
from syndeo.bench.rollout import Sampler, Trajectories


def _serve(
    conn: Connection, env_id: str, k: int, hidden: tuple[int, ...], seed: int, nice: int
) -> None:
    """Child loop: build envs, then run (n, chunk, collect) requests until told to stop."""
    # Same scheduling priority as the actors we are compared with (Ray renices its
    # workers); on a busy host a priority gap, not Ray, would otherwise set the ratio.
    os.nice(max(0, nice - os.nice(0)))
    sampler = Sampler(env_id, k, hidden, seed)
    conn.send("ready")
    while (req := conn.recv()) is not None:
        n, chunk, collect = req
        done = 0
        while done < n:
            out = sampler.run(min(chunk, n - done), collect)
            # Collect mode ships every chunk to the parent as it is made, like the actors do.
            if isinstance(out, Trajectories):
                conn.send(out)
                done += len(out)
            else:
                done += out
        conn.send(done)
    sampler.close()


class LocalPool:
    """W persistent plain processes, so repeats can interleave with the Ray runs."""

    def __init__(
        self,
        env_id: str,
        workers: int,
        k: int,
        hidden: tuple[int, ...],
        seed: int,
        nice: int = 0,
    ) -> None:
        ctx = mp.get_context("spawn")
        self.conns: list[Connection] = []
        self.procs: list[mp.process.BaseProcess] = []
        t0 = time.perf_counter()
        # Same threading as a Ray actor with num_cpus=1: BLAS must not spawn extra threads.
        saved = os.environ.get("OMP_NUM_THREADS")
        os.environ["OMP_NUM_THREADS"] = "1"
        try:
            for i in range(workers):
                parent, child = ctx.Pipe()
                p = ctx.Process(
                    target=_serve, args=(child, env_id, k, hidden, seed + i, nice), daemon=True
                )
                p.start()
                child.close()
                self.conns.append(parent)
                self.procs.append(p)
        finally:
            if saved is None:
                os.environ.pop("OMP_NUM_THREADS", None)
            else:
                os.environ["OMP_NUM_THREADS"] = saved
        for c in self.conns:
            if c.recv() != "ready":
                raise BenchError("a local-limit process failed to start")
        self.startup_s = time.perf_counter() - t0

    def run(self, shares: list[int], chunk: int, collect: bool) -> tuple[Repeat, int]:
        """One timed repeat; returns the figure and the exact samples counted."""
        t0 = time.perf_counter()
        for c, n in zip(self.conns, shares, strict=True):
            c.send((n, chunk, collect))
        counted = 0
        pending = list(self.conns)
        # Drain every pipe as data arrives: reading one child to the end first would block
        # the others on a full pipe and understate the limit.
        while pending:
            for ready in wait(pending):
                assert isinstance(ready, Connection)
                msg = ready.recv()
                if isinstance(msg, Trajectories):
                    counted += len(msg)
                    continue
                if not collect:
                    counted += msg
                pending.remove(ready)
        dt = time.perf_counter() - t0
        total = sum(shares)
        return Repeat(samples=total, seconds=dt, steps_per_s=total / dt), counted

    def close(self) -> None:
        for c in self.conns:
            with contextlib.suppress(BrokenPipeError, OSError):
                c.send(None)
        for p in self.procs:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()
                p.join()

    def __enter__(self) -> LocalPool:
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def split(total: int, parts: int) -> list[int]:
    """Exact division of total samples over parts (first ones take the remainder)."""
    base, rem = divmod(total, parts)
    return [base + (1 if i < rem else 0) for i in range(parts)]


def measure_local_limit(
    env_id: str,
    workers: int,
    samples: int,
    *,
    repeats: int = 4,
    collect: bool = False,
    envs_per_actor: int = 16,
    hidden: tuple[int, ...] = (64, 64),
    seed: int = 0,
    chunk: int = 4000,
) -> Series:
    """Stand-alone local limit (no Ray): ``repeats`` runs of ``samples`` over W processes."""
    if workers <= 0:
        raise BenchError("zero CPUs requested: the local limit needs at least one process")
    with LocalPool(env_id, workers, envs_per_actor, hidden, seed) as pool:
        reps = []
        for _ in range(repeats):
            rep, counted = pool.run(split(samples, workers), chunk, collect)
            if counted != samples:
                raise BenchError(f"local limit counted {counted} of {samples} samples")
            reps.append(rep)
        rates = [r.steps_per_s for r in reps]
        return Series(
            method="local_limit",
            repeats=reps,
            mean=statistics.fmean(rates),
            std=statistics.stdev(rates) if len(rates) > 1 else 0.0,
            startup_s=pool.startup_s,
        )
