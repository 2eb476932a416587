"""Predict cost and wall time to collect N steps of one env, per target and instance type.

Sources of a prediction, most trusted first:

* a target/instance type measured for this env: its own fitted scaling model;
* a cloud instance type never measured: the *basis* measurement (default: the measured
  series with the most CPUs) evaluated at the type's vCPUs and scaled by the catalog's
  relative_speed (per-vCPU speed against a CPU of the basis), printed next to the
  figure.  A real run on that type replaces this.

One CPU unit throughout: a CPU is what Ray counts, which is a vCPU on a cloud instance
and a logical CPU (hardware thread) on an SMT machine.  Every series is fitted in it and
every model is evaluated in it, so a measured 4-vCPU instance and an unmeasured one of
the same size meet the model at the same CPU count.  (The catalog's vcpus_per_core is
not used: dividing by it mixed cores into a model fitted in vCPUs.)

On-prem hardware (local, slurm, ssh) is not in any catalog, so it is predicted only
from its own measurements; an env or on-prem target never measured is refused.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from syndeo.compare.catalog import Catalog, Price
from syndeo.compare.errors import CompareError
from syndeo.compare.fit import Fit, fit_power_law
from syndeo.compare.report import UNIT, usd
from syndeo.compare.rows import Row
from syndeo.compare.runs import CLOUD_TARGETS, ONPREM_TARGETS, TARGETS
from syndeo.compare.settings import OnPremCost
from syndeo.core.clouds import CLOUDS

DEFAULT_SIZES = (1, 2, 4, 8, 16)


@dataclass(frozen=True)
class Series:
    """Measured sizes of one target/hardware/pricing for the planned env."""

    target: str
    hardware: str
    cpus_per_node: int  # Ray CPUs
    charged_cpus_per_node: int  # on-prem: what a node is charged for (Slurm: allocated)
    fit: Fit
    partial: bool = False  # fitted to repeats of a benchmark that did not finish

    @property
    def name(self) -> str:
        return f"{self.target} {self.hardware}"

    def describe(self) -> str:
        """The fit line: name, PARTIAL if it is, and the fit's quality."""
        return f"fit {self.name}{' (PARTIAL runs)' if self.partial else ''}: {self.fit.quality()}"


@dataclass(frozen=True)
class Prediction:
    target: str
    hardware: str
    region: str
    nodes: int
    cpus: int  # Ray CPUs (vCPUs on a cloud) the model is evaluated at
    steps_per_s: float
    hours: float
    usd_ondemand: float  # on-prem rows: the [cost.onprem] cost
    usd_spot: float | None
    source: str  # "measured" or "predicted from <basis>"
    assumptions: str  # relative_speed, or "–"
    extrapolated: bool
    measured: tuple[int, int]  # CPU range of the measurements the figure comes from
    spot_is_artefact: bool = False  # a spot price its catalog row calls an artefact

    @property
    def onprem(self) -> bool:
        return self.target in ONPREM_TARGETS


@dataclass
class Plan:
    env: str
    mode: str
    protocol: str
    steps: float
    series: list[Series]
    basis: Series
    predictions: list[Prediction]


def _series(rows: list[Row]) -> list[Series]:
    by: dict[tuple[str, str], list[Row]] = defaultdict(list)
    for r in rows:
        by[(r.target, r.hardware)].append(r)
    out = []
    for (target, hardware), rs in sorted(by.items()):
        # One point per size; runs of a size priced differently (spot/on-demand)
        # measured the same hardware, so their throughputs pool.
        sizes: dict[int, list[float]] = defaultdict(list)
        for r in rs:
            sizes[r.cpus] += r.rates
        points = [(n, sum(v) / len(v)) for n, v in sizes.items()]
        widest = max(rs, key=lambda r: r.cpus_per_node)
        out.append(
            Series(
                target,
                hardware,
                widest.cpus_per_node,
                widest.charged_cpus_per_node,
                fit_power_law(points),
                any(r.partial for r in rs),
            )
        )
    return out


def make_plan(
    rows: list[Row],
    catalog: Catalog,
    onprem: OnPremCost,
    env: str,
    steps: float,
    mode: str | None = None,
    targets: list[str] | None = None,
    basis: str | None = None,
    sizes: tuple[int, ...] = DEFAULT_SIZES,
) -> Plan:
    if steps <= 0:
        raise CompareError(f"--steps must be positive, got {steps:g}")
    mine, mode, protocol = _rows_to_fit(rows, env, mode)
    series = _series(mine)
    measured_targets = sorted({s.target for s in series})
    _check_targets(env, targets, basis, measured_targets)
    candidates = [s for s in series if basis is None or s.target == basis]
    base = max(candidates, key=lambda s: (s.fit.hi, len(s.fit.points)))
    wanted = targets or [*measured_targets, *(c for c in CLOUDS if c not in measured_targets)]
    preds = _onprem_predictions(series, wanted, sizes, steps, onprem.core_hour_usd())
    preds += _cloud_predictions(series, base, catalog, wanted, sizes, steps)
    if not preds:
        raise CompareError(
            f"nothing to plan for {', '.join(wanted)}: no measured series and no catalog rows"
        )
    preds.sort(key=lambda p: p.usd_ondemand)
    return Plan(env, mode, protocol, steps, series, base, preds)


def _rows_to_fit(rows: list[Row], env: str, mode: str | None) -> tuple[list[Row], str, str]:
    """The rows of ``env`` in one mode and one protocol, with that mode and protocol."""
    measured_envs = sorted({r.env for r in rows})
    mine = [r for r in rows if r.env == env]
    if not mine:
        raise CompareError(
            f"no measurement of {env} in the results (measured: {', '.join(measured_envs)}): "
            f"run the benchmark on it first, e.g. invoke deploy --env {env}"
        )
    modes = sorted({r.mode for r in mine})
    mode = mode or ("count" if "count" in modes else modes[0])
    mine = [r for r in mine if r.mode == mode]
    if not mine:
        raise CompareError(f"{env} was measured in {', '.join(modes)} mode only, not {mode}")
    # Steady state is the better estimate of long runs; the paper protocol otherwise.
    protocol = "steady" if any(r.protocol == "steady" for r in mine) else mine[0].protocol
    return [r for r in mine if r.protocol == protocol], mode, protocol


def _check_targets(
    env: str, targets: list[str] | None, basis: str | None, measured_targets: list[str]
) -> None:
    """Refuse an unknown target, an on-prem one never measured, and a basis never measured."""
    for t in targets or []:
        if t not in TARGETS:
            raise CompareError(f"unknown target {t!r} (known: {', '.join(TARGETS)})")
        if t in ONPREM_TARGETS and t not in measured_targets:
            raise CompareError(
                f"no measurement of {env} on target {t} (measured on: "
                f"{', '.join(measured_targets)}): an on-prem machine is predicted only from "
                "its own runs"
            )
    if basis is not None and basis not in measured_targets:
        raise CompareError(
            f"--basis {basis}: no measurement of {env} there (measured on: "
            f"{', '.join(measured_targets)})"
        )


def _onprem_predictions(
    series: list[Series], wanted: list[str], sizes: tuple[int, ...], steps: float, rate: float
) -> list[Prediction]:
    """Each wanted on-prem series at each size, from its own fit, at ``rate`` per core-hour."""
    preds = []
    for s in series:
        if s.target not in ONPREM_TARGETS or s.target not in wanted:
            continue
        for k in sizes:
            cpus = k * s.cpus_per_node
            tput = s.fit.predict(cpus)
            hours = steps / tput / 3600.0
            preds.append(
                Prediction(
                    target=s.target,
                    hardware=s.hardware,
                    region="–",
                    nodes=k,
                    cpus=cpus,
                    steps_per_s=tput,
                    hours=hours,
                    usd_ondemand=k * s.charged_cpus_per_node * rate * hours,
                    usd_spot=None,
                    source="measured",
                    assumptions="–",
                    extrapolated=s.fit.extrapolates(cpus),
                    measured=(s.fit.lo, s.fit.hi),
                )
            )
    return preds


def _cloud_predictions(
    series: list[Series],
    base: Series,
    catalog: Catalog,
    wanted: list[str],
    sizes: tuple[int, ...],
    steps: float,
) -> list[Prediction]:
    """Each catalog row of each wanted cloud at each size: from its own series if it was
    measured, else from ``base``."""
    preds = []
    for cloud in CLOUDS:
        if cloud not in wanted:
            continue
        for price in catalog.of(cloud):
            own = _own_series(series, price.instance_type)
            preds += [_cloud_prediction(cloud, price, own, base, k, steps) for k in sizes]
    return preds


def _cloud_prediction(
    cloud: str, price: Price, own: Series | None, base: Series, k: int, steps: float
) -> Prediction:
    """``k`` instances of ``price``'s type, from its own series or else from ``base``."""
    if own is not None:
        fit, n, speed = own.fit, k * own.cpus_per_node, 1.0
        source, assumptions = "measured", "–"
    else:
        # Ray counts every vCPU: the unit the basis was fitted in.
        fit, n, speed = base.fit, k * price.vcpus, price.relative_speed
        source = f"predicted from {base.name}"
        assumptions = f"relative_speed {price.relative_speed:g}"
    tput = fit.predict(n) * speed
    hours = steps / tput / 3600.0
    spot = None if price.spot_usd_per_h is None else k * price.spot_usd_per_h * hours
    return Prediction(
        target=cloud,
        hardware=price.instance_type,
        region=price.region,
        nodes=k,
        cpus=n,
        steps_per_s=tput,
        hours=hours,
        usd_ondemand=k * price.ondemand_usd_per_h * hours,
        usd_spot=spot,
        source=source,
        assumptions=assumptions,
        extrapolated=fit.extrapolates(n),
        measured=(fit.lo, fit.hi),
        spot_is_artefact=price.spot_is_artefact,
    )


def _own_series(series: list[Series], instance_type: str) -> Series | None:
    """The series measured on this cloud instance type, if any."""
    return next(
        (s for s in series if s.target in CLOUD_TARGETS and s.hardware == instance_type), None
    )


# ---------------------------------------------------------------------- presentation
# Shared by the terminal table and plan.md/plan.html.
COLUMNS = (
    "target",
    "hardware",
    "region",
    "nodes",
    "model CPUs",
    "steps/s",
    "wall h",
    "on-demand/on-prem $",
    "spot $",
    "source",
    "assumptions",
    "range",
)
ORDER = "cheapest on-demand/on-prem first"


def title(p: Plan) -> str:
    return f"Plan: {p.steps:,.0f} steps of {p.env} ({p.mode}, {p.protocol} measurements), {ORDER}"


def _measured(x: Prediction) -> str:
    lo, hi = x.measured
    return f"measured {lo}" if lo == hi else f"measured {lo}–{hi}"


def _range(x: Prediction) -> str:
    return f"EXTRAPOLATED ({_measured(x)} CPUs)" if x.extrapolated else "measured range"


def cells(x: Prediction) -> list[str]:
    spot = usd(x.usd_spot) + (" (artefact)" if x.spot_is_artefact else "")
    return [
        x.target,
        x.hardware,
        x.region,
        str(x.nodes),
        str(x.cpus),
        f"{x.steps_per_s:,.0f}",
        f"{x.hours:,.2f}",
        usd(x.usd_ondemand),
        spot,
        x.source,
        x.assumptions,
        _range(x),
    ]


def headline(p: Plan) -> str:
    """Cheapest, fastest and cheapest spot, each saying EXTRAPOLATED where it is; spot
    prices the catalog calls artefacts are left out (they are flagged on their rows)."""

    def name(x: Prediction) -> str:
        return f"{x.nodes} x {x.target} {x.hardware}" + (
            f" (EXTRAPOLATED: {x.cpus} CPUs, {_measured(x)})" if x.extrapolated else ""
        )

    def cost(x: Prediction) -> str:
        return f"{usd(x.usd_ondemand)} $ {'on-prem' if x.onprem else 'on-demand'}"

    cheap = min(p.predictions, key=lambda x: x.usd_ondemand)
    fast = min(p.predictions, key=lambda x: x.hours)
    line = (
        f"cheapest: {name(cheap)} {cost(cheap)} in {cheap.hours:,.1f} h; "
        f"fastest: {name(fast)} {fast.hours:,.1f} h for {cost(fast)}"
    )
    spots = [x for x in p.predictions if x.usd_spot is not None and not x.spot_is_artefact]
    if spots:
        s = min(spots, key=lambda x: x.usd_spot or 0.0)
        line += f"; cheapest spot: {name(s)} {usd(s.usd_spot)} $"
    if any(x.spot_is_artefact for x in p.predictions):
        line += " (spot prices marked artefact left out)"
    return line


def notes(onprem: OnPremCost) -> list[str]:
    return [
        f"on-prem: {onprem.formula()}",
        f"{UNIT}. model CPUs = the CPUs the scaling model is evaluated at (an instance type "
        "never measured: its vCPUs).",
        "EXTRAPOLATED = outside the CPU counts measured for its source. assumptions = the "
        "catalog's relative_speed (per-vCPU speed against a CPU of the basis; if the basis "
        "counts whole cores, e.g. SMT off, set it below 1 for hyperthread vCPUs).",
        "on-demand/on-prem $ = the on-demand price for cloud rows, the [cost.onprem] model "
        "for local/slurm/ssh rows.",
        "Spot prices marked (artefact) are a catalog artefact (the shipped Azure spot column "
        "is 11 % of on-demand), not market prices, and are left out of the headline.",
        "Steady state only: add start-up (see all_joined_s).",
    ]
