"""invoke tasks for the Slurm target; the project's tasks.py adds them as ``slurm.*``.

invoke slurm.status              # your Slurm jobs (and the local test cluster, if up)
invoke slurm.cancel --cluster-id slurm-1a2b3c4d   (or --job-id 42)
"""

from __future__ import annotations

import getpass

from invoke.context import Context
from invoke.exceptions import Exit
from invoke.tasks import task

from syndeo.core.errors import SyndeoError
from syndeo.launcher.targets.slurm import commands


@task(auto_shortflags=False)
def slurm_jobs(c: Context) -> None:
    """Your Slurm jobs (squeue): syndeo's are named by their cluster id."""
    c.run(f"squeue -u {getpass.getuser()} -o '%i %j %T %D %N %R'", warn=True)


@task(
    auto_shortflags=False,
    help={"cluster_id": "the syndeo cluster id (the job's name)", "job_id": "a Slurm job id"},
)
def slurm_cancel(c: Context, cluster_id: str = "", job_id: str = "") -> None:
    """Cancel a syndeo Slurm job; its nodes stop their Ray, Slurm removes the rest."""
    if bool(cluster_id) == bool(job_id):
        raise Exit("syndeo: error: give exactly one of --cluster-id or --job-id", code=2)
    try:
        if job_id:
            commands.cancel(job_id)
        else:
            c.run(f"scancel --name={cluster_id} --user={getpass.getuser()}", hide=True)
    except SyndeoError as exc:
        raise Exit(f"syndeo: error: {exc}", code=exc.exit_code) from None
    print(f"cancelled {job_id or cluster_id}")
