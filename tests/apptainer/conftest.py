"""The real Syndeo SIF (testbeds/image.py) and who runs its containers."""

from __future__ import annotations

import os
import pwd
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from syndeo.image import manifest
from testbeds.image import test_image

RUN_USER = os.environ.get("SYNDEO_BUILD_USER", "syndeo-ci")


@pytest.fixture(scope="session")
def built_image() -> manifest.ImageManifest:
    return test_image()


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
