"""invoke tasks for jobs on an ``up`` cluster; the project's tasks.py adds them.

invoke submit [--cluster-id ID] [--workdir DIR] [--env K=V …] [--requirements FILE] [--follow]
    -- python train.py
invoke jobs | invoke logs JOB [--follow] | invoke cancel JOB | invoke fetch JOB
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

from invoke.context import Context
from invoke.exceptions import Exit
from invoke.tasks import task

from syndeo.cli import jobverbs
from syndeo.cli.options import invoke_help
from syndeo.core.errors import SyndeoError


def _run(fn: Callable[..., int], **options: Any) -> None:
    try:
        rc = fn(**options)
    except SyndeoError as exc:
        raise Exit(f"syndeo: error: {exc}", code=exc.exit_code) from None
    except KeyboardInterrupt:
        raise Exit("syndeo: interrupted", code=130) from None
    if rc:
        raise Exit(code=rc)


@task(help=invoke_help("submit"), iterable=["env", "exclude"], auto_shortflags=False)
def submit(
    c: Context,
    cluster_id: str | None = None,
    workdir: str | None = None,
    env: list[str] | None = None,
    exclude: list[str] | None = None,
    requirements: str | None = None,
    follow: bool = False,
) -> None:
    """Run a program on an `up` cluster, through its rendezvous: `invoke submit -- CMD …`."""
    command = _remainder(c)
    _run(
        jobverbs.run_submit,
        command=command,
        cluster_id=cluster_id,
        workdir=Path(workdir) if workdir else None,
        env=env or [],
        exclude=exclude or [],
        follow=follow,
        requirements=Path(requirements) if requirements else None,
    )


def _remainder(c: Context) -> list[str]:
    try:
        return shlex.split(c.remainder or "")
    except ValueError as exc:
        raise Exit(f"syndeo: error: the command after `--`: {exc}", code=2) from None


@task(help=invoke_help("jobs"), auto_shortflags=False)
def jobs(c: Context, cluster_id: str | None = None) -> None:
    """The jobs of an `up` cluster: id, command, state, start, duration, exit."""
    _run(jobverbs.run_jobs, cluster_id=cluster_id)


@task(help=invoke_help("logs"), auto_shortflags=False)
def logs(c: Context, job: str, cluster_id: str | None = None, follow: bool = False) -> None:
    """A job's output from the start (--follow: until it ends; exits with the job)."""
    _run(jobverbs.run_logs, job=job, cluster_id=cluster_id, follow=follow)


@task(help=invoke_help("cancel"), auto_shortflags=False)
def cancel(c: Context, job: str, cluster_id: str | None = None) -> None:
    """Cancel a job (its head stops it through Ray's Job API)."""
    _run(jobverbs.run_cancel, job=job, cluster_id=cluster_id)


@task(help=invoke_help("fetch"), auto_shortflags=False)
def fetch(c: Context, job: str, cluster_id: str | None = None, out: str | None = None) -> None:
    """Download the files a job left in its outputs/ directory."""
    _run(jobverbs.run_fetch, job=job, cluster_id=cluster_id, out=Path(out) if out else None)
