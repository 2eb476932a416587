"""A Slurm job dir under a ``job_dir`` other users may share is ours and private, or the
launch is refused in one line before anything is submitted: a ``jobs/<id>`` another user
made first could hold a planted symlink for the rank-0 exit status, or let them read
``slurm-%j.out``."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from syndeo.core.errors import InsecurePath
from syndeo.launcher.config import load_config
from syndeo.launcher.spec import ClusterSpec
from syndeo.launcher.targets.slurm.target import SlurmTarget
from tests.launcher.conftest import StandInSbatch


def _open_to_all(d: Path) -> None:
    d.mkdir(parents=True)
    d.chmod(0o777)


def _symlink_elsewhere(d: Path) -> None:
    d.parent.mkdir(parents=True)
    elsewhere = d.parent.parent / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    d.symlink_to(elsewhere)


def _not_ours(d: Path) -> None:
    d.mkdir(parents=True, mode=0o700)
    os.chown(d, 65534, 65534)  # nobody's (the tests run as root, as CI does)


@pytest.mark.parametrize(
    ("plant", "why"),
    [
        (_open_to_all, "is writable by group and others"),
        (_symlink_elsewhere, "it is a symlink"),
        pytest.param(_not_ours, "belongs to nobody, not to us", marks=pytest.mark.root),
    ],
    ids=["writable-by-others", "symlink", "another-users"],
)
def test_a_job_dir_that_is_not_ours_and_private_is_refused(
    tmp_path: Path,
    syndeo_home: Path,
    fake_sbatch: StandInSbatch,
    plant: Callable[[Path], None],
    why: str,
) -> None:
    shared = tmp_path / "shared"
    rdv = (tmp_path / "rdv").as_uri()
    cfg = load_config(target="slurm", rendezvous=rdv, slurm={"job_dir": str(shared)})
    spec = ClusterSpec.from_config(cfg, rdv, "planted-dir")
    target = SlurmTarget(cfg, echo=lambda _: None)
    job_dir = shared / "jobs" / "planted-dir"
    plant(job_dir)
    with pytest.raises(InsecurePath, match=f"refusing job dir {job_dir}: .*{why}") as exc:
        target.launch(spec)
    assert "\n" not in str(exc.value)
    assert not fake_sbatch.log.with_suffix(".stdin").exists()  # nothing was submitted


def test_a_new_job_dir_is_made_private_at_every_level(
    tmp_path: Path, syndeo_home: Path, fake_sbatch: StandInSbatch
) -> None:
    shared = tmp_path / "shared"
    rdv = (tmp_path / "rdv").as_uri()
    cfg = load_config(target="slurm", rendezvous=rdv, slurm={"job_dir": str(shared)})
    target = SlurmTarget(cfg, echo=lambda _: None)
    launched = target.launch(ClusterSpec.from_config(cfg, rdv, "fresh-dir"))
    assert launched.slurm.job_id == "77"  # the stand-in sbatch's answer: it was submitted
    for level in (shared / "jobs", shared / "jobs" / "fresh-dir"):
        assert level.stat().st_mode & 0o777 == 0o700, level
