"""`invoke build` in a venv whose setuptools is older than pyproject.toml's
[build-system] asks for (a plain `python -m venv` + `pip install -e .` has 65): one line
naming what to upgrade, before anything is downloaded or built (issue 36)."""

from __future__ import annotations

import importlib.metadata

import pytest

from syndeo.core.errors import ImageError
from syndeo.image import build, inputs


def test_an_old_setuptools_is_named_with_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.metadata.version

    def old(name: str) -> str:
        return "65.5.0" if name == "setuptools" else real(name)

    monkeypatch.setattr(build.importlib.metadata, "version", old)
    with pytest.raises(ImageError) as exc:
        build._check_wheel_backend(inputs.REPO)
    msg = str(exc.value)
    assert "\n" not in msg
    assert "setuptools>=77" in msg and "setuptools 65.5.0" in msg
    assert "-m pip install 'setuptools>=77'" in msg


def test_the_setuptools_scripts_setup_installs_passes() -> None:
    build._check_wheel_backend(inputs.REPO)  # this venv: scripts/setup's
