"""``python -m benchmarks.requirements`` (docs/getting-started.md, docs/jobs.md) runs as
shown and measures what it says: the second run with the same requirements file resolves
from the launcher's cache and, on the same ``up`` cluster, installs nothing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.helpers import ROOT


@pytest.mark.slow
@pytest.mark.cluster
def test_the_requirements_benchmark_compares_a_first_and_a_second_run(
    tmp_path: Path, syndeo_home: Path
) -> None:
    out = tmp_path / "req.json"
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.requirements", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(out.read_text())
    assert json.loads(proc.stdout) == got
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
