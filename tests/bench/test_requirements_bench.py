"""``python -m benchmarks.requirements`` (docs/getting-started.md, docs/jobs.md) runs as
shown and measures what it says: the second run with the same requirements file resolves
from the launcher's cache and, on the same ``up`` cluster, installs nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.bench import run_benchmark


@pytest.mark.slow
@pytest.mark.cluster
def test_the_requirements_benchmark_compares_a_first_and_a_second_run(
    tmp_path: Path, syndeo_home: Path
) -> None:
    got = run_benchmark("requirements", tmp_path / "req.json")
    first, second = got["resolve"]
    assert first["archive_bytes"] == second["archive_bytes"] > 0
    assert second["resolve_s"] < first["resolve_s"]  # the cache, not pip download
    assert got["submit"][0]["head_install_s"] > 0 and got["submit"][1]["head_install_s"] == 0
    assert all(len(run["node_install_s"]) == 2 for run in got["deploy"])
    assert set(got["ratios"]) == {
        "resolve_cached_over_pip_download",
        "deploy_wall_second_over_first",
        "submit_wall_second_over_first",
    }
