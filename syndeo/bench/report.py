"""A directory of result JSONs -> paper-style tables, PNG plots and one Markdown page.

Results from several runs (different cluster sizes, targets, days) are pooled by
(env id, mode, actor count, protocol): repeats are concatenated, so a sweep can be
assembled from separate runs.  Speedup and efficiency follow the paper: the ideal
is the smallest measured size extrapolated linearly.
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

import jinja2
from pydantic import ValidationError
from rich.table import Table
from rich.text import Text

from syndeo.bench import paper
from syndeo.bench.errors import BenchError
from syndeo.bench.models import BenchResult
from syndeo.bench.points import Point
from syndeo.core.mdtext import md_text


def load_results(results_dir: Path) -> list[tuple[Path, BenchResult]]:
    """Every benchmark result below ``results_dir`` (deploy writes ``<cluster-id>/result.json``).

    JSON files that are not benchmark results (deploy.json, a user's own workload's
    result) are skipped; a file that claims to be one but does not validate is an error.
    """
    files = sorted(results_dir.rglob("*.json")) if results_dir.is_dir() else []
    out = []
    unreadable: list[str] = []
    for f in files:
        try:
            doc = json.loads(f.read_text())
        except OSError as e:
            unreadable.append(f"{f} ({e.strerror})")
            continue
        except ValueError:
            unreadable.append(f"{f} (not JSON)")
            continue
        if not (isinstance(doc, dict) and "manifest" in doc and "results" in doc):
            continue
        try:
            out.append((f, BenchResult.model_validate(doc)))
        except ValidationError as e:
            raise BenchError(f"{f} is not a valid benchmark result: {_first_error(e)}") from None
    skipped = f"; unreadable, skipped: {', '.join(unreadable)}" if unreadable else ""
    if not out:
        raise BenchError(f"no benchmark result JSON files in {results_dir}{skipped}")
    if unreadable:
        # Never silently: a result the report leaves out must be named.
        print(f"report: unreadable, skipped: {', '.join(unreadable)}", file=sys.stderr)
    for f, res in out:
        if res.partial:
            print(f"report: {f} is partial (an unfinished or interrupted run)", file=sys.stderr)
    return out


def _first_error(e: ValidationError) -> str:
    err = e.errors()[0]
    return f"{'.'.join(str(x) for x in err['loc'])}: {err['msg']}"


def pool(results: list[tuple[Path, BenchResult]]) -> list[Point]:
    points: dict[tuple[str, str, int, str], Point] = {}
    for _, res in results:
        for r in res.results:
            key = (r.env_id, r.mode, r.workers, res.config.protocol)
            p = points.setdefault(
                key, Point(r.env_id, r.env_name, r.mode, res.config.protocol, r.workers)
            )
            p.rates += [x.steps_per_s for x in r.syndeo.repeats]
            if r.local_limit:
                p.local += [x.steps_per_s for x in r.local_limit.repeats]
            if r.rllib:
                p.rllib += [x.steps_per_s for x in r.rllib.repeats]
            if r.ratio_local_limit is not None:
                p.ratios_local.append(r.ratio_local_limit)
            if r.ratio_rllib is not None:
                p.ratios_rllib.append(r.ratio_rllib)
            p.peak_rss += r.peak_rss_per_actor_bytes
            if r.steps_per_cpu_second is not None:
                p.per_cpu_second.append(r.steps_per_cpu_second)
    return sorted(points.values(), key=lambda p: (p.env_name, p.protocol, p.mode, p.workers))


def scaling_rows(points: list[Point]) -> list[dict[str, object]]:
    """Tables I-IV: throughput, speedup and efficiency per size vs the smallest size."""
    series: dict[tuple[str, str, str], list[Point]] = defaultdict(list)
    for p in points:
        series[(p.env_id, p.protocol, p.mode)].append(p)
    rows: list[dict[str, object]] = []
    for (env_id, protocol, mode), ps in sorted(series.items()):
        base = min(ps, key=lambda p: p.workers)
        for p in sorted(ps, key=lambda p: p.workers):
            ideal = p.workers / base.workers
            speedup = p.mean / base.mean
            rows.append(
                {
                    "env": env_id,
                    "protocol": protocol,
                    "mode": mode,
                    "cpus": p.workers,
                    "mean": p.mean,
                    "std": p.std,
                    "n": len(p.rates),
                    "ideal": ideal,
                    "speedup": speedup,
                    # The paper caps efficiency at 100 % when noise puts it above.
                    "efficiency": min(100.0, 100.0 * speedup / ideal),
                }
            )
    return rows


def paper_rows(points: list[Point]) -> list[dict[str, object]]:
    best = paper.best_per_cpu()
    rows: list[dict[str, object]] = []
    for p in points:
        if p.env_name not in best:
            continue
        ours = p.mean / p.workers
        cpu_s = statistics.median(p.per_cpu_second) if p.per_cpu_second else None
        rows.append(
            {
                "env": p.env_id,
                "protocol": p.protocol,
                "mode": p.mode,
                "cpus": p.workers,
                "ours_per_cpu": ours,
                "paper_per_cpu": best[p.env_name],
                "ratio": ours / best[p.env_name],
                "per_cpu_second": cpu_s,
                "ratio_cpu_second": None if cpu_s is None else cpu_s / best[p.env_name],
            }
        )
    return rows


def baseline_rows(points: list[Point]) -> list[dict[str, object]]:
    def med(xs: list[float]) -> float | None:
        return statistics.median(xs) if xs else None

    def mean(xs: list[float]) -> float | None:
        return statistics.fmean(xs) if xs else None

    return [
        {
            "env": p.env_id,
            "protocol": p.protocol,
            "mode": p.mode,
            "cpus": p.workers,
            "ours": p.mean,
            "local": mean(p.local),
            "ratio_local": med(p.ratios_local),
            "rllib": mean(p.rllib),
            "ratio_rllib": med(p.ratios_rllib),
            "peak_rss_mib": max(p.peak_rss) / 2**20 if p.peak_rss else None,
        }
        for p in points
        if p.local or p.rllib
    ]


def render_report(results_dir: Path, out_dir: Path) -> Path:
    """Write ``out_dir/report.md`` plus PNGs; returns the Markdown path."""
    from syndeo.bench import plots

    results = load_results(Path(results_dir))
    points = pool(results)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    figures = plots.render_all(points, out_dir)
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("syndeo.bench", "templates"),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,  # Markdown, not HTML: finalize escapes every value instead
        # Every {{ value }} as literal Markdown: results are files nodes wrote, and an
        # env id or CPU model must not become a link, an image or an extra cell.
        finalize=md_text,
    )
    env.filters["num"] = lambda v, fmt=",.0f": "–" if v is None else format(v, fmt)
    page = env.get_template("report.md.j2").render(
        runs=[(f.name, r) for f, r in results],
        scaling=scaling_rows(points),
        paper=paper_rows(points),
        baselines=baseline_rows(points),
        figures=figures,
    )
    md = out_dir / "report.md"
    md.write_text(page)
    return md


def result_table(doc: dict[str, object]) -> Table:
    """A rich table of one result document (for launchers printing a run's outcome).

    Raises ValueError (pydantic's ValidationError is one) if ``doc`` is not a result.
    """
    res = BenchResult.model_validate(doc)
    m = res.manifest
    # Every string of the document came from the cluster: Text, never rich markup.
    table = Table(
        title=Text(
            f"rollout throughput — {m.target}, {m.cluster_nodes} node(s), {m.cluster_cpus} CPUs"
        ),
    )
    for col in ("env", "mode", "CPUs", "steps/s", "± std", "/ local limit", "/ RLlib"):
        table.add_column(col, justify="left" if col in ("env", "mode") else "right")
    for r in res.results:
        table.add_row(
            Text(r.env_id),
            Text(r.mode),
            str(r.workers),
            f"{r.syndeo.mean:,.0f}",
            f"{r.syndeo.std:,.0f}",
            "–" if r.ratio_local_limit is None else f"{r.ratio_local_limit:.3f}",
            "–" if r.ratio_rllib is None else f"{r.ratio_rllib:.1f}×",
        )
    return table
