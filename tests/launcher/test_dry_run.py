"""`deploy --dry-run` shows the per-node commands and starts or writes nothing."""

from __future__ import annotations

import shlex
from pathlib import Path

from tests.support.helpers import syndeo


def test_dry_run_prints_one_node_command_per_rank(syndeo_home: Path, tmp_path: Path) -> None:
    proc = syndeo(
        "deploy",
        "--dry-run",
        "--nodes",
        "3",
        "--cluster-id",
        "dry",
        "--run",
        "python a.py, b",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("env ")]
    assert len(lines) == 3
    for rank, line in enumerate(lines):
        words = shlex.split(line)
        env = dict(w.split("=", 1) for w in words[1:] if "=" in w and w.startswith("SYNDEO_"))
        assert env["SYNDEO_RANK"] == str(rank)
        assert env["SYNDEO_CLUSTER_ID"] == "dry"
        assert env["SYNDEO_NODES"] == "3"
        # Only the head runs the workload; the command survives quoting intact.
        assert env["SYNDEO_RUN"] == ("python a.py, b" if rank == 0 else "")
        assert " -m syndeo node > " in line
    assert not syndeo_home.exists()  # nothing written, nothing started
