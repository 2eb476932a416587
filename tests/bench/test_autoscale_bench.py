"""``python -m benchmarks.autoscale`` (docs/autoscale.md, docs/measured.md) runs as shown
and measures what it says, in one run on one local cluster: a node Ray asked for joins,
a manual grow joins, the idle node goes; the figures are the benchmark's (no goal is
asserted here: they are reported)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.bench import run_benchmark


def _bench(tmp_path: Path, *extra: str) -> dict[str, Any]:
    return run_benchmark("autoscale", tmp_path / "scale.json", *extra)


def _measured(tmp_path: Path, *extra: str) -> dict[str, Any]:
    got = _bench(tmp_path, *extra)
    assert got["demand_to_joined_s"] > 0 and got["manual_grow_s"] > 0
    assert got["demand_vs_manual"] == round(got["demand_to_joined_s"] / got["manual_grow_s"], 2)
    # Released only after the idle timeout (Ray's rule), and then by the watcher.
    assert got["release_after_idle_s"] >= got["idle_timeout_s"] - 1
    sizes = got["status_record_bytes"]
    assert sizes["with_demand"] > sizes["without_demand"] > 0
    return got


@pytest.mark.slow
@pytest.mark.cluster
def test_the_autoscale_benchmark_measures_demand_manual_grow_and_release(
    tmp_path: Path, syndeo_home: Path
) -> None:
    assert _measured(tmp_path)["target"] == "local"


@pytest.mark.slow
@pytest.mark.slurm
def test_the_autoscale_benchmark_runs_on_the_local_slurm_cluster(tmp_path: Path) -> None:
    """``--target slurm``: the same figures, each node a one-node job of the CI user's."""
    assert _measured(tmp_path, "--target", "slurm")["target"] == "slurm"


@pytest.mark.slow
@pytest.mark.slurm
def test_the_fault_case_counts_what_a_group_that_cannot_start_asks_of_slurmctld(
    tmp_path: Path,
) -> None:
    """``--fault SECONDS``: the partition INACTIVE while a node is wanted; kept short here
    (30 s: the first refusal and its backoff), the 2-minute run is the benchmark's."""
    got = _bench(tmp_path, "--fault", "30")
    assert (got["case"], got["target"]) == ("fault", "slurm") and got["fault_s"] >= 30
    # The watcher did try, was refused, and said so; the counts are the wrappers' own.
    assert got["sbatch_calls"] >= 1 and got["refusals_logged"] >= 1
    assert got["slurmctld"]["by_command"]["sbatch"] == got["sbatch_calls"]
    assert got["sbatch_per_min"] == pytest.approx(
        got["sbatch_calls"] / (got["fault_s"] / 60), rel=0.02
    )
