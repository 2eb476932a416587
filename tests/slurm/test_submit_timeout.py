"""An ``sbatch`` that queues the job and then does not answer (a controller whose
reply is lost) must not leave two jobs for one rank: the launcher looks the rank's job
up by its name and marker before it submits again, and adopts it.  A stand-in
``sbatch`` first on PATH runs the real one, then hangs past the launcher's timeout."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from syndeo.launcher.config import load_config
from syndeo.launcher.spec import ClusterSpec
from syndeo.launcher.targets.slurm import commands
from syndeo.launcher.targets.slurm.target import SlurmTarget
from testbeds import slurmcluster
from tests.support.specs import slurm_spec

pytestmark = [pytest.mark.slurm]


def _spec(tmp_path: Path, cid: str) -> ClusterSpec:
    return slurm_spec(
        cluster_id=cid,
        rendezvous=(tmp_path / "rdv").as_uri(),
        nodes=2,
        cpus=1,
        run="",
        workdir=None,
    )


def _jobs_named(name: str) -> list[str]:
    out = subprocess.run(
        ["squeue", "-h", "--name", name, "-o", "%i"], capture_output=True, text=True, check=True
    )
    return out.stdout.split()


def test_a_submission_whose_sbatch_hangs_leaves_one_job_for_the_rank(
    slurm_cluster: slurmcluster.LocalCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = shutil.which("sbatch")
    assert real is not None
    bindir, first = tmp_path / "bin", tmp_path / "first-answer"
    bindir.mkdir()
    (bindir / "sbatch").write_text(f'#!/bin/sh\n"{real}" "$@" > "{first}"\nexec sleep 600\n')
    (bindir / "sbatch").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:{Path(real).parent}:/usr/bin:/bin")
    monkeypatch.setattr(commands, "SUBMIT_TIMEOUT_S", 3.0)
    cid = "slurm-5ub7a1e0"
    # Held: the job stays queued (what it would run does not matter here).
    slurm = {"job_dir": str(tmp_path / "jobs"), "python": "python3", "partition": "debug"}
    target = SlurmTarget(load_config(target="slurm", slurm={**slurm, "extra_sbatch": ["--hold"]}))
    job = target._job(_spec(tmp_path, cid))
    job.job_dir.mkdir(parents=True)
    try:
        # As the autoscaler retries a start that failed: once more after an error.
        for _ in range(2):
            try:
                entry = target._submit(job)
                break
            except commands.SlurmUnreachable:
                continue
        else:
            raise AssertionError(f"no try returned a job; queued: {_jobs_named(cid)}")
        assert _jobs_named(cid) == [entry.job_id]
        assert first.read_text().strip().split(";")[0] == entry.job_id  # the one it queued
    finally:
        subprocess.run(["scancel", "--name", cid], check=False)
