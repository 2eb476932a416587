"""Hand-worked figures where a slip would change them: the CPU unit of every basis.

Every figure below is worked out in the comment above its assertion.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from syndeo.compare.catalog import load_catalog
from syndeo.compare.plan import Prediction, make_plan
from syndeo.compare.report import build_rows
from syndeo.compare.runs import find_runs
from tests.compare.fixtures import (
    fixture_onprem,
    standard,
    write_run,
)

# ------------------------------------------------------------------ all-in cost


# ------------------------------------------------------------------ the fit


# ------------------------------------------------------------------ one CPU unit
def _by(predictions: list[Prediction]) -> dict[tuple[str, int], Prediction]:
    return {(p.hardware, p.nodes): p for p in predictions}


def test_default_basis_is_the_cloud_series_in_vcpus(tmp_path: Path) -> None:
    results, catalog, _ = standard(tmp_path)
    cat = load_catalog(catalog)
    rows = build_rows(find_runs(results).runs, cat, fixture_onprem())
    plan = make_plan(rows, cat, fixture_onprem(), "CartPole-v1", 1e9, targets=["aws"],
                     sizes=(1, 2))  # fmt: skip
    # The series with most CPUs: aws 2 x x1.fixture, 8 vCPUs at 4200 steps/s; one size,
    # so linear: 525 steps/s per vCPU.
    assert plan.basis.name == "aws x1.fixture"
    by = _by(plan.predictions)
    # 1 x x1.fixture measured (its own series): 4 vCPUs x 525 = 2100 steps/s
    x1 = by[("x1.fixture", 1)]
    assert (x1.cpus, x1.steps_per_s, x1.source) == (4, pytest.approx(2100), "measured")
    # c6i.xlarge (4 vCPUs, relative_speed 1) never ran: the same 4 CPUs, the same 2100.
    c6i = by[("c6i.xlarge", 1)]
    assert (c6i.cpus, c6i.steps_per_s) == (4, pytest.approx(2100))
    assert c6i.source == "predicted from aws x1.fixture"
    # y1.fixture: 8 vCPUs x 525 x relative_speed 1.5 = 6300 steps/s, at the measured 8
    y1 = by[("y1.fixture", 1)]
    assert (y1.cpus, y1.steps_per_s, y1.extrapolated) == (8, pytest.approx(6300), False)
    # Both 4-vCPU machines are outside the measured 8 CPUs, and say so alike.
    assert x1.extrapolated and c6i.extrapolated
    assert x1.measured == c6i.measured == (8, 8)


def _smt(tmp_path: Path, with_aws: bool = False) -> Path:
    """A local SMT machine (2 cores x 2 threads: Ray counts 4 CPUs), measured at 2 and 4
    Ray CPUs; optionally one aws 1 x x1.fixture run (4 vCPUs, 2400 steps/s)."""
    results = tmp_path / "results"
    smt = "SMT CPU (2 cores x 2 threads)"
    write_run(results, "smt-2", "local", 1, 2, [(2400, 2.0)], 30.0, cpu_model=smt)
    write_run(results, "smt-4", "local", 1, 4, [(4000, 2.0)], 30.0, cpu_model=smt)
    if with_aws:
        machines = {"provider": "aws", "region": "us-east-1", "instance_type": "x1.fixture",
                    "count": 1, "instance_seconds": 100.0}  # fmt: skip
        write_run(results, "aws-1", "aws", 1, 4, [(4800, 2.0)], 100.0, {"machines": machines})
    return results


def test_smt_local_basis_counts_logical_cpus_like_vcpus(tmp_path: Path) -> None:
    results = _smt(tmp_path)
    cat = load_catalog(standard(tmp_path / "std")[1])
    rows = build_rows(find_runs(results).runs, cat, fixture_onprem())
    plan = make_plan(rows, cat, fixture_onprem(), "CartPole-v1", 1e9, targets=["aws"],
                     sizes=(1,))  # fmt: skip
    assert plan.basis.name == "local SMT CPU (2 cores x 2 threads)"
    # 1200 steps/s at 2 logical CPUs, 2000 at 4: b = log2(2000 / 1200) = 0.736966
    assert plan.basis.fit.b == pytest.approx(math.log2(2000 / 1200))
    by = _by(plan.predictions)
    # A 4-vCPU instance is evaluated at 4 CPUs, as the 4 logical CPUs measured: 2000.
    c6i = by[("c6i.xlarge", 1)]
    assert (c6i.cpus, c6i.steps_per_s, c6i.extrapolated) == (4, pytest.approx(2000), False)
    # y1.fixture, 8 vCPUs: 2000 x 2^b = 2000 x 2000/1200 = 3333.33 x 1.5 = 5000, beyond 4
    y1 = by[("y1.fixture", 1)]
    assert (y1.cpus, y1.steps_per_s, y1.extrapolated) == (8, pytest.approx(5000), True)
    assert y1.measured == (2, 4)


def test_cloud_basis_chosen_over_the_default(tmp_path: Path) -> None:
    results = _smt(tmp_path, with_aws=True)
    cat = load_catalog(standard(tmp_path / "std")[1])
    rows = build_rows(find_runs(results).runs, cat, fixture_onprem())
    # Both series reach 4 CPUs; the default is the one with more sizes (local).
    default = make_plan(rows, cat, fixture_onprem(), "CartPole-v1", 1e9, targets=["aws"],
                        sizes=(1,))  # fmt: skip
    assert default.basis.target == "local"
    plan = make_plan(rows, cat, fixture_onprem(), "CartPole-v1", 1e9, targets=["aws"],
                     basis="aws", sizes=(1,))  # fmt: skip
    assert plan.basis.name == "aws x1.fixture"
    by = _by(plan.predictions)
    # aws 1 x x1.fixture: 2400 steps/s on 4 vCPUs, linear: 600 per vCPU.
    # y1.fixture: 8 vCPUs x 600 x 1.5 = 7200; c6i.xlarge: 4 x 600 = 2400, as measured x1.
    assert by[("y1.fixture", 1)].steps_per_s == pytest.approx(7200)
    assert by[("c6i.xlarge", 1)].steps_per_s == pytest.approx(2400)
    assert by[("x1.fixture", 1)].steps_per_s == pytest.approx(2400)


# ------------------------------------------------------------------ the answers
