"""The VM start script (terraform/modules/node/files/syndeo-node) keeps the one GPU rule.

Only its launch line is checked here: an ``apptainer`` on PATH that reports the argv
and environment it was given (the real container run: tests/apptainer/test_start_script.py).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

SCRIPT = (
    Path(__file__).resolve().parents[2] / "terraform" / "modules" / "node" / "files" / "syndeo-node"
)
REPORT = """#!/bin/bash
printf 'ARG %s\\n' "$@"
printf 'CUDA=%s\\n' "${APPTAINERENV_CUDA_VISIBLE_DEVICES-unset}"
"""


@pytest.mark.parametrize(
    ("gpus", "visible", "nv", "cuda"),
    [("2", "1,3", True, "1,3"), ("1", None, True, "unset"), ("0", "0", False, "unset")],
)
def test_container_line_follows_the_gpu_rule(
    tmp_path: Path, gpus: str, visible: str | None, nv: bool, cuda: str
) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "apptainer").write_text(REPORT)
    (bindir / "apptainer").chmod(0o755)
    env = {
        "PATH": f"{bindir}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "SYNDEO_SCRATCH": str(tmp_path / "scratch"),
        "SYNDEO_IMAGE": "/images/x.sif",
        "SYNDEO_RENDEZVOUS": "s3://bucket/prefix",
        "SYNDEO_GPUS": gpus,
    }
    if visible is not None:
        env["CUDA_VISIBLE_DEVICES"] = visible
    out = subprocess.run(
        ["bash", str(SCRIPT)], env=env, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    args = [ln.removeprefix("ARG ") for ln in out if ln.startswith("ARG ")]
    assert args[:2] == (["exec", "--nv"] if nv else ["exec", "--containall"])
    assert "--cleanenv" in args and args[-3:] == ["/images/x.sif", "syndeo", "node"]
    assert f"CUDA={cuda}" in out
