"""`invoke build` in a venv whose build backend is older than pyproject.toml's
[build-system] asks for, or missing: one line naming what to upgrade, before anything is
downloaded or built."""

from __future__ import annotations

import importlib.metadata

import pytest

from syndeo.core.errors import ImageError
from syndeo.image import build, inputs


def test_an_old_backend_is_named_with_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.metadata.version

    def old(name: str) -> str:
        return "1.9.0" if name == "hatchling" else real(name)

    monkeypatch.setattr(build.importlib.metadata, "version", old)
    with pytest.raises(ImageError) as exc:
        build._check_wheel_backend(inputs.REPO)
    msg = str(exc.value)
    assert "\n" not in msg
    assert "hatchling>=1.27" in msg and "hatchling 1.9.0" in msg
    assert "-m pip install 'hatchling>=1.27'" in msg


def test_the_backend_scripts_setup_installs_passes() -> None:
    build._check_wheel_backend(inputs.REPO)  # this venv: scripts/setup's
