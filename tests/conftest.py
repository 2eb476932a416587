"""Shared fixtures.  Everything here is real: subprocesses, Ray, files; no mocks."""

from __future__ import annotations

from pathlib import Path

import pytest

# The real SIF (built once per machine) for every test directory that runs containers.
from tests.apptainer.conftest import built_image, sif  # noqa: F401

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def syndeo_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private SYNDEO_HOME so tests never see each other's clusters or logs."""
    home = tmp_path / "home"
    monkeypatch.setenv("SYNDEO_HOME", str(home))
    return home
