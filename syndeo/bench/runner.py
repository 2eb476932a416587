"""The Ray driver: actors per CPU, chunked remote calls, interleaved baselines.

Timing is the driver's wall clock from the first submitted chunk to the last
result, after actors exist and their envs are reset (start-up is reported on its
own).  Each actor always has a second chunk queued, so it never waits on the
driver between chunks; the driver never touches a single step.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from syndeo.bench import envs as envmod
from syndeo.bench import manifest, resume
from syndeo.bench.errors import BenchError
from syndeo.bench.local_limit import LocalPool, split
from syndeo.bench.models import (
    BenchConfig,
    BenchResult,
    EnvResult,
    Mode,
    Repeat,
    Series,
)
from syndeo.bench.nodewatch import WATCH_EVERY_S, NodeLoss, NodeWatch, alive_nodes
from syndeo.bench.progress import BenchProgress
from syndeo.bench.rllib_baseline import MISSING, RllibSampler
from syndeo.bench.rllib_baseline import available as rllib_available

# A chunk should take about this long: long enough that one remote call (~1 ms)
# is noise, short enough for smooth progress and bounded collect-mode memory.
CHUNK_TARGET_S = 0.25
IN_FLIGHT = 2
RLLIB_NOTE = "PPO sampling returns episodes to the driver: its counterpart is collect mode"


def connect(num_cpus: int | None = None) -> tuple[int, int]:
    """Join the cluster in RAY_ADDRESS, or start a private local Ray; (nodes, CPUs)."""
    import ray

    if num_cpus is not None and num_cpus <= 0:
        raise BenchError("zero CPUs requested: the benchmark needs at least one CPU")
    if not ray.is_initialized():
        if os.environ.get("RAY_ADDRESS"):
            if num_cpus is not None:
                raise BenchError("--num-cpus applies to a standalone run, not to RAY_ADDRESS")
            ray.init(log_to_driver=False)
        else:
            ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False)
    cpus = int(ray.cluster_resources().get("CPU", 0))  # type: ignore[no-untyped-call]
    nodes = len([n for n in ray.nodes() if n.get("Alive")])  # type: ignore[no-untyped-call]
    if cpus <= 0:
        raise BenchError("the Ray cluster offers zero CPUs: nothing can host an actor")
    return nodes, cpus


def _summary(
    method: Any, reps: list[Repeat], startup: float | None, note: str | None = None
) -> Series:
    rates = [r.steps_per_s for r in reps]
    std = statistics.stdev(rates) if len(rates) > 1 else 0.0
    return Series(
        method=method,
        repeats=reps,
        mean=statistics.fmean(rates),
        std=std,
        startup_s=startup,
        note=note,
    )


# No sample task finishing for this long ends the run (see ActorGroup.run).
STALL_S = 300.0


class ActorGroup:
    """W RolloutActors of one env; runs exact-count repeats through the object store."""

    def __init__(self, env_id: str, workers: int, cfg: BenchConfig) -> None:
        import ray

        from syndeo.bench.actor import RolloutActor

        t0 = time.perf_counter()
        # A node lost mid-run takes its actors along: Ray restarts them (on the node's
        # replacement, or wherever a CPU frees up) and re-runs the lost sample tasks, so
        # the count stays exact and only the throughput dips.
        restartable = RolloutActor.options(max_restarts=-1, max_task_retries=-1)  # type: ignore[attr-defined]
        self.actors = [
            restartable.remote(env_id, cfg.envs_per_actor, cfg.hidden, cfg.seed + i)
            for i in range(workers)
        ]
        self.nice = max(ray.get([a.ready.remote() for a in self.actors]))
        self.startup_s = time.perf_counter() - t0
        self.nodes = alive_nodes()  # the cluster's size: fewer alive is a loss
        self.node_losses: list[NodeLoss] = []  # every run's, the warm-up's included

    def run(
        self,
        total: int,
        chunk: int,
        collect: bool,
        on_samples: Callable[[int], None] | None = None,
        repeat: int | None = None,
    ) -> tuple[Repeat, int]:
        """``repeat``: the measured repeat's index (None: the warm-up), for node losses."""
        import ray

        plans = [_chunks(n, chunk) for n in split(total, len(self.actors))]
        inflight: dict[Any, int] = {}

        def submit(i: int) -> None:
            if plans[i]:
                inflight[self.actors[i].sample.remote(plans[i].pop(), collect)] = i

        counted = 0
        cpu0 = ray.get([a.cpu_time.remote() for a in self.actors])  # outside the timed window
        watch = NodeWatch(self.nodes, repeat)
        t0 = time.perf_counter()
        for i in range(len(self.actors)):
            for _ in range(IN_FLIGHT):
                submit(i)
        last = time.perf_counter()
        while inflight:
            # Woken at least once a second: a loss is seen while samples stall.
            ready, _ = ray.wait(list(inflight), num_returns=1, timeout=WATCH_EVERY_S)
            resume.check()  # the time-limit warning: this repeat is measured again later
            watch.tick(counted)
            if ready:
                last = time.perf_counter()
            elif time.perf_counter() - last > STALL_S:
                # Restartable actors wait for a CPU: a node lost and never replaced
                # would otherwise hang the run instead of ending it.
                raise BenchError(
                    f"no sample task finished in {STALL_S:.0f} s: a node was lost and "
                    "not replaced? ([recovery] replace_lost)"
                )
            for ref in ready:
                i = inflight.pop(ref)
                submit(i)
                out = ray.get(ref)
                # Collect mode: trajectories arrived through the object store; count rows.
                n = out if isinstance(out, int) else len(out)
                counted += n
                del out
                if on_samples is not None:
                    on_samples(n)
        dt = time.perf_counter() - t0
        self.node_losses.extend(watch.finish(counted))
        # (a restarted actor's clock starts again: never negative)
        cpu = max(0.0, sum(ray.get([a.cpu_time.remote() for a in self.actors])) - sum(cpu0))
        rep = Repeat(samples=total, seconds=dt, steps_per_s=total / dt, actor_cpu_seconds=cpu)
        return rep, counted

    def peak_rss(self) -> list[int]:
        import ray

        return list(ray.get([a.peak_rss.remote() for a in self.actors]))

    def close(self) -> None:
        import ray

        for a in self.actors:
            ray.kill(a)


def _chunks(n: int, chunk: int) -> list[int]:
    full, rem = divmod(n, chunk)
    return [rem] * (rem > 0) + [chunk] * full  # popped from the end: full chunks first


def _measure(
    env_id: str,
    workers: int,
    mode: Mode,
    cfg: BenchConfig,
    group: ActorGroup,
    pool: LocalPool | None,
    rllib: RllibSampler | None,
    progress: BenchProgress,
    checkpoint: Callable[[EnvResult], None] | None = None,
    prior: EnvResult | None = None,
) -> EnvResult:
    """``prior``: this measurement's whole repeats from an earlier run's checkpoint."""
    collect = mode == "collect"
    # Warm-up (untimed): caches, first-call paths, and a rate estimate for sizing.
    warm = workers * max(cfg.envs_per_actor * 20, cfg.samples_per_cpu)
    rep, _ = group.run(warm, warm, collect)
    if pool is not None:  # the same untimed warm-up, so neither side pays first calls
        pool.run(split(warm, workers), warm, collect)
    per_actor_rate = rep.steps_per_s / workers
    chunk = max(cfg.envs_per_actor, int(per_actor_rate * CHUNK_TARGET_S))
    total = _total(cfg, workers, rep, prior)
    progress.start(f"{envmod.env_name(env_id)} {mode} x{workers}", env_id, total * cfg.repeats)
    ours, local, theirs = _prior_repeats(prior)
    counted_all: list[int] = [r.samples for r in ours]

    def run_ours() -> None:
        r, counted = group.run(total, chunk, collect, progress.add, repeat=len(ours))
        ours.append(r)
        counted_all.append(counted)

    def run_local() -> None:
        if pool is not None:
            lr, lcount = pool.run(split(total, workers), chunk, collect)
            if lcount != total:
                raise BenchError(f"local limit counted {lcount} of {total} samples")
            local.append(lr)

    for i in range(len(ours), cfg.repeats):
        resume.check()
        # Interleaved, alternating order (ABBA): the two methods see the same background
        # load repeat by repeat, and a drift in load favours neither.
        for step in (run_ours, run_local) if i % 2 == 0 else (run_local, run_ours):
            step()
        if rllib is not None:
            theirs.append(rllib.run(total)[0])
        if any(c != total for c in counted_all):
            raise BenchError(
                f"{env_id}: requested {total} samples per repeat, counted {counted_all}"
            )
        if checkpoint is not None and i + 1 < cfg.repeats:
            checkpoint(
                _env_result(
                    env_id, workers, mode, cfg, total, group, pool, rllib, ours, local, theirs
                )
            )
    return _env_result(env_id, workers, mode, cfg, total, group, pool, rllib, ours, local, theirs)


def _total(cfg: BenchConfig, workers: int, warm: Repeat, prior: EnvResult | None) -> int:
    """Samples per repeat: a checkpoint's size (every repeat counts the same), or the
    protocol's."""
    if prior is not None:
        return prior.samples_requested
    if cfg.protocol == "paper":
        return cfg.samples_per_cpu * workers
    return max(cfg.samples_per_cpu * workers, int(warm.steps_per_s * cfg.steady_seconds))


def _prior_repeats(prior: EnvResult | None) -> tuple[list[Repeat], list[Repeat], list[Repeat]]:
    """(ours, local limit, RLlib) repeats of a checkpoint: the same number of each."""
    if prior is None:
        return [], [], []
    ours = list(prior.syndeo.repeats)
    local = list(prior.local_limit.repeats) if prior.local_limit else []
    theirs = list(prior.rllib.repeats) if prior.rllib else []
    return ours, local, theirs


def carried_over(
    prior: BenchResult | None, env_id: str, workers: int, mode: str
) -> EnvResult | None:
    """The checkpoint's measurement of (env, workers, mode), if it has one."""
    for r in prior.results if prior is not None else []:
        if (r.env_id, r.workers, r.mode) == (env_id, workers, mode):
            return r
    return None


def _whole(
    prior: BenchResult | None, env_id: str, workers: int, mode: str, repeats: int
) -> EnvResult | None:
    """The checkpoint's measurement of (env, workers, mode) if it has every repeat."""
    old = carried_over(prior, env_id, workers, mode)
    return old if old is not None and len(old.syndeo.repeats) >= repeats else None


def _measure_size(
    env_id: str,
    w: int,
    cfg: BenchConfig,
    result: BenchResult,
    progress: BenchProgress,
    checkpoint: Callable[[BenchResult], None] | None,
    use_rllib: bool,
    prior: BenchResult | None,
) -> None:
    """Every mode of one (env, actor count), appended to ``result`` as measured."""
    with contextlib.ExitStack() as stack:
        group = ActorGroup(env_id, w, cfg)
        stack.callback(group.close)
        pool = rllib = None
        if cfg.local_limit:
            pool = stack.enter_context(
                LocalPool(env_id, w, cfg.envs_per_actor, cfg.hidden, cfg.seed, group.nice)
            )
        if use_rllib:
            rllib = RllibSampler(env_id, w, cfg.hidden, cfg.seed)
            stack.callback(rllib.close)
        for mode in cfg.modes:

            def partial(res: EnvResult, done: list[EnvResult] = result.results) -> None:
                if checkpoint is not None:
                    checkpoint(result.model_copy(update={"results": [*done, res], "partial": True}))

            whole = _whole(prior, env_id, w, mode, cfg.repeats)
            if whole is not None:
                result.results.append(whole)
                continue
            old = carried_over(prior, env_id, w, mode)
            result.results.append(
                _measure(env_id, w, mode, cfg, group, pool, rllib, progress, partial, old)
            )
            if checkpoint is not None:
                checkpoint(result.model_copy(update={"partial": True}))


def _env_result(
    env_id: str,
    workers: int,
    mode: Mode,
    cfg: BenchConfig,
    total: int,
    group: ActorGroup,
    pool: LocalPool | None,
    rllib: RllibSampler | None,
    ours: list[Repeat],
    local: list[Repeat],
    theirs: list[Repeat],
) -> EnvResult:
    """The summary of the repeats measured so far."""
    res = EnvResult(
        env_id=env_id,
        env_name=envmod.env_name(env_id),
        mode=mode,
        workers=workers,
        envs_per_actor=cfg.envs_per_actor,
        samples_requested=total,
        samples_counted=total,
        syndeo=_summary("syndeo", ours, group.startup_s),
        peak_rss_per_actor_bytes=group.peak_rss(),
        actor_niceness=group.nice,
        steps_per_cpu_second=statistics.median(
            r.samples / r.actor_cpu_seconds for r in ours if r.actor_cpu_seconds
        ),
        node_losses=list(group.node_losses),
    )
    if pool is not None:
        res.local_limit = _summary("local_limit", local, pool.startup_s)
        res.ratio_local_limit = statistics.median(
            o.steps_per_s / loc.steps_per_s for o, loc in zip(ours, local, strict=True)
        )
    if rllib is not None:
        res.rllib = _summary("rllib_ppo", theirs, rllib.startup_s, RLLIB_NOTE)
        res.ratio_rllib = statistics.median(
            o.steps_per_s / t.steps_per_s for o, t in zip(ours, theirs, strict=True)
        )
    return res


def run_benchmark(
    cfg: BenchConfig,
    progress: BenchProgress | None = None,
    num_cpus: int | None = None,
    checkpoint: Callable[[BenchResult], None] | None = None,
    prior: BenchResult | None = None,
) -> BenchResult:
    """Run every (env, size, mode) of ``cfg`` on the connected (or a local) Ray cluster.

    ``checkpoint`` gets the result so far (``partial=True``) after every repeat, so an
    interrupted multi-hour run keeps what it measured; ``prior`` (such a checkpoint,
    of this configuration) is continued: its whole measurements and repeats are kept.
    """
    env_ids = envmod.resolve(cfg.envs, cfg.env_version)  # fail before starting anything
    started = manifest.now_iso()
    nodes, cpus = connect(num_cpus)
    sizes = cfg.workers or [cpus]
    bad = [w for w in sizes if not 1 <= w <= cpus]
    if bad:
        raise BenchError(f"worker counts {bad} do not fit the cluster's {cpus} CPUs")
    result = BenchResult(manifest=manifest.build(nodes, cpus, started), config=cfg, results=[])
    progress = progress or BenchProgress(tty=False)
    use_rllib = cfg.rllib and rllib_available()
    if cfg.rllib and not use_rllib:
        result.notes.append(MISSING)
        print(MISSING, file=sys.stderr)
    if prior is not None:
        result.repeats_from_checkpoint = sum(len(r.syndeo.repeats) for r in prior.results)
        result.notes.append(
            f"continued from a checkpoint: {result.repeats_from_checkpoint} repeat(s) "
            "measured by an earlier run"
        )
    for env_id in env_ids:
        for w in sizes:
            whole = [_whole(prior, env_id, w, m, cfg.repeats) for m in cfg.modes]
            if all(whole):
                result.results.extend(r for r in whole if r is not None)
                continue
            _measure_size(env_id, w, cfg, result, progress, checkpoint, use_rllib, prior)
    result.manifest.finished_at = manifest.now_iso()
    result.manifest.load_avg_1m.append(manifest.load_avg())
    return result
