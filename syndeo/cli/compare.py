"""``compare``: shared by ``syndeo compare`` and ``invoke compare``.

syndeo compare [--results results] [--catalog my.csv] [--out compare-report] [--config F]
syndeo compare --plan --steps 1e9 --env Humanoid-v5 [--target aws,local] [--basis local]

Everything printed that came from a file (env ids, hardware names, paths) goes through
``rich.markup.escape``: a ``[link=…]`` in a name stays text, a ``[/]`` cannot fail.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from syndeo.compare.catalog import Catalog, load_catalog
from syndeo.compare.errors import CompareError
from syndeo.compare.settings import OnPremCost

if TYPE_CHECKING:
    from syndeo.compare.plan import Plan


def _onprem(config: str | Path | None) -> OnPremCost:
    if config is None:
        return OnPremCost()
    from syndeo.launcher.config import load_config

    return load_config(Path(config)).cost.onprem


MAX_NODES = 100_000  # far beyond any catalog's quota; larger counts overflow floats


def _sizes(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(x) for x in text.split(","))
    except ValueError:
        sizes = ()
    if not sizes or min(sizes) < 1 or max(sizes) > MAX_NODES:
        raise CompareError(
            f"--sizes: give node counts from 1 to {MAX_NODES:,} like 1,2,4,8, not {text!r}"
        )
    return sizes


def _steps(text: str | float) -> float:
    try:
        steps = float(text)
    except ValueError:
        steps = math.nan
    # 1e400 parses as inf; nan and inf would only fail later, as a traceback.
    if not (math.isfinite(steps) and steps > 0):
        raise CompareError(f"--steps: give a positive number like 1e9, not {text!r}")
    return steps


def _lines(console: Console) -> Callable[..., None]:
    """Print whole lines of text as text: escaped (names and paths come from files) and
    never wrapped (a piped or grepped answer stays on its line)."""

    def say(*lines: str) -> None:
        for line in lines:
            console.print(escape(line), soft_wrap=True)

    return say


def plan_table(p: Plan) -> Table:
    from syndeo.compare.plan import COLUMNS, cells, title

    t = Table(title=escape(title(p)))
    for c in COLUMNS:
        t.add_column(c, justify="left" if c in ("target", "hardware", "source") else "right")
    for x in p.predictions:
        t.add_row(*map(escape, cells(x)))
    return t


def _plan(
    results: Path,
    cat: Catalog,
    onprem: OnPremCost,
    out: Path,
    console: Console,
    env: str,
    steps: float,
    mode: str | None,
    targets: list[str] | None,
    basis: str | None,
    sizes: tuple[int, ...],
) -> None:
    from syndeo.compare.plan import COLUMNS, cells, headline, make_plan, notes, title
    from syndeo.compare.report import UNIT, build_rows, write_pages
    from syndeo.compare.runs import find_runs

    found = find_runs(results)
    for run in [r for r in found.runs if r.emulated]:
        # Its steps/s are the launcher machine's: no prediction for the type may rest on it.
        found.runs.remove(run)
        found.skipped.append(
            f"{run.cluster_id}: an emulated {run.target} run (API {run.machines.api_endpoint}"  # type: ignore[union-attr]
            "): its throughput is this machine's, not the instance type's"
        )
    rows = build_rows(found.runs, cat, onprem)
    p = make_plan(rows, cat, onprem, env, steps, mode, targets, basis, sizes)
    out.mkdir(parents=True, exist_ok=True)
    md, html = write_pages(
        out,
        "plan",
        "plan.md.j2",
        plan=p,
        plan_title=title(p),
        unit=UNIT,
        columns=COLUMNS,
        cells=cells,
        headline=headline(p),
        notes=notes(onprem),
        skipped=found.skipped,
    )
    say = _lines(console)
    say(f"basis for unmeasured instance types: {p.basis.name}")
    for ser in p.series:
        say(ser.describe())
    console.print(plan_table(p))
    say(headline(p), *notes(onprem), *(f"not compared: {s}" for s in found.skipped))
    say(f"plan report: {md} and {html}")


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
    from syndeo.compare.report import UNIT, render_compare, terminal_tables
    from syndeo.compare.runs import find_runs

    console = console or Console(highlight=False)
    if not console.is_terminal:
        console.width = 200  # piped or captured: don't squeeze the wide tables to 80 columns
    onprem = _onprem(config)
    cat = load_catalog(Path(catalog) if catalog else None)
    if plan:
        if not env:
            raise CompareError("--plan needs --env, e.g. --env Humanoid-v5")
        targets = [t for t in target.split(",") if t] if target else None
        _plan(
            Path(results),
            cat,
            onprem,
            Path(out),
            console,
            env,
            _steps(steps),
            mode,
            targets,
            basis,
            _sizes(sizes),
        )
        return
    found = find_runs(Path(results))
    md, html, rows = render_compare(found, cat, onprem, Path(out))
    say = _lines(console)
    for t in terminal_tables(rows):
        if isinstance(t, str):
            say(t)
        else:
            console.print(t)
    say(UNIT, *(f"not compared: {s}" for s in found.skipped), f"report: {md} and {html}")
