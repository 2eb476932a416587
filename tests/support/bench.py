"""What a benchmark result file must say, whoever ran it (deploy, `invoke bench`), and
running a ``python -m benchmarks.X`` as its docs show it."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

from syndeo.bench.models import BenchResult


def assert_bench_result(
    path: Path, *, env: str, samples_per_cpu: int, repeats: int, cpus: int | None = None
) -> BenchResult:
    """The result at ``path`` is complete, ran on every CPU of its cluster (``cpus`` if
    given), counted exactly ``samples_per_cpu`` x CPUs samples in each of the ``repeats``
    asked for, and measured a positive rate each time."""
    result = BenchResult.model_validate_json(path.read_text())
    assert not result.partial, "the run did not finish"
    assert (result.config.samples_per_cpu, result.config.repeats) == (samples_per_cpu, repeats)
    cluster = result.manifest.cluster_cpus
    if cpus is not None:
        assert cluster == cpus, f"the benchmark saw {cluster} CPUs, the cluster has {cpus}"
    assert [r.env_id for r in result.results] == [env]
    (res,) = result.results
    assert res.workers == cluster  # one actor per CPU (no --workers given)
    assert res.samples_requested == res.samples_counted == samples_per_cpu * cluster
    assert len(res.syndeo.repeats) == repeats
    for rep in res.syndeo.repeats:
        assert rep.samples == res.samples_counted and rep.seconds > 0
        assert math.isclose(rep.steps_per_s, rep.samples / rep.seconds, rel_tol=1e-6)
    rates = [r.steps_per_s for r in res.syndeo.repeats]
    assert res.syndeo.mean > 0 and math.isclose(res.syndeo.mean, sum(rates) / len(rates))
    return result


def run_benchmark(module: str, out: Path, *extra: str) -> dict[str, Any]:
    """``python -m benchmarks.MODULE EXTRA --out OUT`` from the checkout, to its end: its
    JSON, the same on stdout and in OUT."""
    from tests.support.helpers import ROOT

    proc = subprocess.run(
        [sys.executable, "-m", f"benchmarks.{module}", *extra, "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    got: dict[str, Any] = json.loads(out.read_text())
    assert json.loads(proc.stdout) == got
    return got
