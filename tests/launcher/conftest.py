"""Fixtures shared by the launcher tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def fake_sbatch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A stand-in sbatch that records its environment (``<log>.env``) and script
    (``<log>.stdin``): what a Slurm job would get, without a cluster."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "sbatch"
    (bin_dir / "sbatch").write_text(f'#!/bin/sh\nenv > "{log}.env"\ncat > "{log}.stdin"\necho 77\n')
    (bin_dir / "sbatch").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    return log
