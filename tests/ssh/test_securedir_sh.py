"""terraform/ssh/securedir.sh, the check the ssh target runs on every host before it
writes or reads the node dir (``[ssh] host_dir``) or the image dir
(``[ssh] remote_image_dir``), on real directories with modes set by chmod and a
second user's.  Each case is also put to syndeo.core.securedir.trusted_base, the
same rule for Slurm's job dir: both must accept and refuse alike.  The SSH bed runs
it over ssh (tests/ssh/test_host_paths.py).
"""

from __future__ import annotations

import os
import pwd
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from syndeo.core.errors import InsecurePath
from syndeo.core.securedir import trusted_base
from syndeo.image.inputs import REPO

pytestmark = [pytest.mark.root]

SNIPPET = REPO / "terraform" / "ssh" / "securedir.sh"
OTHER = "syndeo-ci2"  # scripts/setup.d/second-user.sh


def _sh(path: Path | str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["sh", "-c", f'. {SNIPPET}; syndeo_secure_dir "$1" "[ssh] host_dir"', "sh", str(path)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


@dataclass(frozen=True)
class Case:
    dirs: dict[str, int]  # made in this order, then chmod'ed
    path: str  # the path checked
    refused: str | None  # the refusal's words; None: accepted
    theirs: tuple[str, ...] = ()  # handed to the second user
    links: tuple[tuple[str, str], ...] = ()  # (link, target)

    def make(self, root: Path) -> None:
        for name, mode in self.dirs.items():
            (root / name).mkdir()
            (root / name).chmod(mode)
        other = pwd.getpwnam(OTHER)
        for name in self.theirs:
            os.chown(root / name, other.pw_uid, other.pw_gid)
        for link, target in self.links:
            (root / link).symlink_to(target)


CASES = {
    "private": Case({"mine": 0o700}, "mine/a/b", None),
    "readable but only ours to write": Case({"mine": 0o755}, "mine/a", None),
    "group-writable": Case(
        {"proj": 0o2775}, "proj/a", "proj is writable by its group without the sticky bit"
    ),
    "world-writable": Case(
        {"open": 0o777}, "open/a", "open is writable by others without the sticky bit"
    ),
    "sticky itself": Case({"tmp": 0o1777}, "tmp", "it is writable by others"),
    "private below sticky": Case({"tmp": 0o1777, "tmp/me": 0o700}, "tmp/me/a", None),
    "readable below sticky": Case({"tmp": 0o1777, "tmp/me": 0o755}, "tmp/me/a", "tmp/me is in"),
    "another user's below sticky": Case(
        {"tmp": 0o1777, "tmp/me": 0o700}, "tmp/me/a", "tmp/me is in", theirs=("tmp/me",)
    ),
    "another user's": Case(
        {"theirs": 0o755}, "theirs/a", f"theirs belongs to {OTHER}", theirs=("theirs",)
    ),
    "link through an open dir": Case(
        {"open": 0o777, "open/real": 0o700},
        "ln/a",
        "open is writable by others",
        links=(("ln", "open/real"),),
    ),
    "link to a private dir": Case({"mine": 0o700}, "ln/a", None, links=(("ln", "mine"),)),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_host_check_and_the_slurm_check_agree(tmp_path: Path, case: str) -> None:
    c = CASES[case]
    c.make(tmp_path)
    path, refused = tmp_path / c.path, c.refused
    try:
        trusted_base(path, "job dir base", "[slurm] job_dir")
        py_refused = None
    except InsecurePath as exc:
        py_refused = str(exc)
    before = sorted(tmp_path.rglob("*"))
    out = _sh(path)
    if refused is None:
        assert out.returncode == 0 and out.stderr == "", out
        assert py_refused is None, py_refused
        # Made private, every missing level.
        assert path.is_dir() and path.stat().st_mode & 0o777 == 0o700
        return
    assert out.returncode == 1, out
    [line] = out.stderr.splitlines()
    assert line.startswith(f"syndeo: refusing [ssh] host_dir {path} on "), line
    assert f"{tmp_path}/{refused}" in line or refused in line, line
    assert py_refused is not None and refused.split(" ", 1)[1] in py_refused, py_refused
    assert sorted(tmp_path.rglob("*")) == before  # nothing made where it was refused


def test_a_relative_path_is_below_home_and_dotdot_is_refused(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    out = subprocess.run(
        ["sh", "-c", f'. {SNIPPET}; syndeo_secure_dir .syndeo/images "[ssh] remote_image_dir"'],
        env={"HOME": str(home), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert out.returncode == 0, out
    assert (home / ".syndeo" / "images").stat().st_mode & 0o777 == 0o700
    out = _sh(f"{tmp_path}/home/../home/x")
    assert out.returncode == 1 and "it names '..'" in out.stderr, out


def test_hosts_sharing_a_home_check_the_same_new_dirs_at_once(tmp_path: Path) -> None:
    """Every host checks (and makes) its node dir at the same moment; with a shared home
    they make the same levels, and the one that loses a mkdir must not be refused."""
    (tmp_path / "home").mkdir(mode=0o700)
    for attempt in range(5):
        path = tmp_path / "home" / str(attempt) / "clusters" / "c" / "a" / "b"
        procs = [
            subprocess.Popen(
                ["sh", "-c", f'. {SNIPPET}; syndeo_secure_dir "$1" x', "sh", f"{path}/{rank}"],
                stderr=subprocess.PIPE,
                text=True,
            )
            for rank in range(8)
        ]
        errors = [p.communicate(timeout=30)[1] for p in procs]
        assert [p.returncode for p in procs] == [0] * 8, errors
