"""``submit``, ``jobs``, ``logs``, ``cancel``, ``fetch``: jobs on an ``up`` cluster, for
both front ends (the work is in :mod:`syndeo.launcher.job_client`).

Exit status of ``submit --follow`` and ``logs --follow``: the job's own (0 when it
succeeded, its exit code when it failed, 130 when cancelled, 2 when rejected).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from rich.table import Table

from syndeo.launcher import job_client
from syndeo.launcher.ui import Ui
from syndeo.rendezvous import JobState


def _write(data: bytes) -> None:
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()


def exit_status(state: JobState | None) -> int:
    if state is None:
        return 1
    if state.state == "succeeded":
        return 0
    if state.state == "cancelled":
        return 130
    if state.state == "rejected":
        return 2
    return state.exit_code or 1


def _say_end(ui: Ui, state: JobState | None) -> None:
    if state is None:
        return
    detail = f" (exit {state.exit_code})" if state.exit_code is not None else ""
    why = f": {state.message}" if state.message else ""
    ui.info(f"job {state.job_id} {state.state}{detail}{why}")


def run_submit(
    command: list[str],
    cluster_id: str | None = None,
    workdir: Path | None = None,
    env: list[str] | None = None,
    exclude: list[str] | None = None,
    follow: bool = False,
    ui: Ui | None = None,
    requirements: Path | None = None,
) -> int:
    ui = ui or Ui()
    cluster, spec = job_client.submit(
        command,
        cluster_id=cluster_id,
        workdir=workdir,
        env=env,
        excludes=exclude,
        requirements=requirements,
        say=ui.info,
    )
    if spec.wheelhouse_digest is not None:
        ui.info(f"wheels for the job resolved (sha256 {spec.wheelhouse_digest[:12]})")
    print(spec.job_id, flush=True)
    if not follow:
        ui.info(f"submitted to {spec.cluster_id}: syndeo logs {spec.job_id} --follow")
        return 0
    state = job_client.logs(spec.job_id, _write, follow=True, cluster=cluster)
    _say_end(ui, state)
    return exit_status(state)


def run_jobs(cluster_id: str | None = None, ui: Ui | None = None) -> int:
    ui = ui or Ui()
    rdv, found = job_client.list_jobs(cluster_id)
    table = Table(title=f"jobs of {rdv.cluster_id}", title_justify="left")
    for name in ("job", "command", "state", "started", "duration", "exit"):
        table.add_column(name, overflow="fold")
    now = time.time()
    for spec, state in found:
        start = state.started_at
        end = state.ended_at or (now if state.state == "running" else None)
        table.add_row(
            spec.job_id,
            " ".join(spec.command),  # a Text cell: never read as markup
            state.state,
            time.strftime("%H:%M:%S", time.localtime(start)) if start else "",
            f"{end - start:.0f} s" if start and end else "",
            "" if state.exit_code is None else str(state.exit_code),
        )
    if found:
        ui.out.print(table, markup=False)
    else:
        ui.info(f"no jobs on {rdv.cluster_id} yet")
    return 0


def run_logs(job: str, cluster_id: str | None = None, follow: bool = False) -> int:
    state = job_client.logs(job, _write, cluster_id=cluster_id, follow=follow)
    if follow:
        _say_end(Ui(), state)
        return exit_status(state)
    return 0


def run_cancel(job: str, cluster_id: str | None = None) -> int:
    state = job_client.cancel(job, cluster_id)
    if state is not None and state.state in ("succeeded", "failed", "cancelled", "rejected"):
        Ui().info(f"job {job} has ended already ({state.state})")
    else:
        Ui().info(f"asked the head to cancel {job}")
    return 0


def run_fetch(job: str, cluster_id: str | None = None, out: Path | None = None) -> int:
    rdv = job_client.open_cluster(cluster_id).rdv
    dest = out or Path("results") / rdv.cluster_id / "jobs" / job
    files = job_client.fetch(job, dest, cluster_id=rdv.cluster_id)
    Ui().info(f"{len(files)} file(s) of {job} in {dest}")
    return 0
