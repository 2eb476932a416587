"""The real Syndeo SIF, built once per machine and reused (the build is cached by
its inputs digest, so a second session only re-hashes it)."""

from __future__ import annotations

import os
import pwd
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from syndeo.image import build, manifest
from testbeds.machine import IMAGE_DIR

RUN_USER = os.environ.get("SYNDEO_BUILD_USER", "syndeo-ci")


@pytest.fixture(scope="session")
def built_image() -> manifest.ImageManifest:
    reuse = os.environ.get("SYNDEO_TEST_SIF")
    if reuse:
        # Developer shortcut: test an already-built SIF (CI never sets this; it builds).
        found = manifest.verify_sif(Path(reuse))
        assert found is not None, f"{reuse} has no manifest"
        return found
    IMAGE_DIR.mkdir(parents=True, exist_ok=True)
    IMAGE_DIR.chmod(0o755)
    return build.build("debootstrap", IMAGE_DIR / "syndeo.sif")


@pytest.fixture(scope="session")
def sif(built_image: manifest.ImageManifest) -> Path:
    return Path(built_image.sif)


@pytest.fixture(scope="session")
def run_user() -> str | None:
    """Who containers run as: ``syndeo-ci`` when the tests run as root, else ourselves."""
    return RUN_USER if os.geteuid() == 0 else None


@pytest.fixture(scope="session")
def run_uid(run_user: str | None) -> int:
    return pwd.getpwnam(run_user).pw_uid if run_user else os.geteuid()


@pytest.fixture
def shared_dir(run_uid: int) -> Iterator[Path]:
    """A directory the container user can write, at a path it can traverse."""
    base = Path("/var/tmp/syndeo-test-binds")
    base.mkdir(mode=0o755, exist_ok=True)
    path = Path(tempfile.mkdtemp(dir=os.path.realpath(base)))
    os.chown(path, run_uid, -1)
    yield path
    shutil.rmtree(path, ignore_errors=True)
