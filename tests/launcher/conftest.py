"""Fixtures shared by the launcher tests."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest


@dataclass
class StandInSbatch:
    """A stand-in ``sbatch`` on PATH that records the environment and the script a Slurm
    job would get, without a cluster; :meth:`submit` hands it one job as the Slurm target
    does."""

    log: Path
    jobs: Path
    env: dict[str, str] = field(default_factory=dict)
    sbatch_env: dict[str, str] = field(default_factory=dict)
    script: str = ""
    said: list[str] = field(default_factory=list)
    job_dir: Path | None = None

    def submit(
        self, rendezvous: str, cluster_id: str, time: str | None = "02:00:00", **settings: str
    ) -> StandInSbatch:
        from syndeo.launcher.config import load_config
        from syndeo.launcher.spec import ClusterSpec
        from syndeo.launcher.targets.slurm.target import SlurmTarget

        slurm = {"job_dir": str(self.jobs), "python": "python3"}
        cfg = load_config(
            target="slurm",
            rendezvous=rendezvous,
            **settings,
            slurm={**slurm, "time": time} if time else slurm,
        )
        spec = ClusterSpec.from_config(cfg, rendezvous, cluster_id)
        target = SlurmTarget(cfg, echo=self.said.append)
        job = target._job(spec)
        job.job_dir.mkdir(parents=True)
        target._submit(job)
        self.job_dir = job.job_dir
        lines = self.log.with_suffix(".env").read_text().splitlines()
        self.sbatch_env = dict(ln.split("=", 1) for ln in lines if "=" in ln)
        # What the job gets: sbatch's environment, then what the script reads from its
        # secrets file (never sbatch's environment: Slurm may keep that for good).
        secrets = [ln for f in job.job_dir.glob("*.secrets") for ln in f.read_text().splitlines()]
        self.env = {**self.sbatch_env, **dict(ln.split("=", 1) for ln in secrets)}
        self.script = self.log.with_suffix(".stdin").read_text()
        return self

    def credentials_line(self) -> str:
        [line] = [s for s in self.said if "node credentials" in s]
        return line


@pytest.fixture
def fake_sbatch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> StandInSbatch:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "sbatch"
    (bin_dir / "sbatch").write_text(f'#!/bin/sh\nenv > "{log}.env"\ncat > "{log}.stdin"\necho 77\n')
    (bin_dir / "sbatch").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    return StandInSbatch(log, tmp_path / "jobs")
