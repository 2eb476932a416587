"""Baseline: RLlib PPO sampling, the method of mit-ll/RL-Benchmarks' speed test.

One env runner per CPU with one env each, train batch = 1000 x CPUs, and the
throughput of env steps sampled by PPO's own sampling call (the part of
``training_step`` before learning).  Episodes come back to the driver, so the
closest counterpart in our benchmark is ``collect`` mode.

RLlib and torch are an optional extra (``syndeo[rllib]``); without them this
baseline is skipped with a message, never silently.
"""

from __future__ import annotations

import importlib.util
import time
from typing import Any

from syndeo.bench.errors import BenchError
from syndeo.bench.models import Repeat

MISSING = (
    "RLlib baseline skipped: ray[rllib] and torch are not installed "
    "(pip install 'syndeo[rllib]' torch==2.13.0)"
)


def available() -> bool:
    return all(importlib.util.find_spec(m) is not None for m in ("torch", "ray.rllib", "tree"))


class RllibSampler:
    """A built PPO algorithm whose only use is timing its parallel sampling."""

    def __init__(self, env_id: str, workers: int, hidden: tuple[int, ...], seed: int) -> None:
        if not available():
            raise BenchError(MISSING)
        from ray.rllib.algorithms.ppo import PPOConfig

        t0 = time.perf_counter()
        self.workers = workers
        config = (
            PPOConfig()  # type: ignore[no-untyped-call]
            .environment(env_id)
            .framework("torch")
            .env_runners(
                num_env_runners=workers,
                num_envs_per_env_runner=1,
                # Our actors hold the cluster's CPUs while idle between interleaved
                # repeats; runners take none logically but still one core each in practice.
                num_cpus_per_env_runner=0,
                rollout_fragment_length="auto",
            )
            .training(train_batch_size_per_learner=1000 * workers)
            .rl_module(model_config={"fcnet_hiddens": list(hidden), "fcnet_activation": "relu"})
            .debugging(seed=seed, log_level="ERROR")
        )
        self.algo: Any = config.build_algo()
        self.startup_s = time.perf_counter() - t0

    def run(self, total: int) -> tuple[Repeat, int]:
        """One timed sampling round of at least ``total`` env steps (RLlib rounds up)."""
        from ray.rllib.execution.rollout_ops import synchronous_parallel_sample

        t0 = time.perf_counter()
        episodes: Any = synchronous_parallel_sample(
            worker_set=self.algo.env_runner_group,
            max_env_steps=total,
            _uses_new_env_runners=True,
        )
        dt = time.perf_counter() - t0
        counted = sum(ep.env_steps() for ep in episodes)
        return Repeat(samples=counted, seconds=dt, steps_per_s=counted / dt), counted

    def close(self) -> None:
        self.algo.stop()
