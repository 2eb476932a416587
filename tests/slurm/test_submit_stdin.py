"""sbatch gets the rendered script on stdin, never a file it reads back.

The job dir may sit on a shared filesystem; a script written there and then named to
sbatch could be swapped by someone else between the write and sbatch's read.  Now
sbatch reads the text on standard input; the copy in the job dir is a record only,
written 0600 and never through a link planted in its place.  A stand-in ``sbatch``
records what it got (no Slurm needed).
"""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from syndeo.launcher.config import load_config
from syndeo.launcher.targets.slurm import commands
from syndeo.launcher.targets.slurm.render import render
from syndeo.launcher.targets.slurm.target import SlurmTarget
from tests.support.specs import slurm_spec


@pytest.fixture
def fake_sbatch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "sbatch"
    script = bin_dir / "sbatch"
    script.write_text(
        f'#!/bin/sh\nprintf "%s\\n" "$@" > "{log}.argv"\ncat > "{log}.stdin"\necho "4242;c"\n'
    )
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    return log


def test_submit_hands_the_text_to_sbatch_on_stdin(fake_sbatch: Path) -> None:
    text = "#!/bin/bash\n#SBATCH --nodes=1\necho hi\n"
    assert commands.submit(text) == "4242"
    # --export=ALL: a user's SBATCH_EXPORT=NONE would leave the job without its secrets.
    assert fake_sbatch.with_suffix(".argv").read_text().splitlines() == [
        "--parsable",
        "--export=ALL",
    ]
    assert fake_sbatch.with_suffix(".stdin").read_text() == text


def test_the_target_submits_what_it_rendered_whatever_is_in_the_job_dir(
    fake_sbatch: Path, tmp_path: Path
) -> None:
    job_dir = tmp_path / "shared"
    cfg = load_config(target="slurm", slurm={"job_dir": str(job_dir), "python": "python3"})
    spec = slurm_spec(rendezvous=(tmp_path / "rdv").as_uri(), nodes=2, cpus=1, workdir=None)
    target = SlurmTarget(cfg)
    job = target._job(spec)
    job.job_dir.mkdir(parents=True)
    # Someone who can write the shared dir plants a link where the copy goes.
    victim = tmp_path / "victim"
    victim.write_text("untouched\n")
    (job.job_dir / "job.sbatch").symlink_to(victim)
    entry = target._submit(job)
    assert entry.job_id == "4242"
    # --export=ALL: a user's SBATCH_EXPORT=NONE would leave the job without its secrets;
    # the comment names the rank's job in the queue (commands.submit's marker).
    assert fake_sbatch.with_suffix(".argv").read_text().splitlines() == [
        "--parsable",
        "--export=ALL",
        "--comment=syndeo:slurm-0123abcd:job:a0",
    ]
    assert fake_sbatch.with_suffix(".stdin").read_text() == render(job)
    assert victim.read_text() == "untouched\n"
    copy = job.job_dir / "job.sbatch"
    assert not copy.is_symlink() and copy.read_text() == render(job)
    assert stat.S_IMODE(copy.stat().st_mode) == 0o600
