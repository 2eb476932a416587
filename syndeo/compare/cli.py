"""``compare``: shared by ``syndeo compare`` and ``invoke compare``.

syndeo compare [--results results] [--catalog my.csv] [--out compare-report] [--config F]
syndeo compare --plan --steps 1e9 --env Humanoid-v5 [--target aws,local] [--basis local]
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from syndeo.compare.catalog import load_catalog
from syndeo.compare.errors import CompareError
from syndeo.compare.settings import OnPremCost


def _onprem(config: str | Path | None) -> OnPremCost:
    if config is None:
        return OnPremCost()
    from syndeo.config import load_config

    return load_config(Path(config)).cost.onprem


def _sizes(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(x) for x in text.split(","))
    except ValueError:
        sizes = ()
    if not sizes or min(sizes) < 1:
        raise CompareError(f"--sizes: give node counts like 1,2,4,8, not {text!r}")
    return sizes


def _steps(text: str | float) -> float:
    try:
        return float(text)
    except ValueError:
        raise CompareError(f"--steps: give a number like 1e9, not {text!r}") from None


def plan_table(p: Any) -> Table:
    from syndeo.compare.report import usd

    t = Table(
        title=f"Plan: {p.steps:,.0f} steps of {p.env} ({p.mode}, {p.protocol} measurements), "
        "cheapest on-demand first",
    )
    for c in ("target", "hardware", "region", "nodes", "model CPUs", "steps/s", "wall h",
              "on-demand $", "spot $", "source", "assumptions", "range"):  # fmt: skip
        t.add_column(c, justify="left" if c in ("target", "hardware", "source") else "right")
    for x in p.predictions:
        t.add_row(
            x.target, x.hardware, x.region, str(x.nodes), f"{x.cpus:g}", f"{x.steps_per_s:,.0f}",
            f"{x.hours:,.2f}", usd(x.usd_ondemand), usd(x.usd_spot), x.source, x.assumptions,
            "EXTRAPOLATED" if x.extrapolated else "measured range",
        )  # fmt: skip
    return t


def _headline(p: Any) -> str:
    from syndeo.compare.report import usd

    def name(x: Any) -> str:
        return f"{x.nodes} x {x.target} {x.hardware}"

    cheap = min(p.predictions, key=lambda x: x.usd_ondemand)
    fast = min(p.predictions, key=lambda x: x.hours)
    spots = [x for x in p.predictions if x.usd_spot is not None]
    line = (
        f"cheapest: {name(cheap)} {usd(cheap.usd_ondemand)} $ in {cheap.hours:,.1f} h; "
        f"fastest: {name(fast)} {fast.hours:,.1f} h for {usd(fast.usd_ondemand)} $"
    )
    if spots:
        s = min(spots, key=lambda x: x.usd_spot or 0.0)
        line += f"; cheapest spot: {name(s)} {usd(s.usd_spot)} $"
    return line


def run_compare(
    results: str | Path = "results",
    catalog: str | Path | None = None,
    out: str | Path = "compare-report",
    config: str | Path | None = None,
    plan: bool = False,
    steps: str | float = 1e9,
    env: str | None = None,
    mode: str | None = None,
    target: str | None = None,
    basis: str | None = None,
    sizes: str = "1,2,4,8,16",
    console: Console | None = None,
) -> None:
    from syndeo.compare.report import build_rows, render_compare, terminal_tables
    from syndeo.compare.runs import find_runs

    console = console or Console(highlight=False)
    if not console.is_terminal:
        console.width = 200  # piped or captured: don't squeeze the wide tables to 80 columns
    onprem = _onprem(config)
    cat = load_catalog(Path(catalog) if catalog else None)
    if plan:
        from syndeo.compare.plan import make_plan

        if not env:
            raise CompareError("--plan needs --env, e.g. --env Humanoid-v5")
        n_steps, size_list = _steps(steps), _sizes(sizes)
        rows = build_rows(find_runs(Path(results)).runs, cat, onprem)
        targets = [t for t in target.split(",") if t] if target else None
        p = make_plan(rows, cat, onprem, env, n_steps, mode, targets, basis, size_list)
        console.print(f"basis for unmeasured instance types: {p.basis.name}")
        for ser in p.series:
            console.print(f"fit {ser.name}: {ser.fit.quality()}")
        console.print(plan_table(p))
        console.print(_headline(p))
        console.print(
            f"on-prem: {onprem.formula()}\n"
            "model CPUs = CPUs as Ray counts them (vCPUs on a cloud, logical CPUs on your own "
            "machines) the scaling model is evaluated at (unmeasured hardware: its vCPUs). "
            "EXTRAPOLATED = outside the CPU counts measured for its source; assumptions = the "
            "catalog's relative_speed (per-vCPU speed against a CPU of the basis). Azure spot "
            "prices in the shipped catalog are an artefact (11 % of on-demand), not market prices."
            " Steady state only: add start-up (see all_joined_s)."
        )
        return
    found = find_runs(Path(results))
    md, html, rows = render_compare(found, cat, onprem, Path(out))
    for t in terminal_tables(rows):
        console.print(t)
    for s in found.skipped:
        console.print(f"not compared: {s}")
    console.print(f"report: {md} and {html}")


def add_command(sub: Any) -> None:
    p = sub.add_parser("compare", help="cost/throughput of every measured run; --plan for N steps")
    p.add_argument("--results", default="results", help="directory of deploy.json/result.json")
    p.add_argument("--catalog", default=None, help="price CSV overriding/extending the shipped one")
    p.add_argument("--out", default="compare-report", help="where report.md/.html and PNGs go")
    p.add_argument("--config", default=None, help="TOML with [cost.onprem] settings")
    p.add_argument("--plan", action="store_true", help="predict cost and time for --steps")
    p.add_argument("--steps", default="1e9", help="steps to plan for (default 1e9)")
    p.add_argument("--env", default=None, help="env id to plan for, e.g. Humanoid-v5")
    p.add_argument("--mode", default=None, help="count | collect (default: count if measured)")
    p.add_argument("--target", default=None, help="targets to plan for, comma-separated")
    p.add_argument("--basis", default=None, help="measured target unmeasured types scale from")
    p.add_argument("--sizes", default="1,2,4,8,16", help="node/instance counts to plan")
    p.set_defaults(func=_call)


def _call(args: argparse.Namespace) -> int:
    options = {k: v for k, v in vars(args).items() if k not in ("func", "command")}
    run_compare(**options)
    return 0  # failures raise SyndeoError, which the CLI turns into its exit code
