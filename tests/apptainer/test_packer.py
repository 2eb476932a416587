"""Packer 1.6.6 (Debian's): every source validates and the templates are formatted."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from syndeo.image.inputs import REPO

PACKER = REPO / "packer"
ENV = {**os.environ, "CHECKPOINT_DISABLE": "1"}


def _packer(*args: str, cwd: Path = PACKER) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["packer", *args], cwd=cwd, env=ENV, capture_output=True, text=True, timeout=120
    )


def test_local_build_validates() -> None:
    out = _packer("validate", "-var", 'sif_command=["true"]', "local")
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.parametrize(
    ("cloud", "source"),
    [("aws", "amazon-ebs"), ("gcp", "googlecompute"), ("azure", "azure-arm")],
)
def test_cloud_source_validates(cloud: str, source: str, tmp_path: Path) -> None:
    sif = tmp_path / "syndeo.sif"
    sif.write_bytes(b"stand-in: validate only checks the file exists")
    Path(f"{sif}.manifest.json").write_text("{}")
    env_secret = {"PKR_VAR_azure_client_secret": "validate-only"}
    out = subprocess.run(
        ["packer", "validate", f"-only={source}.syndeo", f"-var-file=examples/{cloud}.pkrvars.hcl",
         "-var", f"sif_path={sif}", "."],
        cwd=PACKER / "cloud", env={**ENV, **env_secret}, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr


def test_cloud_source_without_its_settings_fails_validation(tmp_path: Path) -> None:
    """Guards the test above: -only must really select the source (an unmatched -only
    validates nothing and passes)."""
    sif = tmp_path / "syndeo.sif"
    sif.write_bytes(b"x")
    Path(f"{sif}.manifest.json").write_text("{}")  # (read for the AMI's digest tag)
    out = _packer("validate", "-only=googlecompute.syndeo", "-var", f"sif_path={sif}", "cloud")
    assert out.returncode != 0
    assert "project_id" in out.stdout + out.stderr


@pytest.mark.parametrize("folder", ["local", "cloud", "cloud/examples"])
def test_fmt_clean(folder: str) -> None:
    out = _packer("fmt", "-check", folder)
    assert out.returncode == 0, f"packer fmt would change: {out.stdout}"
