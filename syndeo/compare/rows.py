"""One priced configuration of one env (a row of every comparison table), and grouping.

Below both the report and the plots, which draw the same rows.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass, field

from syndeo.compare.costmodel import Pricing, usd_per_million

BILLION = 1e9


@dataclass
class Row:
    """One configuration's measurement of one env, priced."""

    env: str
    mode: str
    protocol: str
    target: str
    hardware: str
    nodes: int
    cpus_per_node: int  # Ray CPUs: vCPUs on a cloud, logical CPUs on your own machines
    price: Pricing
    charged_cpus_per_node: int  # on-prem: what a node is charged for (Slurm: allocated)
    rates: list[float] = field(default_factory=list)
    samples: int = 0
    allin_usd: float | None = 0.0  # this env's share of the runs' all-in cost
    runs: list[str] = field(default_factory=list)
    efficiency: float = 100.0  # vs the smallest size of the same target and hardware
    partial: bool = False  # some of its repeats come from a benchmark that did not finish
    emulated: bool = False  # a cloud run on an emulated API (priced as the type, not measured)

    @property
    def cpus(self) -> int:
        return self.nodes * self.cpus_per_node

    @property
    def mean(self) -> float:
        return statistics.fmean(self.rates)

    @property
    def std(self) -> float:
        return statistics.stdev(self.rates) if len(self.rates) > 1 else 0.0

    @property
    def per_cpu(self) -> float:
        return self.mean / self.cpus

    @property
    def usd_per_m(self) -> float:
        """Steady state: cluster $/h over measured throughput."""
        return usd_per_million(self.price.usd_per_h, self.mean)

    @property
    def allin_usd_per_m(self) -> float | None:
        """All-in: the runs' cost (start-up, baselines, teardown) over the steps counted."""
        if self.allin_usd is None or not self.samples:
            return None
        return self.allin_usd / self.samples * 1e6

    @property
    def hours_to_billion(self) -> float:
        return BILLION / self.mean / 3600.0

    @property
    def series(self) -> tuple[str, str, str, str, str, str]:
        """Rows of one scaling series: same env/mode/protocol/target/hardware/pricing."""
        return (self.env, self.mode, self.protocol, self.target, self.hardware, self.price.kind)

    @property
    def label(self) -> str:
        return f"{self.target} {self.hardware} {self.nodes}x{self.cpus_per_node}"

    @property
    def flags(self) -> str:
        return " ".join(
            f for f, on in (("PARTIAL", self.partial), ("EMULATED", self.emulated)) if on
        )


def groups(rows: list[Row]) -> dict[tuple[str, str, str], list[Row]]:
    """Rows per (env, mode, protocol), each sorted by steady-state $/M steps."""
    out: dict[tuple[str, str, str], list[Row]] = defaultdict(list)
    for r in rows:
        out[(r.env, r.mode, r.protocol)].append(r)
    return dict(sorted(out.items()))
