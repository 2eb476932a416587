"""The watcher of an ``up`` cluster as a Slurm job of its own (``slurm.watcher = "job"``).

Sites with load-balanced login nodes, or rules against daemons there, cannot keep the
watcher beside the launcher: it runs as a one-CPU job instead, with the launcher's
Python and ``$SYNDEO_HOME`` on the shared filesystem.  sbatch passes it no variable
but the few the script sets (``--export=NONE``): whatever else the launcher's shell
holds stays out of the job and of Slurm's records of it.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path

from syndeo import __version__
from syndeo.core.errors import ConfigError
from syndeo.launcher.targets.slurm.render import templates
from syndeo.launcher.targets.slurm.settings import SlurmSettings, check_job_dir

# What the watcher's process needs of the launcher's environment, and nothing more.
PASSED = ("SYNDEO_HOME", "PATH", "HOME", "PYTHONPATH", "LANG")


def check(settings: SlurmSettings, rendezvous: str, log: Path) -> None:
    """Refuse (one line) what a watcher job could not do, before anything starts."""
    if settings.watcher != "job":
        return
    check_job_dir(log, "SYNDEO_HOME")  # its log appears on an #SBATCH line
    if not rendezvous.startswith("file://"):
        raise ConfigError(
            'slurm.watcher = "job" needs a file:// rendezvous on the shared filesystem: '
            "a watcher job would carry your cloud credentials into Slurm's records of it "
            '(use watcher = "login", or the default file rendezvous)'
        )


def script(
    cluster_id: str,
    settings: SlurmSettings,
    argv: Sequence[str],
    env: Mapping[str, str],
    log: Path,
) -> str:
    """The watcher job's sbatch script: ``argv`` with the variables of ``env`` that it
    needs, its output appended to ``log``."""
    passed = [(k, shlex.quote(env[k])) for k in PASSED if env.get(k)]
    return (
        templates()
        .get_template("watcher.sbatch.j2")
        .render(
            version=__version__,
            cluster_id=cluster_id,
            s=settings,
            log=log,
            env=passed,
            argv=" ".join(shlex.quote(a) for a in argv),
        )
    )
