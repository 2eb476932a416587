"""Pooled repeats of one benchmark configuration: what the report tabulates and plots."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field


@dataclass
class Point:
    """Pooled repeats of one (env, mode, workers, protocol)."""

    env_id: str
    env_name: str
    mode: str
    protocol: str
    workers: int
    rates: list[float] = field(default_factory=list)
    local: list[float] = field(default_factory=list)
    rllib: list[float] = field(default_factory=list)
    ratios_local: list[float] = field(default_factory=list)
    ratios_rllib: list[float] = field(default_factory=list)
    peak_rss: list[int] = field(default_factory=list)
    per_cpu_second: list[float] = field(default_factory=list)

    @property
    def mean(self) -> float:
        return statistics.fmean(self.rates)

    @property
    def std(self) -> float:
        return statistics.stdev(self.rates) if len(self.rates) > 1 else 0.0
