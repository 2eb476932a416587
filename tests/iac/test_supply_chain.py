"""What goes into the images is what was named: the VM image's apptainer .deb by its
sha256, the SIF's Python wheels by the lock's hashes, the docker base by digest, the
debootstrap base against the Debian archive keyring.

Light checks only: the provisioning script runs with stand-ins for apt-get and curl,
the lock and image helpers on files made here.  The real builds (`invoke build`, the
cloud `packer build`) are not run by these tests.
"""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
from pathlib import Path

import pytest

from syndeo.core.errors import ImageError
from syndeo.image import build
from syndeo.image.inputs import check_base, hashed_pins, lock_pins, wheelhouse_argv

REPO = Path(__file__).resolve().parents[2]
PROVISION = REPO / "packer" / "cloud" / "files" / "provision.sh"
DIGEST = "python:3.11-slim-bookworm@sha256:" + "a" * 64


def _stub(bin_dir: Path, name: str, body: str) -> None:
    path = bin_dir / name
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def _provision(tmp_path: Path, **env: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    """provision.sh up to its apptainer install and no further, with apt-get logging its
    calls and curl writing a known file (its -o argument) instead of downloading.  apt-get
    fails when handed the .deb: the script (set -e) stops there, before it would write
    anything outside /tmp on this machine."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "apt-calls"
    _stub(bin_dir, "apt-get", f'echo "$*" >> {calls}\ncase "$*" in *apptainer.deb*) exit 3;; esac')
    _stub(
        bin_dir,
        "curl",
        'while [ $# -gt 1 ]; do [ "$1" = -o ] && out=$2; shift; done\nprintf "the deb" > "$out"',
    )
    try:
        proc = subprocess.run(
            ["sh", str(PROVISION)],
            capture_output=True,
            text=True,
            timeout=60,
            env={"PATH": f"{bin_dir}:{os.environ['PATH']}", **env},
        )
    finally:
        Path("/tmp/apptainer.deb").unlink(missing_ok=True)  # where the script downloads
    return proc, calls


@pytest.mark.parametrize("sha", ["", "abc", "G" * 64])
def test_deb_url_without_a_valid_sha256_is_refused(tmp_path: Path, sha: str) -> None:
    proc, calls = _provision(
        tmp_path, APPTAINER_DEB_URL="https://example.invalid/a.deb", APPTAINER_DEB_SHA256=sha
    )
    assert proc.returncode != 0
    assert "apptainer_deb_sha256" in proc.stderr
    assert "install" not in (calls.read_text() if calls.exists() else "")


def test_deb_that_does_not_match_its_sha256_is_not_installed(tmp_path: Path) -> None:
    proc, calls = _provision(
        tmp_path, APPTAINER_DEB_URL="https://example.invalid/a.deb", APPTAINER_DEB_SHA256="0" * 64
    )
    assert proc.returncode != 0
    assert "/tmp/apptainer.deb" not in calls.read_text()  # never handed to apt


def test_deb_that_matches_is_installed(tmp_path: Path) -> None:
    """The positive case (guards the two above): the stand-in .deb's own digest passes
    the check and reaches apt."""
    proc, calls = _provision(
        tmp_path,
        APPTAINER_DEB_URL="https://example.invalid/a.deb",
        APPTAINER_DEB_SHA256=hashlib.sha256(b"the deb").hexdigest(),
    )
    assert proc.returncode == 3, proc.stderr  # stopped by the apt-get stand-in, as planned
    assert "install /tmp/apptainer.deb" in calls.read_text(), proc.stderr


def test_sid_route_is_pinned_and_recorded() -> None:
    """Without a .deb: one apptainer version, from a fixed snapshot of sid (not the
    moving archive), sid pinned low, and the list of what came from it kept."""
    text = PROVISION.read_text()
    assert 'install -t sid "apptainer=$APPTAINER_SID_VERSION"' in text
    assert "snapshot.debian.org/archive/debian/$SID_SNAPSHOT/" in text
    assert "URIs: http://deb.debian.org/debian\nSuites: sid" not in text
    assert "Pin-Priority: 100" in text
    assert "/etc/syndeo/from-sid.txt" in text


def _wheel(folder: Path, name: str, version: str, body: bytes) -> str:
    folder.mkdir(exist_ok=True)
    (folder / f"{name}-{version}-py3-none-any.whl").write_bytes(body)
    return hashlib.sha256(body).hexdigest()


def test_lock_pins_get_their_wheels_hashes(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    a = _wheel(wheels, "typing_extensions", "4.15.0", b"one")
    b = _wheel(wheels, "ray", "2.60.0", b"two")
    lines = hashed_pins(["ray==2.60.0", "typing-extensions==4.15.0"], wheels)
    assert lines == [
        f"ray==2.60.0 --hash=sha256:{b}",
        f"typing-extensions==4.15.0 --hash=sha256:{a}",
    ]
    lock = tmp_path / "requirements.lock"
    lock.write_text("# header\n" + "\n".join(lines) + "\n")
    assert lock_pins(lock) == ["ray==2.60.0", "typing-extensions==4.15.0"]
    assert "--require-hashes" in wheelhouse_argv(lock, tmp_path / "dl")
    with pytest.raises(ImageError, match=r"no wheel of numpy==2\.0"):
        hashed_pins(["numpy==2.0"], wheels)


def test_image_install_checks_hashes_when_the_lock_has_them() -> None:
    text = (REPO / "packer" / "apptainer" / "install-env.sh").read_text()
    assert "--require-hashes" in text and "--no-index" in text


def test_debootstrap_base_needs_the_archive_keyring(tmp_path: Path) -> None:
    with pytest.raises(ImageError, match="debian-archive-keyring"):
        check_base("debootstrap", {}, keyring=tmp_path / "missing.gpg")
    present = tmp_path / "keyring.gpg"
    present.write_bytes(b"k")
    check_base("debootstrap", {}, keyring=present)


@pytest.mark.parametrize("given", [None, "python:3.11-slim-bookworm", "python@sha256:abc"])
def test_docker_base_needs_a_digest(tmp_path: Path, given: str | None) -> None:
    args = {"BASE": given} if given else {}
    with pytest.raises(ImageError, match="pinned by digest"):
        check_base("docker", args)
    # …and build() refuses it before anything is downloaded or built.
    with pytest.raises(ImageError, match="pinned by digest"):
        build.build("docker", tmp_path / "x.sif", build_args=args, use_packer=False)
    assert not (tmp_path / "x.sif").exists()
    check_base("docker", {"BASE": DIGEST})
