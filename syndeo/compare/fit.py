"""A scaling model fitted to a measured sweep: throughput(n CPUs) = a * n^b.

A power law because it needs only two sizes, is linear in log-log space (an ordinary
least-squares fit) and says in one number how far from linear the target scales
(b = 1 is ideal).  Noise can make a sweep look superlinear; b is capped at 1 so no
prediction promises more than linear scaling.  With one measured size there is no
fit: linear scaling is assumed, and said so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Fit:
    a: float
    b: float
    points: tuple[tuple[int, float], ...]  # (CPUs, mean steps/s) measured
    capped: bool = False

    @property
    def lo(self) -> int:
        return min(n for n, _ in self.points)

    @property
    def hi(self) -> int:
        return max(n for n, _ in self.points)

    def predict(self, cpus: float) -> float:
        return float(self.a * cpus**self.b)

    def extrapolates(self, cpus: float) -> bool:
        return not (self.lo <= cpus <= self.hi)

    @property
    def max_rel_residual(self) -> float:
        return max(abs(self.predict(n) / t - 1.0) for n, t in self.points)

    @property
    def r2(self) -> float | None:
        """R² in log-log space; None with fewer than three sizes (a line fits two exactly)."""
        if len(self.points) < 3:
            return None
        ys = [math.log(t) for _, t in self.points]
        mean = sum(ys) / len(ys)
        ss_tot = sum((y - mean) ** 2 for y in ys)
        ss_res = sum((math.log(t) - math.log(self.predict(n))) ** 2 for n, t in self.points)
        return 1.0 - ss_res / ss_tot if ss_tot > 0 else 1.0

    def quality(self) -> str:
        sizes = ", ".join(str(n) for n, _ in self.points)
        if len(self.points) == 1:
            return f"one size measured ({sizes} CPUs): linear scaling assumed, not fitted"
        r2 = self.r2
        return (
            f"steps/s = {self.a:,.0f} x CPUs^{self.b:.3f}"
            + (" (capped at linear)" if self.capped else "")
            + f" over {len(self.points)} sizes ({sizes} CPUs); "
            + (f"R² {r2:.3f}, " if r2 is not None else "2 sizes: exact through both, ")
            + f"max |residual| {100 * self.max_rel_residual:.1f} %"
        )


def fit_power_law(points: list[tuple[int, float]]) -> Fit:
    """Least squares of log(steps/s) on log(CPUs); one point per size."""
    pts = tuple(sorted(points))
    if len({n for n, _ in pts}) != len(pts) or not pts:
        raise ValueError("one point per size, at least one")
    if len(pts) == 1:
        n, t = pts[0]
        return Fit(t / n, 1.0, pts)
    x = np.log([float(n) for n, _ in pts])
    y = np.log([t for _, t in pts])
    b, log_a = np.polyfit(x, y, 1)
    if b > 1.0:
        # Fixed slope 1: the least-squares intercept is the mean of log(t / n).
        return Fit(float(np.exp(np.mean(y - x))), 1.0, pts, capped=True)
    return Fit(float(np.exp(log_a)), float(b), pts)
