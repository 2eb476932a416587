"""The node's start wrapper (terraform/modules/node/files/syndeo-node) runs only the
image the launcher chose: the SIF's sha256 against the node's SYNDEO_IMAGE_DIGEST,
checked right before ``apptainer exec``.  The image was checked at upload only, so
a copy replaced on the host since ran unchallenged.

Run as the unprivileged CI user, as a host runs it; a stand-in ``apptainer`` first on
PATH records whether it was reached (the check is the wrapper's, before it).
"""

from __future__ import annotations

import hashlib
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from testbeds.users import CI_USER, as_user

pytestmark = [pytest.mark.root]

SCRIPT = Path(__file__).resolve().parents[2] / "terraform/modules/node/files/syndeo-node"


@pytest.fixture
def host_dir() -> Iterator[Path]:
    """A dir of the CI user's, at a path it can reach (pytest's own dirs are root's, 0700)."""
    path = Path(tempfile.mkdtemp(dir="/var/tmp", prefix="syndeo-digest-"))
    os.chown(path, pwd.getpwnam(CI_USER).pw_uid, -1)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _start(where: Path, image: bytes, digest: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    uid = pwd.getpwnam(CI_USER).pw_uid
    root = where / "host"
    (root / "bin").mkdir(parents=True)
    reached = root / "apptainer-ran"
    (root / "bin" / "apptainer").write_text(f'#!/bin/sh\necho "$@" > "{reached}"\n')
    (root / "bin" / "apptainer").chmod(0o755)
    sif = root / "image.sif"
    sif.write_bytes(image)
    env = root / "node.env"
    env.write_text(
        f'SYNDEO_SCRATCH="{root}/scratch/0"\nSYNDEO_RENDEZVOUS="s3://b/p"\n'
        f'SYNDEO_IMAGE="{sif}"\nSYNDEO_IMAGE_DIGEST="{digest}"\n'
    )
    for dirpath, _dirs, files in os.walk(root):
        for name in [".", *files]:
            os.chown(Path(dirpath) / name, uid, -1)
    out = subprocess.run(
        as_user(["bash", str(SCRIPT), str(env)], {"PATH": f"{root}/bin:/usr/bin:/bin"}),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return out, reached


def test_a_replaced_image_is_refused_before_it_runs(host_dir: Path) -> None:
    uploaded = b"SIF the launcher uploaded\n" * 1000
    digest = "sha256:" + hashlib.sha256(uploaded).hexdigest()
    out, reached = _start(host_dir, b"another image in its place\n", digest)
    assert out.returncode == 1, out
    [line] = out.stderr.splitlines()
    assert line.startswith(f"syndeo-node: refusing image {host_dir}/host/image.sif: its sha256 is")
    assert f"not the launcher's {digest.removeprefix('sha256:')}" in line, line
    assert not reached.exists()  # apptainer never ran it


def test_the_image_the_launcher_chose_runs(host_dir: Path) -> None:
    image = b"SIF the launcher uploaded\n" * 1000
    out, reached = _start(host_dir, image, "sha256:" + hashlib.sha256(image).hexdigest())
    assert out.returncode == 0, out.stderr
    assert "syndeo-node: starting in image" in out.stdout and "(sha256 checked)" in out.stdout
    assert reached.read_text().split()[-2:] == ["syndeo", "node"]
