"""Measured runs -> per-env rows priced per target, a rich table, Markdown and HTML pages.

Runs of the same configuration (env, mode, protocol, target, hardware, pricing,
nodes x CPUs) pool their repeats, as the benchmark report does.  The HTML page is the
Markdown page rendered by markdown-it with every PNG embedded as a data URI, so it is
one self-contained file.

Rows are sorted by steady-state $/M steps, and every table says so; the all-in order can
be the reverse for short runs, so each env also gets one line naming the cheapest of
both.  Text that came from a file (env ids, CPU models, cluster ids, paths, catalog
sources) is escaped wherever it is shown: as rich markup on the terminal, as Markdown in
report.md (so a ``|`` cannot add a table cell and ``[a](http://x)`` stays text in
report.html).
"""

from __future__ import annotations

import base64
import math
import re
from collections import defaultdict
from pathlib import Path

import jinja2
from rich.markup import escape
from rich.table import Table

from syndeo.compare.catalog import CATALOG_VERSION, Catalog
from syndeo.compare.costmodel import pricing, run_cost_usd
from syndeo.compare.errors import CompareError
from syndeo.compare.rows import Row, groups
from syndeo.compare.runs import CLOUD_TARGETS, Found, Run
from syndeo.compare.settings import OnPremCost

BILLION = 1e9


def _measured_seconds(run: Run) -> float:
    return sum(x.seconds for r in run.result.results for x in r.syndeo.repeats)


def build_rows(runs: list[Run], catalog: Catalog, onprem: OnPremCost) -> list[Row]:
    rows: dict[tuple[object, ...], Row] = {}
    for run in runs:
        price = pricing(run, catalog, onprem)
        cost = run_cost_usd(run, price)
        total_s = _measured_seconds(run)  # > 0: every repeat's seconds are checked when read
        for r in run.result.results:
            key = (
                r.env_id,
                r.mode,
                run.result.config.protocol,
                run.target,
                run.hardware,
                price.kind,
                price.region,
                run.nodes,
                run.cpus_per_node,
                run.charged_cpus,
            )
            if key not in rows:
                rows[key] = Row(
                    r.env_id,
                    r.mode,
                    run.result.config.protocol,
                    run.target,
                    run.hardware,
                    run.nodes,
                    run.cpus_per_node,
                    price,
                    run.charged_cpus // run.nodes,
                )
            row = rows[key]
            row.partial = row.partial or run.partial
            row.emulated = row.emulated or run.emulated
            row.rates += [x.steps_per_s for x in r.syndeo.repeats]
            row.samples += sum(x.samples for x in r.syndeo.repeats)
            # The run's overhead (start-up, baselines, teardown) is shared out by each
            # env's share of the measured seconds.
            share = sum(x.seconds for x in r.syndeo.repeats) / total_s
            row.allin_usd = (
                None if cost is None or row.allin_usd is None else (row.allin_usd + cost * share)
            )
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


ORDER = "cheapest steady-state $/M steps first"
UNIT = (
    "CPU = one CPU as Ray counts it: a vCPU on a cloud instance, a logical CPU (hardware "
    "thread) on your own machines; every CPU count, per-CPU figure, efficiency and fit "
    "uses this one unit"
)


def _name(r: Row) -> str:
    return f"{r.nodes} x {r.target} {r.hardware} ({r.price.kind})" + (
        " PARTIAL" if r.partial else ""
    )


def cheapest(rows: list[Row]) -> str:
    """One line: cheapest per step in the steady state, and all-in for runs this long.

    The table is sorted by the first; for short runs start-up dominates and the second
    can name the opposite end of the table.
    """
    steady = min(rows, key=lambda r: r.usd_per_m)
    line = f"cheapest for this workload: {_name(steady)} at {usd(steady.usd_per_m)} $/M steps "
    line += "(steady state: long runs)"
    known = [r for r in rows if r.allin_usd_per_m is not None]
    if not known:
        return line + "; all-in unknown (no run recorded its duration)"
    allin = min(known, key=lambda r: r.allin_usd_per_m or 0.0)
    return line + (
        f", {_name(allin)} at {usd(allin.allin_usd_per_m)} $/M steps "
        "(all-in: for a run as long as the ones measured)"
    )


def _fmt(v: float | None, spec: str) -> str:
    return "–" if v is None else format(v, spec)


def usd(v: float | None) -> str:
    """Dollars to 3 significant digits (at least cents): on-prem CartPole costs 0.0000937 $/M."""
    if v is None:
        return "–"
    if v <= 0 or not math.isfinite(v):
        return f"{v:.2f}"
    return f"{v:,.{max(2, 2 - math.floor(math.log10(v)))}f}"


# Characters that open a Markdown construct inline (links, images, emphasis, code, HTML,
# entities, table cells; # ends a heading).  A backslash makes each literal (CommonMark).
_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>|!~&#])")


def md_text(value: object) -> str:
    """File-provided text as literal Markdown, safe in a table cell, heading or list item."""
    one_line = " ".join(str(value).split())  # a newline would end the table row
    return _MD_SPECIAL.sub(r"\\\1", one_line)


def terminal_tables(rows: list[Row]) -> list[Table | str]:
    """Per env: its table, then the line naming the cheapest (plain text: escape it)."""
    out: list[Table | str] = []
    for (env, mode, protocol), rs in groups(rows).items():
        t = Table(title=escape(f"{env} — {mode}, {protocol} protocol ({ORDER})"))
        cols = [
            "target",
            "hardware",
            "pricing",
            "nodes×CPUs",
            "steps/s ± std",
            "per CPU",
            "eff. %",
            "cluster $/h",
            "$/M steps",
            "all-in $/M",
            "h to 1 B",
        ]
        flagged = any(r.flags for r in rs)
        if flagged:
            cols.append("flags")
        for c in cols:
            t.add_column(c, justify="left" if c in ("target", "hardware", "pricing") else "right")
        for r in rs:
            cells = [
                r.target,
                escape(r.hardware),
                r.price.kind,
                f"{r.nodes}×{r.cpus_per_node}",
                f"{r.mean:,.0f} ± {r.std:,.0f}",
                f"{r.per_cpu:,.0f}",
                f"{r.efficiency:.0f}",
                usd(r.price.usd_per_h),
                usd(r.usd_per_m),
                usd(r.allin_usd_per_m),
                f"{r.hours_to_billion:,.1f}",
            ]
            t.add_row(*cells, *([r.flags] if flagged else []))
        out += [t, cheapest(rs)]
    return out


def jinja_env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("syndeo.compare", "templates"),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,  # Markdown; the HTML page escapes through markdown-it
    )
    env.filters["num"] = lambda v, fmt=",.0f": _fmt(v, fmt)
    env.filters["usd"] = usd
    env.filters["md"] = md_text
    return env


def write_pages(out_dir: Path, stem: str, template: str, **context: object) -> tuple[Path, Path]:
    """``<stem>.md`` and a self-contained ``<stem>.html`` from one Markdown template.

    ``image(name)`` in the template is the PNG's file name in the Markdown page and a
    data URI in the HTML page.  The HTML is markdown-it's rendering with
    raw HTML off: nothing from a file reaches it unescaped.
    """
    from markdown_it import MarkdownIt  # a dependency of rich

    page = jinja_env().get_template(template)
    md = out_dir / f"{stem}.md"
    md.write_text(page.render(image=lambda name: name, **context))

    def data_uri(name: str) -> str:
        data = base64.b64encode((out_dir / name).read_bytes()).decode()
        return f"data:image/png;base64,{data}"

    body = (
        MarkdownIt("commonmark", {"html": False})
        .enable("table")
        .render(page.render(image=data_uri, **context))
    )
    html = out_dir / f"{stem}.html"
    html.write_text(jinja_env().get_template("compare.html.j2").render(body=body))
    return md, html


def render_compare(
    found: Found, catalog: Catalog, onprem: OnPremCost, out_dir: Path
) -> tuple[Path, Path, list[Row]]:
    """Write ``report.md``, ``report.html`` and the PNGs into ``out_dir``."""
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
        {
            (m.provider, itype, m.region or "")
            for run in found.runs
            if (m := run.machines) is not None and run.target in CLOUD_TARGETS
            for itype, _ in m.billed()
        }
    )
    md, html = write_pages(
        out_dir,
        "report",
        "compare.md.j2",
        groups=groups(rows),
        cheapest=cheapest,
        order=ORDER,
        unit=UNIT,
        runs=found.runs,
        skipped=found.skipped,
        catalog_version=CATALOG_VERSION,
        catalog_files=catalog.files,
        onprem=onprem,
        cloud_prices=[catalog.price(*k) for k in used],
        figures=figures,
    )
    return md, html, rows
