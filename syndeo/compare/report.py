"""Measured runs -> per-env rows priced per target, a rich table, Markdown and HTML pages.

Runs of the same configuration (env, mode, protocol, target, hardware, pricing,
nodes x CPUs) pool their repeats, as the benchmark report does.  The HTML page is the
Markdown page rendered by markdown-it with every PNG embedded as a data URI, so it is
one self-contained file.
"""

from __future__ import annotations

import base64
import math
import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import jinja2
from rich.table import Table

from syndeo.compare.catalog import CATALOG_VERSION, Catalog
from syndeo.compare.costmodel import Pricing, pricing, run_cost_usd, usd_per_million
from syndeo.compare.errors import CompareError
from syndeo.compare.runs import CLOUD_TARGETS, Found, Run
from syndeo.compare.settings import OnPremCost

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


def _measured_seconds(run: Run) -> float:
    return sum(x.seconds for r in run.result.results for x in r.syndeo.repeats)


def build_rows(runs: list[Run], catalog: Catalog, onprem: OnPremCost) -> list[Row]:
    rows: dict[tuple[object, ...], Row] = {}
    for run in runs:
        price = pricing(run, catalog, onprem)
        cost = run_cost_usd(run, price)
        total_s = _measured_seconds(run)  # > 0: every repeat's seconds are checked when read
        for r in run.result.results:
            key = (r.env_id, r.mode, run.result.config.protocol, run.target, run.hardware,
                   price.kind, price.region, run.nodes, run.cpus_per_node,
                   run.charged_cpus)  # fmt: skip
            if key not in rows:
                rows[key] = Row(r.env_id, r.mode, run.result.config.protocol, run.target,
                                run.hardware, run.nodes, run.cpus_per_node, price,
                                run.charged_cpus // run.nodes)  # fmt: skip
            row = rows[key]
            row.partial = row.partial or run.partial
            row.rates += [x.steps_per_s for x in r.syndeo.repeats]
            row.samples += sum(x.samples for x in r.syndeo.repeats)
            # The run's overhead (start-up, baselines, teardown) is shared out by each
            # env's share of the measured seconds.
            share = sum(x.seconds for x in r.syndeo.repeats) / total_s
            row.allin_usd = None if cost is None or row.allin_usd is None else (
                row.allin_usd + cost * share
            )  # fmt: skip
            if run.cluster_id not in row.runs:
                row.runs.append(run.cluster_id)
    out = list(rows.values())
    by_series: dict[tuple[str, ...], list[Row]] = defaultdict(list)
    for row in out:
        by_series[row.series].append(row)
    for series in by_series.values():
        base = min(series, key=lambda r: r.cpus)
        for row in series:
            row.efficiency = 100.0 * row.per_cpu / base.per_cpu
    return sorted(out, key=lambda r: (r.env, r.mode, r.protocol, r.usd_per_m))


def groups(rows: list[Row]) -> dict[tuple[str, str, str], list[Row]]:
    """Rows per (env, mode, protocol), each sorted by $/M steps."""
    out: dict[tuple[str, str, str], list[Row]] = defaultdict(list)
    for r in rows:
        out[(r.env, r.mode, r.protocol)].append(r)
    return dict(sorted(out.items()))


def _fmt(v: float | None, spec: str) -> str:
    return "–" if v is None else format(v, spec)


def usd(v: float | None) -> str:
    """Dollars to 3 significant digits (at least cents): on-prem CartPole costs 0.0000937 $/M."""
    if v is None:
        return "–"
    if v <= 0:
        return f"{v:.2f}"
    return f"{v:,.{max(2, 2 - math.floor(math.log10(v)))}f}"


def terminal_tables(rows: list[Row]) -> list[Table]:
    tables = []
    for (env, mode, protocol), rs in groups(rows).items():
        t = Table(title=f"{env} — {mode}, {protocol} protocol (cheapest first)")
        cols = ("target", "hardware", "pricing", "nodes×CPUs", "steps/s ± std", "per CPU",
                "eff. %", "cluster $/h", "$/M steps", "all-in $/M", "h to 1 B")  # fmt: skip
        for c in cols:
            t.add_column(c, justify="left" if c in ("target", "hardware", "pricing") else "right")
        for r in rs:
            t.add_row(
                r.target, r.hardware, r.price.kind, f"{r.nodes}×{r.cpus_per_node}",
                f"{r.mean:,.0f} ± {r.std:,.0f}", f"{r.per_cpu:,.0f}", f"{r.efficiency:.0f}",
                usd(r.price.usd_per_h), usd(r.usd_per_m), usd(r.allin_usd_per_m),
                f"{r.hours_to_billion:,.1f}",
            )  # fmt: skip
        tables.append(t)
    return tables


def _jinja() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("syndeo.compare", "templates"),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,  # Markdown; the HTML page escapes through markdown-it
    )
    env.filters["num"] = lambda v, fmt=",.0f": _fmt(v, fmt)
    env.filters["usd"] = usd
    return env


def render_compare(
    found: Found, catalog: Catalog, onprem: OnPremCost, out_dir: Path
) -> tuple[Path, Path, list[Row]]:
    """Write ``report.md``, ``report.html`` and the PNGs into ``out_dir``."""
    from markdown_it import MarkdownIt  # a dependency of rich

    try:
        from syndeo.compare import plots
    except ImportError as e:
        raise CompareError(
            f"the report needs matplotlib ({e}): pip install 'syndeo[bench]'"
        ) from None

    rows = build_rows(found.runs, catalog, onprem)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    figures = plots.render_all(rows, out_dir)
    used = sorted(
        {(m.provider, itype, m.region or "") for run in found.runs
         if (m := run.machines) is not None and run.target in CLOUD_TARGETS
         for itype, _ in m.billed()}
    )  # fmt: skip
    context = {
        "groups": groups(rows),
        "runs": found.runs,
        "skipped": found.skipped,
        "catalog_version": CATALOG_VERSION,
        "catalog_files": catalog.files,
        "onprem": onprem,
        "cloud_prices": [catalog.price(*k) for k in used],
        "figures": figures,
    }
    page = _jinja().get_template("compare.md.j2")
    md = out_dir / "report.md"
    md.write_text(page.render(image=lambda name: name, **context))

    def embed(name: str) -> str:
        data = base64.b64encode((out_dir / name).read_bytes()).decode()
        return f"data:image/png;base64,{data}"

    body = (
        MarkdownIt("commonmark", {"html": False})
        .enable("table")
        .render(page.render(image=embed, **context))
    )
    html = out_dir / "report.html"
    html.write_text(_jinja().get_template("compare.html.j2").render(body=body))
    return md, html, rows
