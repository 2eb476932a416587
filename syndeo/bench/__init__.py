"""Rollout-throughput benchmark: the paper's 14 envs on Ray actors, with baselines.

Library entry points (imported lazily so ``import syndeo.bench`` does not load Ray)::

    run_benchmark(BenchConfig(...)) -> BenchResult      # syndeo.bench.runner
    measure_local_limit(env_id, workers, ...) -> Series # syndeo.bench.local_limit
    render_report(results_dir, out_dir) -> Path         # syndeo.bench.report
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from syndeo.bench.errors import BenchError
from syndeo.bench.models import BenchConfig, BenchResult, EnvResult

if TYPE_CHECKING:
    from syndeo.bench.local_limit import measure_local_limit
    from syndeo.bench.report import render_report
    from syndeo.bench.runner import run_benchmark

__all__ = [
    "BenchConfig",
    "BenchError",
    "BenchResult",
    "EnvResult",
    "measure_local_limit",
    "render_report",
    "run_benchmark",
]


def __getattr__(name: str) -> Any:
    if name == "run_benchmark":
        from syndeo.bench.runner import run_benchmark

        return run_benchmark
    if name == "measure_local_limit":
        from syndeo.bench.local_limit import measure_local_limit

        return measure_local_limit
    if name == "render_report":
        from syndeo.bench.report import render_report

        return render_report
    raise AttributeError(name)
