"""The Slurm job dir's base (``[slurm] job_dir``) and the levels above it are checked.

``secure_dir`` makes every level below the base ours and private, but took the base
as it was: in a group-writable project dir without the sticky bit, any member of the
group could rename ``jobs/`` and put their own in its place (with a link where the
next script or the rank-0 exit status goes).  Real directories, modes set with chmod,
a second user where one is needed; a stand-in ``sbatch`` shows nothing was submitted.
"""

from __future__ import annotations

import os
import pwd
from pathlib import Path

import pytest

from syndeo.core.errors import InsecurePath
from syndeo.launcher.config import load_config
from syndeo.launcher.targets.slurm.target import SlurmTarget
from tests.support.specs import slurm_spec

OTHER = "syndeo-ci2"  # scripts/setup.d/second-user.sh


@pytest.fixture
def fake_sbatch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "sbatch.stdin"
    (bin_dir / "sbatch").write_text(f'#!/bin/sh\ncat > "{log}"\necho "4242;c"\n')
    (bin_dir / "sbatch").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    return log


def _launch(tmp_path: Path, job_dir: Path) -> None:
    cfg = load_config(target="slurm", slurm={"job_dir": str(job_dir), "python": "python3"})
    spec = slurm_spec(
        rendezvous=(tmp_path / "rdv").as_uri(), nodes=1, cpus=1, run="true", workdir=None
    )
    SlurmTarget(cfg).launch(spec)


def test_a_group_writable_project_dir_is_refused_before_anything_is_made(
    fake_sbatch: Path, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    project.chmod(0o2775)  # a typical shared project dir: group-writable, setgid, not sticky
    with pytest.raises(InsecurePath) as refused:
        _launch(tmp_path, project / "syndeo")
    line = str(refused.value)
    assert "\n" not in line and f"{project} is writable by its group" in line, line
    assert "without the sticky bit" in line and f"chmod go-w {project}" in line, line
    assert "[slurm] job_dir" in line, line
    assert not (project / "syndeo").exists() and not fake_sbatch.exists()
    # The fix the line names is enough.
    project.chmod(0o755)
    _launch(tmp_path, project / "syndeo")
    assert fake_sbatch.exists()
    assert (project / "syndeo" / "jobs" / "slurm-0123abcd").is_dir()


def test_a_writable_level_far_above_the_base_is_refused(fake_sbatch: Path, tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    (shared / "u" / "me").mkdir(parents=True)
    shared.chmod(0o777)  # writable by everyone, no sticky bit: `u` can be swapped
    with pytest.raises(InsecurePath, match=f"{shared} is writable by others without"):
        _launch(tmp_path, shared / "u" / "me")
    assert not fake_sbatch.exists()


def test_a_sticky_shared_dir_only_above_a_private_dir_of_ours(
    fake_sbatch: Path, tmp_path: Path
) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    scratch.chmod(0o1777)  # like /tmp
    with pytest.raises(InsecurePath, match=r"it is writable by others .*directory of yours inside"):
        _launch(tmp_path, scratch)
    mine = scratch / "me"
    mine.mkdir(mode=0o755)
    mine.chmod(0o755)
    with pytest.raises(InsecurePath, match=f"{mine} is in {scratch}, which others can write"):
        _launch(tmp_path, mine / "syndeo")
    assert not fake_sbatch.exists()
    mine.chmod(0o700)
    _launch(tmp_path, mine / "syndeo")
    assert fake_sbatch.exists()


@pytest.mark.root  # hands a dir to another user
def test_a_level_of_another_user_and_a_link_through_a_writable_dir(
    fake_sbatch: Path, tmp_path: Path
) -> None:
    other = pwd.getpwnam(OTHER)
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o755)
    os.chown(theirs, other.pw_uid, other.pw_gid)  # not writable by us, but they can chmod it
    with pytest.raises(InsecurePath, match=f"{theirs} belongs to {OTHER}, who could replace"):
        _launch(tmp_path, theirs / "syndeo")
    # A link of ours, in a dir of ours, to a dir below a world-writable one.
    open_dir = tmp_path / "open"
    (open_dir / "real").mkdir(parents=True)
    open_dir.chmod(0o777)
    (tmp_path / "link").symlink_to(open_dir / "real")
    with pytest.raises(InsecurePath, match=f"{open_dir} is writable by others"):
        _launch(tmp_path, tmp_path / "link" / "syndeo")
    assert not fake_sbatch.exists()
    # A private dir of ours, reached through a link of ours, is fine.
    (tmp_path / "mine").mkdir(mode=0o700)
    (tmp_path / "link2").symlink_to(tmp_path / "mine")
    _launch(tmp_path, tmp_path / "link2" / "syndeo")
    assert fake_sbatch.exists()
