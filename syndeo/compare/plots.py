"""PNG figures of the comparison (matplotlib, headless Agg backend).

Each figure is drawn at a fixed size and DPI and saved without tight cropping, so its
pixel size is known before it is written; the report states it.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import matplotlib

matplotlib.use("Agg")  # no display on cluster nodes or in CI
import matplotlib.pyplot as plt
from matplotlib.ticker import NullFormatter

if TYPE_CHECKING:
    from syndeo.compare.rows import Row

DPI = 90


def _text(s: str) -> str:
    """Text from a file as matplotlib shows it literally: a pair of $ would start mathtext
    (and a malformed formula fails at draw time)."""
    return s.replace("$", r"\$")


@dataclass(frozen=True)
class Figure:
    title: str
    name: str  # PNG file name, relative to the report
    width: int  # pixels
    height: int
    caption: str


def _grid(n: int) -> tuple[Any, Any]:
    cols = min(3, n)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 4 * rows), dpi=DPI, squeeze=False)
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    return fig, axes


def _save(fig: Any, path: Path) -> tuple[int, int]:
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    width, height = fig.canvas.get_width_height()
    plt.close(fig)
    return int(width), int(height)


def _iso_cost(ax: Any, rows: list[Row]) -> None:
    """Lines of equal $/M steps: throughput = $/h / ($/M x 3600) x 1e6."""
    xs = [r.price.usd_per_h for r in rows]
    lo, hi = min(xs) / 3, max(xs) * 3
    costs = [r.usd_per_m for r in rows]
    for exp in range(math.floor(math.log10(min(costs))), math.ceil(math.log10(max(costs))) + 1):
        c = 10.0**exp
        ax.plot(
            [lo, hi],
            [lo / (c * 3600) * 1e6, hi / (c * 3600) * 1e6],
            ":",
            color="grey",
            linewidth=0.8,
        )
        ax.annotate(
            f"{c:g} $/M",
            (hi, hi / (c * 3600) * 1e6),
            fontsize=7,
            color="grey",
            ha="right",
            va="bottom",
        )


def cost_plot(groups: dict[tuple[str, str, str], list[Row]], path: Path) -> tuple[int, int]:
    fig, axes = _grid(len(groups))
    for ax, ((env, mode, protocol), rows) in zip(axes.flat, groups.items(), strict=False):
        for r in rows:
            ax.errorbar(
                r.price.usd_per_h,
                r.mean,
                yerr=2 * r.std,
                fmt="o",
                capsize=3,
                label=_text(f"{r.label} {r.price.kind}"),
            )
        _iso_cost(ax, rows)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.xaxis.set_minor_formatter(NullFormatter())  # minor labels collide on short ranges
        ax.set_xlabel("cluster $/hour")
        ax.set_ylabel("steps/s")
        ax.set_title(_text(f"{env} ({mode}, {protocol})"), fontsize=9)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=6)
    return _save(fig, path)


def usd_per_m_plot(groups: dict[tuple[str, str, str], list[Row]], path: Path) -> tuple[int, int]:
    fig, axes = _grid(len(groups))
    for ax, ((env, mode, protocol), rows) in zip(axes.flat, groups.items(), strict=False):
        labels = [_text(f"{r.label} {r.price.kind}") for r in rows]
        ax.barh(range(len(rows)), [r.usd_per_m for r in rows], label="steady state")
        allin = [r.allin_usd_per_m or 0.0 for r in rows]
        if any(allin):
            ax.scatter(allin, range(len(rows)), marker="|", s=200, color="k", label="all-in")
        ax.set_yticks(range(len(rows)))
        ax.set_yticklabels(labels, fontsize=7)
        ax.invert_yaxis()  # cheapest on top, like the table
        ax.set_xscale("log")  # start-up can make all-in 100x the steady-state figure
        ax.set_xlabel("$ per million steps")
        ax.set_title(_text(f"{env} ({mode}, {protocol})"), fontsize=9)
        ax.legend(fontsize=7)
    return _save(fig, path)


def speedup_plot(groups: dict[tuple[str, str, str], list[Row]], path: Path) -> tuple[int, int]:
    fig, axes = _grid(len(groups))
    for ax, ((env, mode, protocol), rows) in zip(axes.flat, groups.items(), strict=False):
        series: dict[tuple[str, ...], list[Row]] = defaultdict(list)
        for r in rows:
            series[r.series].append(r)
        top = 1
        for rs in series.values():
            rs = sorted(rs, key=lambda r: r.cpus)
            base = rs[0]
            xs = [r.cpus / base.cpus for r in rs]
            sp = [r.mean / base.mean for r in rs]
            band = [2 * r.std / base.mean for r in rs]
            ax.errorbar(
                xs,
                sp,
                yerr=band,
                fmt="o-",
                capsize=3,
                label=_text(f"{base.target} {base.hardware}"),
            )
            ax.fill_between(
                xs,
                [s - b for s, b in zip(sp, band, strict=True)],
                [s + b for s, b in zip(sp, band, strict=True)],
                alpha=0.2,
            )
            top = max(top, int(max(xs)))
        ax.plot([1, top], [1, top], "k--", label="ideal")
        ax.set_xlabel("CPUs / smallest size")
        ax.set_ylabel("speedup")
        ax.set_title(_text(f"{env} ({mode}, {protocol})"), fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6)
    return _save(fig, path)


PLOTS: list[tuple[str, str, Callable[..., tuple[int, int]], str]] = [
    (
        "Throughput against cluster $/hour",
        "cost.png",
        cost_plot,
        "Dotted lines: equal $ per million steps; further up-left is cheaper. Bars: ±2σ.",
    ),
    (
        "$ per million steps per target",
        "usd-per-m.png",
        usd_per_m_plot,
        "Bars: steady state; ticks: all-in (start-up, baselines and teardown included).",
    ),
    (
        "Speedup against ideal",
        "speedup.png",
        speedup_plot,
        "Per target and hardware, against its smallest measured size; bands: ±2σ.",
    ),
]


def render_all(rows: list[Row], out_dir: Path) -> list[Figure]:
    from syndeo.compare.rows import groups

    g = groups(rows)
    figures = []
    for title, name, draw, caption in PLOTS:
        width, height = draw(g, out_dir / name)
        figures.append(Figure(title, name, width, height, caption))
    return figures
