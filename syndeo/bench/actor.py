"""The Ray actor: a Sampler pinned to one CPU, driven one chunk per remote call."""

from __future__ import annotations

import os
import time

import ray

from syndeo.bench.rollout import Sampler, Trajectories, peak_rss_bytes


@ray.remote(num_cpus=1)
class RolloutActor:
    def __init__(self, env_id: str, num_envs: int, hidden: tuple[int, ...], seed: int) -> None:
        self.sampler = Sampler(env_id, num_envs, hidden, seed)

    def ready(self) -> int:
        """The actor's niceness: Ray starts workers below normal priority (default 15)."""
        return os.nice(0)

    def sample(self, n: int, collect: bool) -> int | Trajectories:
        return self.sampler.run(n, collect)

    def cpu_time(self) -> float:
        """CPU seconds this actor process has used: throughput per CPU-second is what one
        core delivers, whatever else shares the host."""
        return time.process_time()

    def peak_rss(self) -> int:
        return peak_rss_bytes()
