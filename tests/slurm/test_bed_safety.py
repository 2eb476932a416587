"""The root-run local Slurm bed trusts nothing another user can plant.

It used ``/var/tmp/syndeo-slurm``: any user could create that first (or a link in its
place), plant a pid file saying ``-1`` that ``down()`` (which ``up()`` calls) would
kill, or links that the bed chmods and chowns through; the munge key was written
before its chmod.  Checked here without starting the bed (these are the bed's own
building blocks; the bed itself runs in tests/slurm/test_cluster.py).
"""

from __future__ import annotations

import os
import pwd
import stat
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from syndeo.core.errors import TargetError
from testbeds import slurmcluster
from testbeds.procs import pid_alive, terminate

# Root's own bed: ownership, modes and pid files as root sees them.
pytestmark = pytest.mark.root


@pytest.fixture(autouse=True)
def _as_root() -> None:
    # Never skipped: a run that is not root must fail, not drop these checks.
    assert os.geteuid() == 0, "the Slurm bed runs as root: run these tests as root"


@pytest.fixture
def root_dir() -> Iterator[Path]:
    """A directory root owns and only root writes (as the bed's base must be)."""
    d = Path("/run") / f"syndeo-test-{uuid.uuid4().hex[:8]}"
    d.mkdir(mode=0o755)
    try:
        yield d
    finally:
        subprocess.run(["rm", "-rf", "--one-file-system", str(d)], check=False)


def test_the_default_base_is_roots_alone() -> None:
    assert slurmcluster.DEFAULT_BASE.parent == Path("/run")
    slurmcluster.check_base(slurmcluster.DEFAULT_BASE)


def test_a_base_another_user_could_make_or_change_is_refused(root_dir: Path) -> None:
    # Below a world-writable directory: anyone could have made it first.
    with pytest.raises(TargetError, match="/var/tmp is not root's alone"):
        slurmcluster.check_base(Path("/var/tmp/syndeo-slurm"))
    # A link where the base should be.
    link = root_dir / "link"
    link.symlink_to("/tmp")
    with pytest.raises(TargetError, match="not a directory"):
        slurmcluster.check_base(link / "slurm")
    # A directory owned by someone else, or writable by others.
    theirs = root_dir / "theirs"
    theirs.mkdir()
    nobody = pwd.getpwnam("nobody")
    os.chown(theirs, nobody.pw_uid, nobody.pw_gid)
    with pytest.raises(TargetError, match="not root's alone"):
        slurmcluster.check_base(theirs)
    open_dir = root_dir / "open"
    open_dir.mkdir()
    open_dir.chmod(0o777)
    with pytest.raises(TargetError, match="not root's alone"):
        slurmcluster.check_base(open_dir / "slurm")
    slurmcluster.check_base(root_dir / "fine" / "slurm")  # not made yet: root makes it


def test_pid_files_never_name_pid_1_or_less_or_a_stranger(root_dir: Path) -> None:
    stranger = subprocess.Popen(["sleep", "60"])
    try:
        for text in ("-1", "0", "1", str(stranger.pid), "garbage"):
            (root_dir / "x.pid").write_text(text + "\n")
            assert slurmcluster.daemon_pid(root_dir / "x.pid") is None, text
        # A link to a pid file elsewhere is not followed.
        (root_dir / "link.pid").symlink_to(root_dir / "x.pid")
        assert slurmcluster.daemon_pid(root_dir / "link.pid") is None
        # terminate() refuses pids <= 1 whatever its caller passes.
        terminate([-1, 0, 1], grace=0.1)
        assert pid_alive(stranger.pid) and pid_alive(os.getpid())
    finally:
        stranger.kill()
        stranger.wait()


def test_ownership_and_modes_are_never_set_through_a_link(root_dir: Path) -> None:
    victim = root_dir / "victim"
    victim.mkdir(mode=0o700)
    (root_dir / "state").symlink_to(victim)
    with pytest.raises(OSError):
        slurmcluster._chown(root_dir / "state", "nobody", 0o777)
    st = victim.stat()
    assert st.st_uid == 0 and stat.S_IMODE(st.st_mode) == 0o700


def test_the_munge_key_is_born_0400_and_not_through_a_link(root_dir: Path) -> None:
    victim = root_dir / "victim"
    victim.write_text("not a key\n")
    key = root_dir / "munge.key"
    key.symlink_to(victim)
    slurmcluster.new_munge_key(key, owner="nobody")
    assert victim.read_text() == "not a key\n"
    st = os.lstat(key)
    assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o400
    assert st.st_uid == pwd.getpwnam("nobody").pw_uid and st.st_size == 1024
