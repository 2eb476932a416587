"""What a measured run costs: cloud instances from the catalog, on-prem from ``[cost.onprem]``.

Two figures per run, both shown in the report:

* the cluster's **$/hour** while it runs -- multiplied by steady-state throughput
  this gives $ per million steps;
* the run's **all-in cost** -- cloud: instance-seconds from the deploy summary (start-up
  and teardown included) x the hourly price; on-prem: allocated CPUs x job wall time x
  the CPU-hour rate (a CPU as Ray counts it; Slurm: the CPUs it allocated).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from syndeo.compare.catalog import Catalog
from syndeo.compare.runs import CLOUD_TARGETS, Run
from syndeo.compare.settings import OnPremCost

STEPS_PER_MILLION = 1e6


@dataclass(frozen=True)
class Pricing:
    kind: Literal["on-demand", "spot", "on-prem"]
    usd_per_h: float  # the whole cluster
    region: str
    basis: str  # how usd_per_h was made, for the report


def pricing(run: Run, catalog: Catalog, onprem: OnPremCost) -> Pricing:
    m = run.machines
    if run.target in CLOUD_TARGETS:
        assert m is not None and m.instance_type and m.region  # checked when read
        kind: Literal["on-demand", "spot"] = "spot" if m.spot else "on-demand"
        if not m.groups:
            hourly = catalog.hourly(m.provider, m.instance_type, m.region, m.spot)
            return Pricing(
                kind,
                m.count * hourly,
                m.region,
                f"{m.count} x {m.instance_type} {kind} {hourly:g} $/h",
            )
        # Node groups: every group's nodes at its own type's price (a missing price
        # for any of them is the catalog's one-line error).
        parts = [(n, t, catalog.hourly(m.provider, t, m.region, m.spot)) for t, n in m.billed()]
        return Pricing(
            kind,
            sum(n * hourly for n, _, hourly in parts),
            m.region,
            " + ".join(f"{n} x {t}" for n, t, _ in parts)
            + f" {kind} at "
            + ", ".join(f"{hourly:g}" for _, _, hourly in parts)
            + " $/h",
        )
    rate = onprem.core_hour_usd()
    return Pricing(
        "on-prem", run.charged_cpus * rate, "–", f"{run.charged_cpus} CPUs x {rate:.6f} $/CPU-h"
    )


def run_cost_usd(run: Run, price: Pricing) -> float | None:
    """All-in cost of the run, or None when its duration is unknown."""
    m = run.machines
    if run.target in CLOUD_TARGETS:
        assert m is not None and m.instance_seconds is not None
        return m.instance_seconds / 3600.0 * price.usd_per_h / m.count
    if run.wall_s is None:
        return None
    return run.wall_s / 3600.0 * price.usd_per_h


def usd_per_million(usd_per_h: float, steps_per_s: float) -> float:
    return usd_per_h / (steps_per_s * 3600.0) * STEPS_PER_MILLION
