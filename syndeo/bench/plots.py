"""PNG figures for the report (matplotlib, headless Agg backend)."""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING

import matplotlib

matplotlib.use("Agg")  # no display on cluster nodes or in CI
import matplotlib.pyplot as plt

if TYPE_CHECKING:
    from syndeo.bench.points import Point


def _groups(points: list[Point]) -> dict[tuple[str, str], list[Point]]:
    groups: dict[tuple[str, str], list[Point]] = defaultdict(list)
    for p in points:
        groups[(p.protocol, p.mode)].append(p)
    return groups


def scaling_plot(points: list[Point], title: str, path: Path) -> None:
    """Like the paper's Fig. 4-5: measured mean, 2σ band and the ideal line per env."""
    by_env: dict[str, list[Point]] = defaultdict(list)
    for p in points:
        by_env[p.env_id].append(p)
    n = len(by_env)
    cols = min(4, n)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 3 * rows), squeeze=False)
    for ax, (env_id, ps) in zip(axes.flat, sorted(by_env.items()), strict=False):
        ps = sorted(ps, key=lambda p: p.workers)
        xs = [p.workers for p in ps]
        means = [p.mean for p in ps]
        stds = [p.std for p in ps]
        base = ps[0]
        ax.plot(xs, [base.mean * x / base.workers for x in xs], "k--", label="ideal")
        # Error bars as well as the band: a single size has no band to draw.
        ax.errorbar(xs, means, yerr=[2 * s for s in stds], fmt="o-", capsize=3, label="measured")
        ax.fill_between(
            xs,
            [m - 2 * s for m, s in zip(means, stds, strict=True)],
            [m + 2 * s for m, s in zip(means, stds, strict=True)],
            alpha=0.25,
            label="±2σ",
        )
        ax.set_title(env_id, fontsize=9)
        ax.set_xticks(xs)
        ax.set_xlabel("CPUs (actors)")
        ax.set_ylabel("steps/s")
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def bars_plot(points: list[Point], title: str, path: Path) -> None:
    """Per-env throughput at the largest size: syndeo vs local limit vs RLlib (log scale)."""
    largest: dict[str, Point] = {}
    for p in points:
        if p.env_id not in largest or p.workers > largest[p.env_id].workers:
            largest[p.env_id] = p
    envs = sorted(largest)
    series = {
        "syndeo": [largest[e].mean for e in envs],
        "local limit": [
            statistics.fmean(largest[e].local) if largest[e].local else 0.0 for e in envs
        ],
        "RLlib PPO": [
            statistics.fmean(largest[e].rllib) if largest[e].rllib else 0.0 for e in envs
        ],
    }
    series = {k: v for k, v in series.items() if any(v)}
    width = 0.8 / len(series)
    fig, ax = plt.subplots(figsize=(max(6.0, 0.8 * len(envs) + 2), 4))
    for i, (label, vals) in enumerate(series.items()):
        ax.bar([j + i * width for j in range(len(envs))], vals, width, label=label)
    ax.set_xticks([j + width * (len(series) - 1) / 2 for j in range(len(envs))])
    ax.set_xticklabels(envs, rotation=45, ha="right", fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("steps/s")
    ax.legend(fontsize=8)
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def render_all(points: list[Point], out_dir: Path) -> list[tuple[str, str]]:
    """All figures; returns (title, file name relative to out_dir)."""
    figures = []
    for (protocol, mode), ps in sorted(_groups(points).items()):
        name = f"scaling-{protocol}-{mode}.png"
        title = f"Throughput vs CPUs ({protocol} protocol, {mode} mode)"
        scaling_plot(ps, title, out_dir / name)
        figures.append((title, name))
        name = f"bars-{protocol}-{mode}.png"
        title = f"Per-env throughput at the largest size ({protocol}, {mode})"
        bars_plot(ps, title, out_dir / name)
        figures.append((title, name))
    return figures
