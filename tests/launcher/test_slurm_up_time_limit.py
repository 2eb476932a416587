"""An ``up`` cluster on Slurm and its time limit: what cannot work together is refused
in one line before anything starts -- a requeue with nodes added for demand (a requeued
head is an attempt they never join), and ``max_requeues`` on a cluster that serves
(there is no workload whose end a requeue continues: the head serves until the limit)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.helpers import one_line_error, syndeo

SLURM = '[slurm]\npartition = "debug"\ntime = "01:00:00"\n'


@pytest.mark.parametrize(
    ("top", "slurm", "message"),
    [
        (
            "max_nodes = 3\n",
            "signal_before = 60\nmax_requeues = 2\n",
            "slurm.requeue/max_requeues and max_nodes cannot be combined",
        ),
        (
            "max_nodes = 3\n",
            "requeue = true\n",
            "slurm.requeue/max_requeues and max_nodes cannot be combined",
        ),
        ("", "signal_before = 60\nmax_requeues = 2\n", "an `up` cluster is not requeued then"),
    ],
)
def test_up_refuses_what_its_time_limit_cannot_do(
    syndeo_home: Path, tmp_path: Path, top: str, slurm: str, message: str
) -> None:
    config = tmp_path / "syndeo.toml"
    config.write_text(f'target = "slurm"\n{top}{SLURM}{slurm}')
    proc = syndeo("up", "--config", str(config), cwd=tmp_path, timeout=60)
    assert message in one_line_error(proc)
    assert not (syndeo_home / "clusters").exists() or not any((syndeo_home / "clusters").iterdir())
